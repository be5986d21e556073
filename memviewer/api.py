"""The typed reader API: what every front end (CLI, viewer, hub, MCP server, new
sources) may ask of memory, and the one place that decides where the answer
comes from.

* ``MemoryReader`` is the protocol. ``memviewer.service.MemoryService`` (in
  process) and ``memviewer.wire.remote.RemoteService`` (through the hub that
  serves the home) both implement it, so a front end written against it works
  either way.
* ``SearchParams`` / ``RecallParams`` hold the one set of bounds for search and
  recall parameters; the hub's parameter check, the CLI, the Recall screen and
  the recall layers all validate through them.
* ``open_reader`` decides, in one place, whether to talk to a hub or to open the
  store read-only.

Results are the JSON shapes of ``docs/cli.md`` (the same objects the hub sends
and ``--json`` prints); the TypedDicts below name their keys for type checkers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, NotRequired, Protocol, TypedDict, runtime_checkable

from memviewer.errors import INVALID_ARGUMENT, MemviewerError

if TYPE_CHECKING:
    from memviewer.config import Settings
    from memviewer.recall_log import RecordAs
    from memviewer.store.events import EventRecord

__all__ = [
    "DEFAULT_CHUNKS_PER_SESSION",
    "DEFAULT_TOP_K",
    "DEFAULT_TOP_SESSIONS",
    "MAX_CHUNKS_PER_SESSION",
    "MAX_SEARCH_LIMIT",
    "MAX_SEARCH_WINDOW",
    "MAX_TOP_K",
    "MAX_TOP_SESSIONS",
    "RECALL_MODES",
    "AnnotationWriter",
    "MemoryReader",
    "RecallHit",
    "RecallParams",
    "RecallResult",
    "SearchParams",
    "SessionInfo",
    "SessionPage",
    "SessionView",
    "TurnInfo",
    "open_reader",
]

# The one set of bounds lives in memviewer.params (a low layer: recall and the hub use it
# too); re-exported here as part of the API.
from memviewer.params import (  # noqa: E402
    DEFAULT_CHUNKS_PER_SESSION,
    DEFAULT_TOP_K,
    DEFAULT_TOP_SESSIONS,
    MAX_CHUNKS_PER_SESSION,
    MAX_SEARCH_LIMIT,
    MAX_SEARCH_WINDOW,
    MAX_TOP_K,
    MAX_TOP_SESSIONS,
    RECALL_MODES,
    int_param,
)


def _opt_text(name: str, value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise MemviewerError(INVALID_ARGUMENT, f"{name} must be a string, not {type(value).__name__}")
    return value


@dataclass(frozen=True)
class SearchParams:
    """Keyword search: discovery (``query``), scroll (``session_id``) or browse (neither)."""

    query: str | None = None
    session_id: str | None = None
    around: int | str | None = None
    limit: int = 5
    window: int = 5
    scope: str | None = None
    scope_id: str | None = None

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> SearchParams:
        """Validate once; raises ``MemviewerError(invalid_argument)`` naming the bad key."""
        unknown = set(raw) - {f for f in cls.__dataclass_fields__}
        if unknown:
            raise MemviewerError(INVALID_ARGUMENT, f"unknown search parameters: {sorted(unknown)}")
        query = raw.get("query")
        if query is not None and not isinstance(query, str):
            raise MemviewerError(INVALID_ARGUMENT, "query must be a string")
        return cls(
            query=query,
            session_id=_opt_text("session_id", raw.get("session_id")),
            around=raw.get("around"),
            limit=int_param("limit", raw.get("limit"), 5, 1, MAX_SEARCH_LIMIT),
            window=int_param("window", raw.get("window"), 5, 0, MAX_SEARCH_WINDOW),
            scope=_opt_text("scope", raw.get("scope")),
            scope_id=_opt_text("scope_id", raw.get("scope_id")),
        )

    def as_kwargs(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RecallParams:
    """What a caller may set for recall. Weights and tuning are not here on purpose: they
    come from settings (and the evaluators), never from a socket or MCP client."""

    query: str
    scope: str | None = None
    scope_id: str | None = None
    top_sessions: int = DEFAULT_TOP_SESSIONS
    chunks_per_session: int = DEFAULT_CHUNKS_PER_SESSION
    top_k: int = DEFAULT_TOP_K
    mode: str = "hierarchical"
    as_of: float | str | None = None
    rerank: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> RecallParams:
        query = raw.get("query")
        if not isinstance(query, str) or not query.strip():
            raise MemviewerError(INVALID_ARGUMENT, "query must be a non-empty string")
        unknown = set(raw) - ({f for f in cls.__dataclass_fields__} - {"extra"})
        if unknown:
            raise MemviewerError(INVALID_ARGUMENT, f"unknown recall parameters: {sorted(unknown)}")
        mode = raw.get("mode") or "hierarchical"
        if mode not in RECALL_MODES:
            raise MemviewerError(INVALID_ARGUMENT, f"mode must be one of {RECALL_MODES}, not {mode!r}")
        rerank = raw.get("rerank")
        if rerank is not None and not isinstance(rerank, bool):
            raise MemviewerError(INVALID_ARGUMENT, "rerank must be true or false")
        as_of = raw.get("as_of")
        if as_of is not None and (isinstance(as_of, bool) or not isinstance(as_of, (int, float, str))):
            from memviewer.recall.timeref import AS_OF_FORMS

            raise MemviewerError(INVALID_ARGUMENT, f"as_of must be {AS_OF_FORMS}")
        return cls(
            query=query,
            scope=_opt_text("scope", raw.get("scope")),
            scope_id=_opt_text("scope_id", raw.get("scope_id")),
            top_sessions=int_param(
                "top_sessions", raw.get("top_sessions"), DEFAULT_TOP_SESSIONS, 1, MAX_TOP_SESSIONS
            ),
            chunks_per_session=int_param(
                "chunks_per_session",
                raw.get("chunks_per_session"),
                DEFAULT_CHUNKS_PER_SESSION,
                1,
                MAX_CHUNKS_PER_SESSION,
            ),
            top_k=int_param("top_k", raw.get("top_k"), DEFAULT_TOP_K, 1, MAX_TOP_K),
            mode=mode,
            as_of=as_of,
            rerank=rerank,
        )

    def as_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``MemoryReader.recall`` (without the query)."""
        out = asdict(self)
        out.pop("query")
        out.pop("extra")
        return {k: v for k, v in out.items() if v is not None}


# -- result shapes (documented in docs/cli.md) -------------------------------------------
class SessionInfo(TypedDict, total=False):
    session_id: str
    agent: str | None
    scope: str
    scope_id: str | None
    title: str | None
    status: str
    source: str | None
    started_at: str | None
    last_seen_at: str | None
    closed_at: str | None
    parent_session_id: str | None
    episodes: int
    active_turns: int
    archived_turns: int
    meta: dict[str, Any]


class SessionPage(TypedDict):
    total: int
    offset: int
    sessions: list[SessionInfo]


class TurnInfo(TypedDict, total=False):
    turn_id: str
    session_id: str
    episode_id: str | None
    index: int
    role: str
    content: str
    timestamp: str | None
    archived: bool
    is_compaction_summary: bool
    replaced_count: int
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None
    metadata: dict[str, Any]


class SessionView(TypedDict):
    session: SessionInfo
    episodes: list[dict[str, Any]]
    turns: list[TurnInfo]


class RecallHit(TypedDict):
    """One row of ``RecallResult.results``."""

    turn_id: str
    session_id: str
    episode_id: str | None
    index: int
    role: str
    content: str
    archived: bool
    timestamp: str | None
    score: float
    score_breakdown: dict[str, float]
    metadata: dict[str, Any]
    #: Only with ``recall(..., with_tool_calls=True)``, on turns that called tools: what a
    #: display shows for a tool-call-only turn. Not part of the JSON contract's rows.
    tool_calls: NotRequired[list[dict[str, Any]]]


class RecallResult(TypedDict):
    query: str
    scope: str | None
    scope_id: str | None
    results: list[RecallHit]
    diagnostics: dict[str, Any]


@runtime_checkable
class MemoryReader(Protocol):
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

    def stats(self) -> dict[str, Any]: ...

    def events(
        self,
        from_seq: int = 0,
        limit: int = 1000,
        kinds: list[str] | None = None,
        session_id: str | None = None,
    ) -> list[EventRecord]: ...

    def close(self) -> None: ...


@runtime_checkable
class AnnotationWriter(Protocol):
    """The user's tags and notes on sessions and turns (``MemoryService`` implements it;
    the hub protocol does not carry it: see docs/protocol.md). Reads of annotations come
    with the reader's own answers (``sessions``, ``session``, ``search``); errors are
    ``MemviewerError`` (``not_found`` for an id that is neither a session nor a turn,
    ``invalid_argument`` for a bad tag or note)."""

    def tag(self, target_id: str, tags: list[str], *, remove: bool = False) -> dict[str, Any]: ...

    def note(self, target_id: str, text: str | None) -> dict[str, Any]: ...

    def annotations(
        self, target_id: str | None = None, *, tag: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]: ...


def open_reader(settings: Settings, *, client: str = "memviewer.reader") -> MemoryReader:
    """The reader for ``settings``' home: the hub serving it when one answers, else the
    store opened read-only in this process (created empty if it does not exist yet).

    The decision of which hub serves a home is ``memviewer.wire.probe.serving_hub``;
    this function never picks a hub on its own.
    """
    from memviewer.wire.probe import serving_hub

    socket_path = serving_hub(settings)
    if socket_path is not None:
        from memviewer.wire.remote import RemoteService

        return RemoteService(socket_path, client=client)
    from memviewer.service import MemoryService

    readonly = (settings.home_path / "memviewer.db").exists()
    return MemoryService(settings, readonly=readonly)
