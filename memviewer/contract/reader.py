"""The protocols every front end is written against (``memviewer.api`` is their face).

* ``Reader``: the reads any service answers, in this process (``MemoryService``) or
  through the hub (``RemoteService``), A/B comparison included.
* ``Inspector``: reads only the process that opened the store can answer, because they
  re-run recall's stages or read tables the hub does not serve (why-not, the index's lag,
  the recall and LLM-call logs, annotations, session titles).
* ``Writer``: what front ends write (annotations, deletes, imports, export, the derived
  index's upkeep); ``LocalService`` is all three, what the viewer and the CLI's
  composition root (``commands.common.open_service``) hold.

They sit in the lowest layer so the hub (``wire.hub_service.HubService``, a documented
extension of ``Reader``) can name them too; their types are imported for checking only.
Results are the JSON shapes of ``docs/cli.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

if TYPE_CHECKING:
    from memviewer.events import EventRecord
    from memviewer.praisonai.format import ImportReport
    from memviewer.recall.rerank import Reranker
    from memviewer.recall_log import RecordAs

#: ``progress(done, planned)`` of a why-not's re-runs.
Progress = Callable[[int, int], None]


@runtime_checkable
class Reader(Protocol):
    """Reads every front end may make. Errors are ``MemviewerError`` with a code."""

    @property
    def last_seq(self) -> int: ...

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

    def recall(self, query: str, *, record: RecordAs | None = None, **params: Any) -> dict[str, Any]:
        """``RecallResult``; ``params`` are ``RecallParams.as_kwargs()`` plus, for a display,
        ``with_tool_calls=True`` (rows of turns that called tools carry ``tool_calls``)."""
        ...

    def compare(self, query: str, params: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
        """Recall with ``params`` (A) and with ``overrides`` laid over them (B), at one moment:
        ``{query, a, b, diff}`` (docs/cli.md, ``recall --vs``)."""
        ...

    def stats(self) -> dict[str, Any]: ...

    def events(
        self,
        from_seq: int = 0,
        limit: int = 1000,
        kinds: list[str] | None = None,
        session_id: str | None = None,
    ) -> list[EventRecord]: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class Inspector(Protocol):
    """Reads answered by the process that opened the store (not carried by the hub)."""

    readonly: bool
    #: The neural reranker recall blends in, when one is configured (none ships by default).
    reranker: Reranker | None

    def check_turn(self, turn_id: str, scope: str | None, scope_id: str | None) -> dict[str, Any]:
        """The turn's row; ``not_found`` / ``invalid_argument`` when it is unknown or outside the scope."""
        ...

    def why(
        self,
        query: str,
        turn_id: str,
        params: Mapping[str, Any],
        *,
        cache: Any = None,
        progress: Progress | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(recall result, why)``: ``turn_id`` followed through every stage of recall under
        ``params``, with a fix found by re-running (``recall --why``); ``cache`` shares the
        reads of several why-nots of one question."""
        ...

    def why_cache(self) -> object:
        """What ``why(cache=...)`` takes to share the reads of several why-nots of one question."""
        ...

    def index_lag(self) -> dict[str, Any]:
        """How far the vector index is behind the store (``index.progress.index_lag``)."""
        ...

    def attach_tool_calls(self, session_id: str, messages: Iterable[MutableMapping[str, Any]]) -> None:
        """Put ``tool_calls`` on the blank messages of a search's scroll window (for display)."""
        ...

    def session_titles(self, session_ids: Iterable[str]) -> dict[str, str]:
        """Titles (or the id) of the sessions that exist among ``session_ids``."""
        ...

    def recalls(
        self,
        *,
        source: str | None = None,
        session_id: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> dict[str, Any]: ...

    def recall_entry(self, recall_id: str) -> dict[str, Any]: ...

    def llm_calls(
        self, *, session_id: str | None = None, limit: int = 100, offset: int = 0
    ) -> dict[str, Any]: ...

    def llm_call(self, call_id: str) -> dict[str, Any]: ...

    def annotations(
        self, target_id: str | None = None, *, tag: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]: ...


@runtime_checkable
class Writer(Protocol):
    """The writes front ends make; errors are ``MemviewerError`` (``not_found``,
    ``invalid_argument``, ``read_only`` …)."""

    def tag(self, target_id: str, tags: list[str], *, remove: bool = False) -> dict[str, Any]: ...

    def note(self, target_id: str, text: str | None) -> dict[str, Any]: ...

    def delete_session(self, session_id: str) -> dict[str, Any]: ...

    def apply_batch(self, commands: list[Any]) -> list[dict[str, Any]]: ...

    def import_session(
        self,
        session: dict[str, Any],
        turns: list[dict[str, Any]],
        episodes: list[dict[str, Any]] | None = None,
        *,
        origin: str | None = None,
        replace: bool = False,
        keep_missing: bool = False,
    ) -> dict[str, Any]: ...

    def import_praisonai(
        self,
        paths_: Iterable[str | Path],
        progress: Callable[[int, int, str], None] | None = None,
        *,
        index: bool = True,
        replace: bool = False,
        file_progress: Callable[[int, int, str], None] | None = None,
    ) -> ImportReport: ...

    def import_annotations(self, session_id: str, marks: dict[str, dict[str, Any]]) -> None: ...

    def import_llm_calls(self, commands: list[dict[str, Any]]) -> None: ...

    def export(self, session_ids: list[str] | None, fmt: str, out: Any, **kw: Any) -> dict[str, Any]: ...

    def sync_index(self, session_ids: list[str] | None = None) -> dict[str, Any]: ...

    def reindex(self, progress: Callable[..., None] | None = None) -> dict[str, Any]:
        """Rebuild the derived indexes (FTS5, vectors, summaries) from the store."""
        ...


@runtime_checkable
class LocalService(Reader, Inspector, Writer, Protocol):
    """A service opened in this process: every read and write a front end makes."""
