"""What the hub needs from the service it serves (``memviewer.service.MemoryService``
implements it; the hub sits a layer below the service, so it names a protocol)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memviewer.config import Settings
from memviewer.recall_log import Entry, RecordAs
from memviewer.store.db import Store
from memviewer.store.events import EventRecord

if TYPE_CHECKING:
    from memviewer.index.indexer import Indexer

# Where the service hands recall log entries when it does not write them itself (an entry
# may be a function building it: the hub builds a search's after the answer is written).
RecordSink = Callable[[Entry], None]


class HubService(Protocol):
    """The writes, reads and store the hub serves over its socket."""

    settings: Settings
    home: Path
    store: Store
    record_sink: RecordSink | None

    def apply_batch(self, commands: list[Any]) -> list[dict[str, Any]]: ...

    def merge_keyword_index(self, pages: int | None = None, above: int = 1) -> tuple[int, int, bool]: ...

    def events(
        self,
        from_seq: int = 0,
        limit: int = 1000,
        kinds: list[str] | None = None,
        session_id: str | None = None,
    ) -> list[EventRecord]: ...

    def sessions(
        self,
        *,
        scope: str | None = None,
        scope_id: str | None = None,
        filter: str | None = None,
        sort: str = "last_seen",
        descending: bool = True,
        limit: int | None = None,
        offset: int = 0,
    ) -> dict[str, Any]: ...

    def session(self, session_id: str) -> dict[str, Any]: ...

    def search(
        self,
        query: str | None = None,
        *,
        session_id: str | None = None,
        around: int | str | None = None,
        limit: int = 5,
        window: int = 5,
        scope: str | None = None,
        scope_id: str | None = None,
        record: RecordAs | None = None,
    ) -> dict[str, Any]: ...

    def recall(self, query: str, *, record: RecordAs | None = None, **params: Any) -> dict[str, Any]: ...

    def stats(self) -> dict[str, Any]: ...

    def indexer(self) -> Indexer: ...
