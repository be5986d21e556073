"""The typed reader API: what every front end (CLI, viewer, hub, MCP server, new
sources) may ask of memory, and the one place that decides where the answer
comes from.

* ``Reader`` is the protocol of reads. ``memviewer.service.MemoryService`` (in
  process) and ``memviewer.wire.remote.RemoteService`` (through the hub that
  serves the home) both implement it, so a front end written against it works
  either way. ``Inspector`` (why-not, the index's lag, the logs) and ``Writer``
  (annotations, deletes, imports, export) are what only an in-process service
  answers; ``LocalService`` is all three. They are declared in
  ``memviewer.contract.reader`` (the hub's ``HubService`` extends ``Reader``).
* ``SearchParams`` / ``RecallParams`` (declared in ``memviewer.contract.requests``)
  hold the one set of bounds for search and recall parameters; the hub's parameter
  check, the CLI's options, the MCP schemas, the Recall screen and the recall layers
  are derived from them.
* ``open_reader`` decides, in one place, whether to talk to a hub or to open the
  store read-only.

Results are the JSON shapes of ``docs/cli.md`` (the same objects the hub sends
and ``--json`` prints); the TypedDicts below name their keys for type checkers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

if TYPE_CHECKING:
    from memviewer.config import Settings

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
    "Inspector",
    "LocalService",
    "RecallHit",
    "RecallParams",
    "RecallResult",
    "Reader",
    "SearchParams",
    "SessionInfo",
    "SessionPage",
    "SessionView",
    "TurnInfo",
    "Writer",
    "int_param",
    "open_reader",
]

# The request models live in memviewer.contract (the lowest layer: recall, the hub, the CLI
# and MCP derive from them); re-exported here as part of the API.
from memviewer.contract.reader import Inspector, LocalService, Reader, Writer  # noqa: E402
from memviewer.contract.requests import RecallParams, SearchParams  # noqa: E402
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


def open_reader(settings: Settings, *, client: str = "memviewer.reader") -> Reader:
    """The reader for ``settings``' home: the hub serving it when one answers, else the
    store opened read-only in this process (created empty if it does not exist yet).

    The decision of which hub serves a home is ``memviewer.wire.probe.serving_hub``;
    this function never picks a hub on its own.
    """
    from memviewer.wire.probe import serving_hub
    from memviewer.wire.remote import hub_address

    remote = hub_address(settings)  # a remote hub (``MEMVIEWER_HUB=tls://…``) is the reader
    if remote is not None:
        from memviewer.wire.remote import RemoteService

        return RemoteService(remote, client=client)
    socket_path = serving_hub(settings)
    if socket_path is not None:
        from memviewer.wire.remote import RemoteService

        return RemoteService(socket_path, client=client)
    from memviewer.service import MemoryService

    readonly = (settings.home_path / "memviewer.db").exists()
    return MemoryService(settings, readonly=readonly)


if TYPE_CHECKING:  # mypy checks that both services satisfy the protocols (tests/test_api.py at run time)
    from memviewer.service import MemoryService
    from memviewer.wire.hub_service import HubService
    from memviewer.wire.remote import RemoteService

    def _conforms(local: MemoryService, remote: RemoteService) -> None:
        readers: list[Reader] = [local, remote]
        full: LocalService = local
        hubs: HubService = local
        del readers, full, hubs
