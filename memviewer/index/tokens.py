"""Token counts for the context anatomy, with the tokenizer memviewer ships.

The model an agent called has its own tokenizer, which memviewer does not have (it runs
offline and ships one model): counts are made with the packaged all-MiniLM-L6-v2 WordPiece
tokenizer and every answer names it (``name``, ``model_own: false``), beside the input
tokens the model itself reported when the span or call carried them. Without the tokenizer
package the count is characters / 4, and says so.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

_LOCK = threading.Lock()
_COUNTER: TokenCounter | None = None


class TokenCounter:
    """``count(texts)`` → one count per text (no special tokens, no truncation)."""

    def __init__(self) -> None:
        self._tok: Any = None
        self.name = "chars/4 estimate (the packaged tokenizer is not installed)"
        try:
            from tokenizers import Tokenizer

            from memviewer.index.embedder import default_model_files

            tok = Tokenizer.from_file(str(default_model_files()[1]))
            tok.no_truncation()
            tok.no_padding()
            self._tok = tok
            self.name = "all-MiniLM-L6-v2 WordPiece (memviewer's packaged tokenizer)"
        except Exception:  # ModelNotFoundError, a broken file: the estimate, named as such
            self._tok = None

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model_own": False,
            "note": "the called model's own tokenizer is not known offline: counts are estimates",
        }

    def count(self, texts: Sequence[str]) -> list[int]:
        if self._tok is None:
            return [(len(t) + 3) // 4 for t in texts]
        return [len(e.ids) for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]


def counter() -> TokenCounter:
    """The process's counter (loaded once: ~50 ms for the tokenizer file)."""
    global _COUNTER
    with _LOCK:
        if _COUNTER is None:
            _COUNTER = TokenCounter()
        return _COUNTER
