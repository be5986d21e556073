"""What one indexing pass works with, handed to its steps (catch-up, reconcile, summaries).

The index is the one the pass writes: the live tables, or a rebuild's staging tables,
so a step never reaches back into the ``Indexer`` for it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memviewer.index.turn_rows import embed_turns

if TYPE_CHECKING:
    from memviewer.index.embedder import Embedder
    from memviewer.index.lance import LanceIndex
    from memviewer.index.summarizer import Summarizer
    from memviewer.store.db import Store


@dataclass
class PassContext:
    """The tables, store, models and stop flag of one pass.

    ``contexts`` holds the opening of each touched session's summary, prefixed to its
    turns' text when contextual embeddings are on; it is filled as sessions are
    summarised during the pass.
    """

    index: LanceIndex
    store: Store
    summarizer: Summarizer
    embedder: Embedder
    stop: threading.Event
    contextual: bool = False
    contexts: dict[str, str] = field(default_factory=dict)

    def embed(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Index rows for these SQLite turns, with this pass's summary contexts."""
        return embed_turns(rows, self.embedder, self.contexts, self.stop)
