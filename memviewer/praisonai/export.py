"""PraisonAI session JSON: one ``<session_id>.json`` per session, in a folder.

Written the way ``praisonaiagents`` writes its own files (``indent=2``, keys in
``SessionData.to_dict`` order), and read back by ``memviewer import praisonai``
without loss: the importer derives turn ids from (session id, role, timestamp,
content, occurrence), and every one of those is written verbatim, so a round
trip yields the same ids and rows.

A session that came from PraisonAI is written from what the importer kept:
``meta["praisonai"]`` (original ``user_id``, ``agent_name``, ``created_at``,
``updated_at``) and ``meta["metadata"]`` (the original metadata, whose
``praisonai_extra`` holds the file's other top-level keys). A live session maps
``scope == "user"`` to ``user_id``, its agent to ``agent_name``, its title to
``metadata.title``, and its times to ISO 8601 strings. The user's tags and notes, when
there are any, are written under ``metadata.memviewer_annotations``.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from memviewer.io.exporters.bundle import Bundle
from memviewer.timeutil import to_datetime

LINEAGE = ("lineage_id", "root_session_id", "thread_id", "parent_session_id")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_HASHED = re.compile(r".*-[0-9a-f]{10}")  # the shape of a hashed name (see file_name)
MAX_STEM = 120  # bytes of an id kept readable in a hashed name; far below NAME_MAX (255)


def file_name(session_id: str) -> str:
    """A unique, safe ``<name>.json`` for a session id (the id itself lives in the file).

    An id that is filename-safe (``[A-Za-z0-9._-]``, not starting with ``.``, at most
    ``MAX_STEM`` characters) and does not end like a hashed name is used as it is. Any
    other id becomes ``<safe prefix>-<10 hex of SHA-256(id)>``: ``a/b`` and the literal id
    ``a_b-c14cddc033`` can no longer meet (the latter is not used verbatim, it ends like a
    hash), and a 302-character id gets a name the filesystem accepts.
    """
    safe = _UNSAFE.sub("_", session_id)
    verbatim = (
        safe == session_id
        and session_id
        and not session_id.startswith(".")
        and len(session_id) <= MAX_STEM
        and not _HASHED.fullmatch(session_id)
    )
    if verbatim:
        return f"{session_id}.json"
    stem = safe.lstrip(".")[:MAX_STEM] or "session"
    return f"{stem}-{hashlib.sha256(session_id.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}.json"


def _iso(ts: float | None) -> str | None:
    return None if (dt := to_datetime(ts)) is None else dt.isoformat()  # never raises on a bad stored time


def _message(t: dict[str, Any]) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": t["role"], "content": t["content"], "timestamp": t["timestamp"]}
    if t["meta"] is not None:
        msg["metadata"] = t["meta"]
    if t["tool_calls"] is not None:
        msg["tool_calls"] = t["tool_calls"]
    if t["tool_call_id"] is not None:
        msg["tool_call_id"] = t["tool_call_id"]
    return msg


def _imported_origin(meta: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    if not isinstance(meta, dict):
        return None
    origin, original = meta.get("praisonai"), meta.get("metadata")
    if (
        isinstance(origin, dict)
        and isinstance(original, dict)
        and set(origin) >= {"user_id", "agent_name", "created_at", "updated_at"}
    ):
        return origin, original
    return None


ANNOTATIONS_KEY = "memviewer_annotations"


def _annotations(bundle: Bundle) -> dict[str, Any]:
    """``{"session": {tags, note}, "turns": {turn id: {tags, note}}}``, each only when set."""

    def clean(mark: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if mark.get("tags"):
            out["tags"] = list(mark["tags"])
        if mark.get("note") is not None:
            out["note"] = mark["note"]
        return out

    out: dict[str, Any] = {}
    if bundle.id in bundle.annotations:
        out["session"] = clean(bundle.annotations[bundle.id])
    turns = {tid: clean(m) for tid, m in bundle.annotations.items() if tid != bundle.id}
    if turns:
        out["turns"] = turns
    return out


def session_document(bundle: Bundle) -> dict[str, Any]:
    s = bundle.session
    imported = _imported_origin(s["meta"])
    extras: dict[str, Any] = {}
    if imported is not None:
        origin, original = imported
        metadata = {k: v for k, v in original.items() if k != "praisonai_extra"}
        if isinstance(original.get("praisonai_extra"), dict):
            extras = original["praisonai_extra"]
        head = {
            "created_at": origin["created_at"],
            "updated_at": origin["updated_at"],
            "agent_name": origin["agent_name"],
            "user_id": origin["user_id"],
        }
    else:
        metadata = dict(s["meta"] or {})
        if s["title"] and "title" not in metadata:
            metadata["title"] = s["title"]
        head = {
            "created_at": _iso(s["started_at"]),
            "updated_at": _iso(s["last_seen_at"]),
            "agent_name": s["agent"] or None,
            "user_id": s["scope_id"] if s["scope"] == "user" and s["scope_id"] else None,
        }
    if bundle.annotations:  # PraisonAI has no place for them: they ride in its metadata
        metadata = {**metadata, ANNOTATIONS_KEY: _annotations(bundle)}
    doc: dict[str, Any] = {
        "session_id": s["id"],
        "messages": [_message(t) for t in bundle.turns if not t["archived"]],
        **head,
        "metadata": metadata,
    }
    reserved = {"session_id", "messages", "archived_messages", "source", *head, "metadata", *LINEAGE}
    doc.update({k: v for k, v in extras.items() if k not in reserved})
    doc["archived_messages"] = [_message(t) for t in bundle.turns if t["archived"]]
    for key in ("source", *LINEAGE):
        # The importer reads these from the top level, else from metadata; write
        # what it would read so that a re-export gives the same bytes.
        value = s.get(key) if s.get(key) not in (None, "") else metadata.get(key)
        if value not in (None, ""):
            doc[key] = value
    return doc


def render(bundle: Bundle) -> str:
    return json.dumps(session_document(bundle), indent=2, ensure_ascii=False, allow_nan=False) + "\n"


class PraisonAIWriter:
    """Writes each session into a staging folder; ``export`` moves them into place at the end."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.names: list[str] = []

    def begin(self) -> None:
        pass

    def end(self) -> None:
        pass

    def write(self, bundle: Bundle) -> None:
        name = file_name(bundle.id)
        text = render(bundle)  # rendered whole first: a session that cannot be leaves no file
        (self.folder / name).write_text(text, encoding="utf-8")
        self.names.append(name)
