"""Retrieval evaluation (LongMemEval)."""
