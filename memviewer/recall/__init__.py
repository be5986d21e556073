"""Recall: keyword session search (FTS5) and two-stage hierarchical recall."""
