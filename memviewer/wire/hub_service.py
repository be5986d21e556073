"""What the hub needs from the service it serves: the front ends' ``Reader``
(``memviewer.contract.reader``) and, beside it, the writes, the store and the indexer the
hub runs itself (``memviewer.service.MemoryService`` implements it; the hub sits a layer
below the service, so it names a protocol)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memviewer.config import Settings
from memviewer.contract.reader import Reader
from memviewer.recall_log import Entry
from memviewer.store.db import Store

if TYPE_CHECKING:
    from memviewer.index.indexer import Indexer

# Where the service hands recall log entries when it does not write them itself (an entry
# may be a function building it: the hub builds a search's after the answer is written).
RecordSink = Callable[[Entry], None]


class HubService(Reader, Protocol):
    """``Reader`` (the reads the hub serves over its socket) extended by the writes, the
    store and the indexer the hub drives itself."""

    settings: Settings
    home: Path
    store: Store
    record_sink: RecordSink | None

    def apply_batch(self, commands: list[Any]) -> list[dict[str, Any]]: ...

    def merge_keyword_index(self, pages: int | None = None, above: int = 1) -> tuple[int, int, bool]: ...

    def indexer(self) -> Indexer: ...
