"""LLM calls and their context anatomy: what the model was sent, part by part (pure code;
rows live in ``memviewer.store.llm_calls``)."""
