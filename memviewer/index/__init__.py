"""Vector side of recall: local sentence embeddings and the vector index."""
