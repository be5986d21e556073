"""Read PraisonAI session JSON files (format: docs/cli.md, "import") into memviewer sessions.

A file holds ``archived_messages`` (compacted out of the live window) and
``messages`` (the active window). They become one projection, archived first,
so indexes line up with PraisonAI's own search. Turn ids are derived from the
message itself, which makes a re-import of the same file a no-op.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from memviewer.jsonvalues import check_value, loads_strict
from memviewer.session.importcheck import MAX_INT, kind
from memviewer.timeutil import now, parse_ts

log = logging.getLogger("memviewer.io")

LINEAGE_KEYS = ("lineage_id", "root_session_id", "thread_id", "parent_session_id")


class ForeignFileError(ValueError):
    """The file is readable JSON but not a PraisonAI session."""


#: A session without a user id or an agent name is in this scope, with the session id as
#: scope id: it shares recall with no other session (``agent`` + "" would pool every
#: nameless session of every file together).
NAMELESS_SCOPE = "session"


def foreign_format(head: bytes | str) -> str | None:
    """What a file is when it is a memviewer export instead of a PraisonAI session (from
    its first bytes), with how to read it; None otherwise."""
    text = head.decode("utf-8", "replace") if isinstance(head, bytes) else head
    line = text.lstrip("\ufeff \t\r\n").split("\n", 1)[0].strip()
    if not line.startswith('{"'):
        return None
    try:
        first = loads_strict(line)
    except (ValueError, RecursionError):
        return None
    return export_kind(first)


def export_kind(first: Any) -> str | None:
    """``foreign_format`` for an already parsed object (a file's first line, or the file)."""
    if not isinstance(first, dict):
        return None
    if first.get("format") == "memviewer.export":
        return (
            f"this is a memviewer export (memviewer.export v{first.get('version')}), not a PraisonAI "
            "session; read it with `memviewer import json PATH`"
        )
    if {"session_id", "turn_id", "role", "content", "archived"} <= set(first):
        return (
            "this is a memviewer JSONL export (one turn per line), not a PraisonAI session; "
            "only `--format json` exports can be imported again (`memviewer import json PATH`)"
        )
    return None


@dataclass
class ImportReport:
    imported: list[dict[str, Any]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)

    @property
    def session_ids(self) -> list[str]:
        return [r["session_id"] for r in self.imported]

    def to_dict(self) -> dict[str, Any]:
        return {
            "imported": self.imported,
            "failed": [{"path": p, "error": e} for p, e in self.failed],
        }


def iter_session_files(paths: Iterable[str | Path]) -> Iterator[Path]:
    """Expand folders to their ``*.json`` files; lock files are not sessions."""
    for raw in paths:
        p = Path(raw).expanduser()
        if p.is_dir():
            yield from sorted(x for x in p.rglob("*.json") if x.is_file())
        elif p.name.endswith(".json.lock"):
            continue
        else:
            yield p


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multi-part content: keep the text parts
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        if parts:
            return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False, sort_keys=True)


def _lookup(data: dict[str, Any], meta: dict[str, Any], key: str) -> Any:
    value = data.get(key)
    return value if value not in (None, "") else meta.get(key)


def _id_text(value: Any, where: str) -> str | None:
    """A string field that PraisonAI (or a hand-written file) may also give as a number."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise ForeignFileError(f"{where} must be a string, not {kind(value)}")


def _file_ts(value: Any, where: str) -> float | None:
    try:
        return parse_ts(value)
    except ValueError as exc:
        raise ForeignFileError(f"{where}: {exc}") from None


def _compacted_count(value: Any, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_INT:
        raise ForeignFileError(f"{where} must be a whole number >= 0, not {kind(value)}")
    return value


def turn_id_for(session_id: str, role: str, ts: float, content: str, occurrence: int) -> str:
    h = hashlib.sha256(f"{session_id}\x00{role}\x00{ts!r}\x00{content}\x00{occurrence}".encode()).hexdigest()
    return f"t-{h[:32]}"


def parse_session(
    data: Any,
    fallback_id: str,
    default_ts: float | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Map one PraisonAI session object to (session row, turns in projection order).

    Every field is type-checked here (``ForeignFileError`` names the field), so
    nothing malformed reaches the store. ``default_ts`` (the file's mtime) dates
    messages of a file without any time, so their turn ids stay stable across imports.
    """
    if not isinstance(data, dict):
        raise ForeignFileError("top level is not a JSON object")
    if not any(isinstance(data.get(k), list) for k in ("messages", "archived_messages")):
        raise ForeignFileError(export_kind(data) or "no 'messages' or 'archived_messages' list")
    reason = check_value(data)
    if reason:
        raise ForeignFileError(f"the session {reason}")
    for key in ("messages", "archived_messages"):
        if data.get(key) is not None and not isinstance(data[key], list):
            raise ForeignFileError(f"{key} must be a list, not {kind(data[key])}")
    head = parse_head(data, fallback_id, default_ts)
    turns: list[dict[str, Any]] = []
    seen: Counter[tuple[str, float, str]] = Counter()
    projection = [
        (m, True, f"archived_messages[{i}]") for i, m in enumerate(data.get("archived_messages") or [])
    ]
    projection += [(m, False, f"messages[{i}]") for i, m in enumerate(data.get("messages") or [])]
    stats = TurnStats()
    for msg, archived, where in projection:
        turn = message_turn(msg, archived, where, head, seen)
        if turn is not None:
            stats.add(turn)
            turns.append(turn)
    return session_row(head, data, stats), turns


@dataclass
class Head:
    """What a session's top-level fields say, checked: everything a turn id or the
    session row needs besides the messages themselves."""

    sid: str
    created: float | None
    updated: float | None
    agent: str
    scope: str
    scope_id: str | None
    links: dict[str, str | None]
    title: str | None
    meta: dict[str, Any]
    fallback_ts: float


def parse_head(data: dict[str, Any], fallback_id: str, default_ts: float | None) -> Head:
    """The top-level fields of a session object (the message lists are not looked at)."""
    meta = data.get("metadata")
    if meta is None:
        meta = {}
    elif not isinstance(meta, dict):
        raise ForeignFileError(f"metadata must be an object, not {kind(meta)}")
    sid = _id_text(data.get("session_id"), "session_id") or fallback_id
    created = _file_ts(data.get("created_at"), "created_at")
    updated = _file_ts(data.get("updated_at"), "updated_at")
    agent = _id_text(data.get("agent_name"), "agent_name") or ""
    user_id = _id_text(data.get("user_id"), "user_id")
    if user_id:
        scope, scope_id = "user", user_id
    elif agent:
        scope, scope_id = "agent", agent
    else:
        scope, scope_id = NAMELESS_SCOPE, sid
    links = {k: _id_text(_lookup(data, meta, k), k) for k in ("source", *LINEAGE_KEYS)}
    title = meta.get("title")
    if not isinstance(title, str):
        title = None  # kept verbatim in the metadata; the session's title comes from elsewhere
    fallback_ts = created or updated or default_ts or now()
    return Head(sid, created, updated, agent, scope, scope_id, links, title, meta, fallback_ts)


class Occurrences(Protocol):
    """Counts how often a (role, timestamp, content) key was seen before (turn ids)."""

    def __getitem__(self, key: tuple[str, float, str]) -> int: ...
    def __setitem__(self, key: tuple[str, float, str], value: int) -> None: ...


def message_turn(
    msg: Any, archived: bool, where: str, head: Head, seen: Occurrences
) -> dict[str, Any] | None:
    """One message as a turn (None for a non-object entry, which PraisonAI tolerates too)."""
    if not isinstance(msg, dict):
        return None
    raw_role = msg.get("role")
    if raw_role is not None and not isinstance(raw_role, str):
        raise ForeignFileError(f"{where}.role must be a string, not {kind(raw_role)}")
    role = raw_role or "user"
    if role not in ("user", "assistant", "tool", "system"):
        role = "system" if role == "developer" else "assistant"
    raw_content = msg.get("content")
    if not (raw_content is None or isinstance(raw_content, str | list | dict)):
        raise ForeignFileError(
            f"{where}.content must be a string or a list of parts, not {kind(raw_content)}"
        )
    if isinstance(raw_content, list):
        for j, part in enumerate(raw_content):
            if not isinstance(part, str | dict):
                raise ForeignFileError(
                    f"{where}.content[{j}] must be a string or an object, not {kind(part)}"
                )
    content = _text(raw_content)
    ts = _file_ts(msg.get("timestamp"), f"{where}.timestamp") or head.fallback_ts
    mmeta = msg.get("metadata")
    if mmeta is not None and not isinstance(mmeta, dict):
        raise ForeignFileError(f"{where}.metadata must be an object, not {kind(mmeta)}")
    tool_calls = msg.get("tool_calls")
    if tool_calls is not None and not isinstance(tool_calls, list):
        raise ForeignFileError(f"{where}.tool_calls must be a list, not {kind(tool_calls)}")
    tool_call_id = _id_text(msg.get("tool_call_id"), f"{where}.tool_call_id")
    key = (role, ts, content)
    occurrence = seen[key]
    seen[key] = occurrence + 1
    is_summary = role == "system" and bool(mmeta and mmeta.get("compaction") is True)
    return {
        "id": turn_id_for(head.sid, role, ts, content, occurrence),
        "role": role,
        "content": content,
        "timestamp": ts,
        "archived": archived,
        "is_compaction_summary": is_summary and not archived,
        "replaced_count": _compacted_count(
            (mmeta or {}).get("compacted_count"), f"{where}.metadata.compacted_count"
        )
        if is_summary
        else 0,
        "tool_calls": tool_calls,
        "tool_call_id": tool_call_id,
        "meta": mmeta,
    }


@dataclass
class TurnStats:
    """What the session row needs from its turns, gathered one turn at a time."""

    first_stamp: float | None = None
    last_stamp: float | None = None
    first_user: str = ""
    count: int = 0
    archived: int = 0

    def add(self, turn: dict[str, Any]) -> None:
        ts = turn["timestamp"]
        self.first_stamp = ts if self.first_stamp is None else min(self.first_stamp, ts)
        self.last_stamp = ts if self.last_stamp is None else max(self.last_stamp, ts)
        if not self.first_user and turn["role"] == "user" and turn["content"]:
            self.first_user = turn["content"]
        self.count += 1
        self.archived += bool(turn["archived"])


def session_row(head: Head, data: dict[str, Any], stats: TurnStats) -> dict[str, Any]:
    """The session row of a file: ``data`` holds its top-level fields (the message lists
    are not read)."""
    started = head.created or (stats.first_stamp if stats.count else head.fallback_ts)
    last = head.updated or (stats.last_stamp if stats.count else started)
    title = head.title or " ".join(stats.first_user.split())[:80] or head.agent  # like native sessions
    extra = {k: v for k, v in data.items() if k not in _KNOWN_KEYS}
    session_meta = dict(head.meta)
    if extra:
        session_meta["praisonai_extra"] = extra
    return {
        "id": head.sid,
        "agent": head.agent,
        "scope": head.scope,
        "scope_id": head.scope_id,
        "title": title,
        "started_at": started,
        "last_seen_at": last,
        "closed_at": None,
        "status": "closed",
        **head.links,
        "meta": {
            "praisonai": {
                "user_id": data.get("user_id"),
                "agent_name": data.get("agent_name"),
                "created_at": data.get("created_at"),
                "updated_at": data.get("updated_at"),
            },
            "metadata": session_meta,
        },
    }


_KNOWN_KEYS = {
    "session_id",
    "messages",
    "archived_messages",
    "created_at",
    "updated_at",
    "agent_name",
    "user_id",
    "metadata",
    "source",
    *LINEAGE_KEYS,
}


def load_file(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    try:
        raw = path.read_bytes()
        mtime: float | None = path.stat().st_mtime
    except OSError as exc:
        raise ForeignFileError(f"cannot read: {exc.strerror or exc}") from None
    try:
        data = loads_strict(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ForeignFileError("not valid UTF-8") from None
    except ValueError as exc:
        other = foreign_format(raw[:4096])
        raise ForeignFileError(other or f"not valid JSON ({exc})") from None
    try:
        mtime = parse_ts(mtime)
    except ValueError:
        mtime = None
    stem = path.name[: -len(".json")] if path.name.endswith(".json") else path.stem
    return parse_session(data, stem, mtime)
