"""Argument rules for turns and episodes, shared by ``SessionManager`` and the batch fast
path (``session.fastpath``), so both refuse exactly the same commands with the same words."""

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


TITLE_CHARS = 80


def title_from(message: str) -> str:
    """A session's title from its first user message (one line, at most ``TITLE_CHARS``)."""
    text = " ".join(message.split())
    return text if len(text) <= TITLE_CHARS else text[: TITLE_CHARS - 1] + "…"


@dataclass(frozen=True)
class EpisodeArgs:
    episode_id: str
    meta: dict[str, Any] | None
    metadata: dict[str, Any] | None


def validate_episode_start(
    session_id: Any, user_message: Any, episode_id: Any, meta: Any, metadata: Any
) -> EpisodeArgs:
    """Argument checks shared by ``start_episode`` and the batch fast path."""
    require_str("session_id", session_id, allow_empty=False)
    if not isinstance(user_message, str) or not user_message.strip():
        raise MemviewerError(INVALID_ARGUMENT, "user_message must be a non-empty string")
    meta = opt_dict("meta", meta)
    metadata = opt_dict("metadata", metadata)
    eid = episode_id or new_id("e-")
    require_str("episode_id", eid, allow_empty=False)
    return EpisodeArgs(episode_id=eid, meta=meta, metadata=metadata)


def replayed_episode(existing: dict[str, Any], session_id: str) -> dict[str, Any]:
    """A ``start_episode`` whose episode is stored: the stored one (no classification, no write)."""
    if existing["session_id"] != session_id:
        raise MemviewerError(CONFLICT, f"episode {existing['id']!r} belongs to another session")
    return repos.episode_public(existing)


def check_r_task(r_task: Any) -> None:
    if r_task is not None and (isinstance(r_task, bool) or not isinstance(r_task, int | float)):
        raise MemviewerError(INVALID_ARGUMENT, "r_task must be a number or null")


def closed_values(
    ep: dict[str, Any], closed_by: str, t: float, *, r_task: float | None, reason: str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``episodes`` columns a close writes and its event's payload (both paths)."""
    meta = dict(ep["meta"] or {})
    if reason:
        meta["close_reason"] = reason
    values: dict[str, Any] = {"status": "closed", "closed_by": closed_by, "ended_at": t, "meta": meta or None}
    if r_task is not None:
        values["r_task"] = float(r_task)
    payload: dict[str, Any] = {"closed_by": closed_by}
    if r_task is not None:
        payload["r_task"] = float(r_task)
    if reason:
        payload["reason"] = reason
    return values, payload
