"""The publish operations a hub accepts and each one's arguments, declared once.

The wire shape of every ``{"op": ..., ...}`` command (docs/protocol.md, ``publish``) is one
``TypedDict`` here: its required and optional keys are what the manager's operation table
(``session/operations.py``) checks before it calls a handler, what the Publisher's builders
(``publisher/commands.py``) put in a command, and what the batch fast path and the
``record_*`` checks accept. ``tests/test_ops.py`` checks all of them against this module.
Standard library only: the publisher imports it.

No ``from __future__ import annotations`` here: ``NotRequired`` is read at class creation
(``__required_keys__``), which a string annotation would hide on Python 3.11.
"""

from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict


class OpenSessionArgs(TypedDict):
    session_id: NotRequired[str]
    agent: NotRequired[str]
    scope: NotRequired[str]
    scope_id: NotRequired[str]
    title: NotRequired[str]
    meta: NotRequired[dict[str, Any]]
    source: NotRequired[str]
    lineage_id: NotRequired[str]
    root_session_id: NotRequired[str]
    thread_id: NotRequired[str]
    parent_session_id: NotRequired[str]
    retention: NotRequired[str]
    active_window: NotRequired[int]
    ts: NotRequired[float]


class StartEpisodeArgs(TypedDict):
    session_id: str
    user_message: str
    episode_id: NotRequired[str]
    turn_id: NotRequired[str]
    meta: NotRequired[dict[str, Any]]
    metadata: NotRequired[dict[str, Any]]
    ts: NotRequired[float]


class AddTurnArgs(TypedDict):
    episode_id: str
    role: str
    content: str
    turn_id: NotRequired[str]
    metadata: NotRequired[dict[str, Any]]
    tool_calls: NotRequired[list[Any]]
    tool_call_id: NotRequired[str]
    ts: NotRequired[float]


class FinalizeEpisodeArgs(TypedDict):
    episode_id: str
    r_task: NotRequired[float]
    ts: NotRequired[float]


class AbandonEpisodeArgs(TypedDict):
    episode_id: str
    reason: NotRequired[str]
    ts: NotRequired[float]


class SessionIdArgs(TypedDict):
    """``close_session`` and ``delete_session``: the session, and when."""

    session_id: str
    ts: NotRequired[float]


class SetSessionAgentArgs(TypedDict):
    session_id: str
    agent: str
    ts: NotRequired[float]


class RecordRecallArgs(TypedDict):
    recall_id: str
    query: str
    results: list[dict[str, Any]]
    session_id: NotRequired[str]
    episode_id: NotRequired[str]
    params: NotRequired[dict[str, Any]]
    source: NotRequired[str]
    diagnostics: NotRequired[dict[str, Any]]
    kind: NotRequired[str]  # the hub's own recall log entries ("recall", "search")
    caller: NotRequired[dict[str, Any]]
    ts: NotRequired[float]


class RecordLlmCallArgs(TypedDict):
    call_id: str
    input: NotRequired[list[dict[str, Any]] | str]
    output: NotRequired[list[dict[str, Any]] | str]
    session_id: NotRequired[str]
    episode_id: NotRequired[str]
    model: NotRequired[str]
    provider: NotRequired[str]
    usage: NotRequired[dict[str, int]]
    latency_ms: NotRequired[float]
    recall_ids: NotRequired[list[str]]
    in_prompt: NotRequired[list[str]]
    context_window: NotRequired[int]
    source: NotRequired[str]  # "otlp" from the OTLP receiver, else "agent"
    meta: NotRequired[dict[str, Any]]
    problems: NotRequired[list[str]]  # what the OTLP receiver already found wrong
    ts: NotRequired[float]


class ShutdownArgs(TypedDict):
    episode_ids: list[str]
    ts: NotRequired[float]


@dataclass(frozen=True)
class OpArgs:
    """One operation's argument names: those a command must carry and those it may."""

    required: frozenset[str]
    optional: frozenset[str]

    @property
    def names(self) -> frozenset[str]:
        return self.required | self.optional

    def problem(self, args: dict[str, Any]) -> str | None:
        """What is wrong with the names in ``args`` (``None``: nothing); values are the handler's."""
        unknown = set(args) - self.names
        if unknown:
            return f"unknown fields {sorted(unknown)}"
        missing = self.required - set(args)
        if missing:
            return f"missing fields {sorted(missing)}"
        return None


def _spec(shape: Any) -> OpArgs:
    return OpArgs(frozenset(shape.__required_keys__), frozenset(shape.__optional_keys__))


#: Every op a hub accepts, in the order docs/protocol.md lists them.
OPS: dict[str, OpArgs] = {
    "open_session": _spec(OpenSessionArgs),
    "start_episode": _spec(StartEpisodeArgs),
    "add_turn": _spec(AddTurnArgs),
    "finalize_episode": _spec(FinalizeEpisodeArgs),
    "abandon_episode": _spec(AbandonEpisodeArgs),
    "close_session": _spec(SessionIdArgs),
    "delete_session": _spec(SessionIdArgs),  # the viewer's `D` and `demo --remove`, via the hub
    "set_session_agent": _spec(SetSessionAgentArgs),  # the OTLP receiver, when it learns the agent late
    "record_recall": _spec(RecordRecallArgs),
    "record_llm_call": _spec(RecordLlmCallArgs),
    "shutdown": _spec(ShutdownArgs),  # an agent's end: the episodes it names
}
