"""Argument rules for turns, shared by ``SessionManager.add_turn`` and the batch fast path
(``session.fastpath``), so both refuse exactly the same commands with the same words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memviewer.errors import CONFLICT, INVALID_ARGUMENT, MemviewerError
from memviewer.ids import new_id
from memviewer.store import repos
from memviewer.timeutil import now, parse_ts

ROLES = ("user", "assistant", "tool", "system")


def require_str(name: str, value: Any, *, allow_empty: bool = True) -> str:
    if not isinstance(value, str):
        raise MemviewerError(INVALID_ARGUMENT, f"{name} must be a string, not {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise MemviewerError(INVALID_ARGUMENT, f"{name} must not be empty")
    return value


def opt_dict(name: str, value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MemviewerError(INVALID_ARGUMENT, f"{name} must be an object")
    return value


def timestamp(value: Any) -> float:
    try:
        ts = parse_ts(value)
    except ValueError as exc:
        raise MemviewerError(INVALID_ARGUMENT, str(exc)) from None
    return now() if ts is None else ts


@dataclass(frozen=True)
class TurnArgs:
    turn_id: str
    ts: float
    metadata: dict[str, Any] | None


def validate_turn(
    episode_id: Any,
    role: Any,
    content: Any,
    turn_id: Any,
    metadata: Any,
    tool_calls: Any,
    tool_call_id: Any,
    ts: Any,
) -> TurnArgs:
    """Argument checks shared by ``add_turn`` and the batch fast path."""
    require_str("episode_id", episode_id, allow_empty=False)
    require_str("role", role)
    if role not in ROLES:
        raise MemviewerError(INVALID_ARGUMENT, f"role must be one of {ROLES}, not {role!r}")
    require_str("content", content)
    metadata = opt_dict("metadata", metadata)
    if tool_calls is not None and not isinstance(tool_calls, list):
        raise MemviewerError(INVALID_ARGUMENT, "tool_calls must be a list")
    if tool_call_id is not None:
        require_str("tool_call_id", tool_call_id)
    tid = turn_id or new_id("t-")
    require_str("turn_id", tid, allow_empty=False)
    return TurnArgs(turn_id=tid, ts=timestamp(ts), metadata=metadata)


def replayed_turn(existing: dict[str, Any], episode_id: str) -> dict[str, Any]:
    if existing["episode_id"] != episode_id:
        raise MemviewerError(CONFLICT, f"turn {existing['id']!r} belongs to another episode")
    return repos.turn_public(existing)


def closed_episode_error(episode: dict[str, Any]) -> MemviewerError:
    return MemviewerError(CONFLICT, f"episode {episode['id']!r} is closed ({episode['closed_by']})")
