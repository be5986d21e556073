"""JSONL: one turn per line, for ``jq``/pandas pipelines.

``{session_id, episode_id, turn_id, index, role, content, timestamp (ISO 8601),
archived, metadata, is_compaction_summary, tool_calls, tool_call_id}`` in
session order, turns in projection order (archived first). A tagged or annotated turn
adds ``tags`` / ``note``; every line of a tagged or annotated session adds
``session_tags`` / ``session_note`` (absent otherwise).
"""

from __future__ import annotations

import json
from typing import TextIO

from memviewer.io.exporters.bundle import Bundle
from memviewer.store.repos import turn_public

#: The line's keys, in the order the format has always written them.
FIELDS = (
    "session_id",
    "episode_id",
    "turn_id",
    "index",
    "role",
    "content",
    "timestamp",
    "archived",
    "metadata",
    "is_compaction_summary",
    "tool_calls",
    "tool_call_id",
)


class JsonlWriter:
    def __init__(self, stream: TextIO, redaction: str | None) -> None:
        self.stream = stream

    def begin(self) -> None:
        pass

    def write(self, bundle: Bundle) -> None:
        lines = []
        session_mark = bundle.annotations.get(bundle.id)
        for t in bundle.turns:
            # the bundle's id, which redaction may have pseudonymised, names the session
            public = {**turn_public(t), "session_id": bundle.id}
            line = {k: public[k] for k in FIELDS}
            for prefix, mark in (("", bundle.annotations.get(t["id"])), ("session_", session_mark)):
                if mark and mark.get("tags"):
                    line[f"{prefix}tags"] = list(mark["tags"])
                if mark and mark.get("note") is not None:
                    line[f"{prefix}note"] = mark["note"]
            lines.append(json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n")
        self.stream.write("".join(lines))  # a session that cannot be rendered writes nothing

    def end(self) -> None:
        pass
