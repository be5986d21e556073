"""Read PraisonAI session JSON files (DESIGN §7) into memviewer sessions.

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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memviewer.timeutil import now, parse_ts

log = logging.getLogger("memviewer.io")

LINEAGE_KEYS = ("lineage_id", "root_session_id", "thread_id", "parent_session_id")


class ForeignFileError(ValueError):
    """The file is readable JSON but not a PraisonAI session."""


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


def turn_id_for(session_id: str, role: str, ts: float, content: str, occurrence: int) -> str:
    h = hashlib.sha256(
        f"{session_id}\x00{role}\x00{ts!r}\x00{content}\x00{occurrence}".encode()
    ).hexdigest()
    return f"t-{h[:32]}"


def parse_session(data: Any, fallback_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Map one PraisonAI session object to (session row, turns in projection order)."""
    if not isinstance(data, dict):
        raise ForeignFileError("top level is not a JSON object")
    if not any(isinstance(data.get(k), list) for k in ("messages", "archived_messages")):
        raise ForeignFileError("no 'messages' or 'archived_messages' list")
    meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    sid = str(data.get("session_id") or fallback_id)
    created = parse_ts(data.get("created_at"))
    updated = parse_ts(data.get("updated_at"))
    agent = data.get("agent_name") or ""
    user_id = data.get("user_id")
    scope, scope_id = ("user", str(user_id)) if user_id else ("agent", str(agent))
    turns: list[dict[str, Any]] = []
    seen: Counter[tuple[str, float, str]] = Counter()
    projection = [(m, True) for m in data.get("archived_messages") or []]
    projection += [(m, False) for m in data.get("messages") or []]
    fallback_ts = created or updated or now()
    for msg, archived in projection:
        if not isinstance(msg, dict):
            continue  # tolerate malformed entries, like PraisonAI itself
        role = str(msg.get("role") or "user")
        if role not in ("user", "assistant", "tool", "system"):
            role = "system" if role == "developer" else "assistant"
        content = _text(msg.get("content"))
        ts = parse_ts(msg.get("timestamp")) or fallback_ts
        mmeta = msg.get("metadata") if isinstance(msg.get("metadata"), dict) else None
        key = (role, ts, content)
        occurrence = seen[key]
        seen[key] += 1
        is_summary = role == "system" and bool(mmeta and mmeta.get("compaction") is True)
        turns.append(
            {
                "id": turn_id_for(sid, role, ts, content, occurrence),
                "role": role,
                "content": content,
                "timestamp": ts,
                "archived": archived,
                "is_compaction_summary": is_summary and not archived,
                "replaced_count": int((mmeta or {}).get("compacted_count") or 0)
                if is_summary
                else 0,
                "tool_calls": msg.get("tool_calls"),
                "tool_call_id": msg.get("tool_call_id"),
                "meta": mmeta,
            }
        )
    stamps = [t["timestamp"] for t in turns]
    started = created or (min(stamps) if stamps else now())
    last = updated or (max(stamps) if stamps else started)
    first_user = next((t["content"] for t in turns if t["role"] == "user" and t["content"]), "")
    title = meta.get("title") or agent or " ".join(first_user.split())[:80]
    extra = {k: v for k, v in data.items() if k not in _KNOWN_KEYS}
    session_meta = dict(meta)
    if extra:
        session_meta["praisonai_extra"] = extra
    session = {
        "id": sid,
        "agent": agent,
        "scope": scope,
        "scope_id": scope_id,
        "title": str(title),
        "started_at": started,
        "last_seen_at": last,
        "closed_at": None,
        "status": "closed",
        "source": _lookup(data, meta, "source"),
        **{k: _lookup(data, meta, k) for k in LINEAGE_KEYS},
        "meta": {"praisonai": {"user_id": user_id, "agent_name": data.get("agent_name"),
                               "created_at": data.get("created_at"),
                               "updated_at": data.get("updated_at")},
                 "metadata": session_meta},
    }
    return session, turns


_KNOWN_KEYS = {
    "session_id", "messages", "archived_messages", "created_at", "updated_at", "agent_name",
    "user_id", "metadata", "source", *LINEAGE_KEYS,
}


def load_file(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ForeignFileError(f"cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ForeignFileError("not valid UTF-8") from None
    except json.JSONDecodeError as exc:
        raise ForeignFileError(f"not valid JSON ({exc.msg} at line {exc.lineno})") from None
    stem = path.name[: -len(".json")] if path.name.endswith(".json") else path.stem
    return parse_session(data, stem)


def import_paths(
    import_session: Callable[[dict[str, Any], list[dict[str, Any]]], dict[str, Any]],
    paths: Iterable[str | Path],
    progress: Callable[[int, int, str], None] | None = None,
) -> ImportReport:
    """Import every session file; bad files are reported by name and skipped."""
    report = ImportReport()
    files = list(iter_session_files(paths))
    for i, path in enumerate(files, 1):
        try:
            if not path.exists():
                raise ForeignFileError("no such file or folder")
            session, turns = load_file(path)
            result = import_session(session, turns)
            result["path"] = str(path)
            report.imported.append(result)
        except ForeignFileError as exc:
            log.info("skipped %s: %s", path, exc)
            report.failed.append((str(path), str(exc)))
        if progress:
            progress(i, len(files), str(path))
    return report
