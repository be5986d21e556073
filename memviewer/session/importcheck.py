"""Type and range checks for whole-session imports (``SessionManager.import_session``).

Importers hand over rows built from files nobody validated. Every field is
checked here before anything reaches SQLite, so a malformed file fails with a
message that names the field, not with a driver error halfway through a folder
or, worse, with a stored value (a year-58413 timestamp) that breaks every later
listing of the home.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memviewer.errors import CONFLICT, INVALID_ARGUMENT, MemviewerError
from memviewer.jsonvalues import check_value
from memviewer.timeutil import EARLIEST, LATEST

if TYPE_CHECKING:
    from memviewer.store.db import Connection

ROLES = ("user", "assistant", "tool", "system")  # = manager.ROLES (no import: it imports us)
SESSION_STATUSES = ("open", "closed", "pruned")
EPISODE_STATUSES = ("open", "closed")
RETENTIONS = ("compact", "keep_all")
MAX_INT = 2**63 - 1  # SQLite INTEGER
SESSION_STRS = (
    "agent",
    "scope",
    "scope_id",
    "title",
    "source",
    "lineage_id",
    "root_session_id",
    "thread_id",
    "parent_session_id",
)
EPISODE_STRS = ("closed_by", "intent_kind", "intent_rule", "intent_source")
EPISODE_DEFAULTS = {
    "status": "open",
    "intent_kind": "unknown",
    "intent_confidence": 0.0,
    "intent_rule": "none",
    "intent_source": "heuristic",
}


def kind(value: Any) -> str:
    """``a list``, ``an object``…: how a JSON value is named in error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _bad(message: str) -> MemviewerError:
    return MemviewerError(INVALID_ARGUMENT, message)


def _str(where: str, value: Any, *, required: bool = False, choices: Sequence[str] = ()) -> None:
    if value is None and not required:
        return
    if not isinstance(value, str) or (required and not value):
        raise _bad(f"{where} must be a {'non-empty ' if required else ''}string, not {kind(value)}")
    if choices and value not in choices:
        raise _bad(f"{where} must be one of {', '.join(choices)}, not {value!r}")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _time(where: str, value: Any, *, required: bool = False) -> None:
    if value is None and not required:
        return
    if not _number(value):
        raise _bad(f"{where} must be epoch seconds, not {kind(value)}")
    if (isinstance(value, float) and not math.isfinite(value)) or not EARLIEST <= value <= LATEST:
        raise _bad(f"{where} {value!r:.40} is not a time between the years 1970 and 9999")


def _int(where: str, value: Any, low: int, high: int = MAX_INT) -> None:
    if value is None:
        return
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise _bad(f"{where} must be a whole number from {low} to {high}, not {value!r:.40}")


def _typed(where: str, value: Any, types: type | tuple[type, ...], name: str) -> None:
    if value is not None and not isinstance(value, types):
        raise _bad(f"{where} must be {name} or null, not {kind(value)}")


def check_session(session: Any) -> None:
    if not isinstance(session, dict):
        raise _bad(f"a session must be an object, not {kind(session)}")
    _str("session_id", session.get("id"), required=True)
    for key in SESSION_STRS:
        _str(key, session.get(key))
    _str("status", session.get("status"), choices=SESSION_STATUSES)
    _str("retention", session.get("retention"), choices=RETENTIONS)
    for key in ("started_at", "last_seen_at", "closed_at"):
        _time(key, session.get(key))
    _int("active_window", session.get("active_window"), 2, 2**31 - 1)
    _typed("metadata", session.get("meta"), dict, "an object")


def check_episode(i: int, ep: Any) -> None:
    if not isinstance(ep, dict):
        raise _bad(f"episode {i} must be an object, not {kind(ep)}")
    _str(f"episode {i}: episode_id", ep.get("id"), required=True)
    where = f"episode {ep['id']!r}"
    _str(f"{where}: status", ep.get("status"), choices=EPISODE_STATUSES)
    for key in EPISODE_STRS:
        _str(f"{where}: {key}", ep.get(key))
    _time(f"{where}: started_at", ep.get("started_at"), required=True)
    _time(f"{where}: ended_at", ep.get("ended_at"))
    for key in ("intent_confidence", "r_task"):
        value = ep.get(key)
        if value is not None and not (_number(value) and math.isfinite(value)):
            raise _bad(f"{where}: {key} must be a finite number or null, not {value!r:.40}")
    _typed(f"{where}: metadata", ep.get("meta"), dict, "an object")


def check_turn(i: int, turn: Any) -> None:
    if not isinstance(turn, dict):
        raise _bad(f"turn {i} must be an object, not {kind(turn)}")
    _str(f"turn {i}: turn_id", turn.get("id"), required=True)
    where = f"turn {i} ({turn['id']})"
    _str(f"{where}: role", turn.get("role"), required=True, choices=ROLES)
    _str(f"{where}: content", turn.get("content"))
    _time(f"{where}: timestamp", turn.get("timestamp"), required=True)
    _str(f"{where}: episode_id", turn.get("episode_id"))
    for key in ("archived", "is_compaction_summary"):
        _typed(f"{where}: {key}", turn.get(key), bool, "true/false")
    _int(f"{where}: replaced_count", turn.get("replaced_count"), 0)
    _typed(f"{where}: tool_calls", turn.get("tool_calls"), list, "a list")
    _str(f"{where}: tool_call_id", turn.get("tool_call_id"))
    _typed(f"{where}: metadata", turn.get("meta"), dict, "an object")


def check_import(session: Any, turns: Any, episodes: Any = None) -> None:
    """Raise ``invalid_argument`` naming the first field ``import_session`` cannot store."""
    check_session(session)
    if not isinstance(turns, list):
        raise _bad(f"turns must be a list, not {kind(turns)}")
    if episodes is not None and not isinstance(episodes, list):
        raise _bad(f"episodes must be a list, not {kind(episodes)}")
    reason = check_value({"session": session, "episodes": episodes or [], "turns": turns})
    if reason:
        raise _bad(f"session {session['id']!r} {reason}")
    ep_ids: set[str] = set()
    for i, ep in enumerate(episodes or []):
        check_episode(i, ep)
        if ep["id"] in ep_ids:
            raise _bad(f"episode id {ep['id']!r} appears twice")
        ep_ids.add(ep["id"])
    turn_ids: set[str] = set()
    for i, turn in enumerate(turns):
        check_turn(i, turn)
        if turn["id"] in turn_ids:
            raise _bad(f"turn id {turn['id']!r} appears twice")
        turn_ids.add(turn["id"])


# -- where an existing session came from --------------------------------------
LIVE = "live"


def prior_origin(conn: Connection, session_id: str) -> str | None:
    """Where ``session_id``'s stored history came from, as its last import recorded it.

    ``live`` when it was never imported (published through the hub or the API);
    None when it was imported without an origin (older versions, direct calls),
    which any importer may update.
    """
    from memviewer.store.import_pages import last_import_payload

    imported, payload = last_import_payload(conn, session_id)
    if not imported:
        return LIVE
    data = payload or {}
    origin = data.get("origin") if isinstance(data, dict) else None
    return origin if isinstance(origin, str) else None


def live_turns_since_import(conn: Connection, session_id: str) -> int:
    """Turns published live into ``session_id`` after its last import.

    A re-import makes the session match its file, which would delete these: the
    caller refuses unless told to replace.
    """
    from memviewer.store.import_pages import turns_added_since_import

    return turns_added_since_import(conn, session_id)


def describe_origin(origin: str) -> str:
    """``praisonai:/x/a.json`` -> ``PraisonAI file /x/a.json`` (for messages)."""
    if origin == LIVE:
        return "published live"
    kind_, _, where = origin.partition(":")
    names = {"praisonai": "PraisonAI file", "export": "memviewer export", "longmemeval": "LongMemEval file"}
    return f"{names[kind_]} {where}" if kind_ in names and where else origin


def is_foreign(prior: str | None, origin: str | None) -> bool:
    """Whether a stored session came from elsewhere than this import: another file's, or one
    published live. An origin-less caller (the API, the eval) may update origin-less imports,
    but never silently take a live session."""
    return prior is not None and prior != origin and (origin is not None or prior == LIVE)


def session_exists(session_id: str, prior: str | None) -> MemviewerError:
    """The refusal of an import onto a foreign session without ``replace``."""
    return MemviewerError(
        CONFLICT,
        f"session {session_id} already exists (from {describe_origin(str(prior))})",
        data={"reason": "session_exists", "origin": prior},
    )


def live_turns_would_go(session_id: str, live: int) -> MemviewerError:
    """The refusal of a re-import that would remove turns published live since the import."""
    return MemviewerError(
        CONFLICT,
        f"session {session_id} has {live} turns published live since it was "
        "imported; re-importing would remove them",
        data={"reason": "live_turns", "hint": "pass --replace to make the session match the file anyway"},
    )


def stored_turn(turn: dict[str, Any], session_id: str, episode_id: str | None, idx: int) -> dict[str, Any]:
    """The turn row an import writes (without its id), from a checked turn: the whole-session
    and the chunked import store, and compare against what is stored, exactly these columns."""
    return {
        "session_id": session_id,
        "episode_id": episode_id,
        "idx": idx,
        "role": turn["role"],
        "content": turn.get("content") or "",
        "timestamp": turn["timestamp"],
        "archived": bool(turn.get("archived")),
        "is_compaction_summary": bool(turn.get("is_compaction_summary")),
        "replaced_count": int(turn.get("replaced_count") or 0),
        "tool_calls": turn.get("tool_calls"),
        "tool_call_id": turn.get("tool_call_id"),
        "meta": turn.get("meta"),
    }
