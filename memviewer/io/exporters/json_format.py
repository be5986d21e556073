"""``memviewer.export`` v1: the full-fidelity JSON envelope.

Layout (one session per line, so a reader can stream it; still plain JSON)::

    {"format": "memviewer.export", "version": 1, "redaction": null, "sessions": [
    {"session": {...}, "episodes": [...], "turns": [...]},
    ...
    ]}

Times are epoch seconds exactly as stored (ISO strings would round them);
``metadata`` is the stored JSON verbatim; turns are in projection order with
their ``archived`` flag, compaction summaries flagged with ``replaced_count``.
A session or turn the user tagged or annotated also has ``tags`` (a list) and/or
``note`` (text); the keys are absent otherwise.
A session with LLM calls also has ``llm_calls`` (absent otherwise): each call as the
``record_llm_call`` command would send it again (``CALL_FIELDS``), messages inline.
``memviewer import json`` reads it back (``memviewer.io.json_import``), tags, notes and calls too.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from memviewer.io.exporters.bundle import Bundle

FORMAT = "memviewer.export"
VERSION = 1

SESSION_FIELDS = (
    ("session_id", "id"),
    ("agent", "agent"),
    ("scope", "scope"),
    ("scope_id", "scope_id"),
    ("title", "title"),
    ("status", "status"),
    ("source", "source"),
    ("started_at", "started_at"),
    ("last_seen_at", "last_seen_at"),
    ("closed_at", "closed_at"),
    ("retention", "retention"),
    ("active_window", "active_window"),
    ("lineage_id", "lineage_id"),
    ("root_session_id", "root_session_id"),
    ("thread_id", "thread_id"),
    ("parent_session_id", "parent_session_id"),
    ("metadata", "meta"),
)
EPISODE_FIELDS = (
    ("episode_id", "id"),
    ("status", "status"),
    ("closed_by", "closed_by"),
    ("started_at", "started_at"),
    ("ended_at", "ended_at"),
    ("intent_kind", "intent_kind"),
    ("intent_confidence", "intent_confidence"),
    ("intent_rule", "intent_rule"),
    ("intent_source", "intent_source"),
    ("r_task", "r_task"),
    ("metadata", "meta"),
)
TURN_FIELDS = (
    ("turn_id", "id"),
    ("episode_id", "episode_id"),
    ("index", "idx"),
    ("role", "role"),
    ("content", "content"),
    ("timestamp", "timestamp"),
    ("archived", "archived"),
    ("is_compaction_summary", "is_compaction_summary"),
    ("replaced_count", "replaced_count"),
    ("tool_calls", "tool_calls"),
    ("tool_call_id", "tool_call_id"),
    ("metadata", "meta"),
)
CALL_FIELDS = (
    ("call_id", "id"),
    ("episode_id", "episode_id"),
    ("ts", "ts"),
    ("source", "source"),
    ("model", "model"),
    ("provider", "provider"),
    ("latency_ms", "latency_ms"),
    ("context_window", "context_window"),
    ("recall_ids", "recall_ids"),
    ("in_prompt", "in_prompt"),
    ("input", "input"),
    ("output", "output"),
    ("raw_input", "raw_input"),
    ("raw_output", "raw_output"),
    ("problems", "problems"),
    ("meta", "meta"),
)
_BOOLS = {"archived", "is_compaction_summary"}


def _record(row: dict[str, Any], fields: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    out = {}
    for public, column in fields:
        value = row.get(column)
        out[public] = bool(value) if public in _BOOLS else value
    return out


def _annotate(record: dict[str, Any], mark: dict[str, Any] | None) -> dict[str, Any]:
    """``tags`` / ``note`` keys on a session or turn record, only when it has them (an
    export without annotations is byte-for-byte what it was before they existed)."""
    if mark:
        if mark.get("tags"):
            record["tags"] = list(mark["tags"])
        if mark.get("note") is not None:
            record["note"] = mark["note"]
    return record


def call_record(row: dict[str, Any]) -> dict[str, Any]:
    out = _record(row, CALL_FIELDS)
    usage = {k: row[k] for k in ("input_tokens", "output_tokens") if row.get(k) is not None}
    out["usage"] = usage or None
    return out


def session_record(bundle: Bundle) -> dict[str, Any]:
    marks = bundle.annotations
    out = {
        "session": _annotate(_record(bundle.session, SESSION_FIELDS), marks.get(bundle.id)),
        "episodes": [_record(e, EPISODE_FIELDS) for e in bundle.episodes],
        "turns": [_annotate(_record(t, TURN_FIELDS), marks.get(t["id"])) for t in bundle.turns],
    }
    if bundle.llm_calls:
        out["llm_calls"] = [call_record(c) for c in bundle.llm_calls]
    return out


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class JsonWriter:
    def __init__(self, stream: TextIO, redaction: str | None) -> None:
        self.stream = stream
        self.redaction = redaction
        self.count = 0

    def begin(self) -> None:
        head = dumps({"format": FORMAT, "version": VERSION, "redaction": self.redaction})
        self.stream.write(head[:-1] + ',"sessions":[\n')

    def write(self, bundle: Bundle) -> None:
        text = dumps(session_record(bundle))  # rendered whole before any of it is written
        if self.count:
            self.stream.write(",\n")
        self.stream.write(text)
        self.count += 1

    def end(self) -> None:
        self.stream.write("\n]}\n" if self.count else "]}\n")
