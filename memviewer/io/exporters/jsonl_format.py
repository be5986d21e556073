"""JSONL: one turn per line, for ``jq``/pandas pipelines.

``{session_id, episode_id, turn_id, index, role, content, timestamp (ISO 8601),
archived, metadata, is_compaction_summary, tool_calls, tool_call_id}`` in
session order, turns in projection order (archived first).
"""

from __future__ import annotations

import json
from typing import TextIO

from memviewer.io.exporters.bundle import Bundle
from memviewer.timeutil import iso


class JsonlWriter:
    def __init__(self, stream: TextIO, redaction: str | None) -> None:
        self.stream = stream

    def begin(self) -> None:
        pass

    def write(self, bundle: Bundle) -> None:
        for t in bundle.turns:
            line = {
                "session_id": bundle.id,
                "episode_id": t["episode_id"],
                "turn_id": t["id"],
                "index": t["idx"],
                "role": t["role"],
                "content": t["content"],
                "timestamp": iso(t["timestamp"]),
                "archived": bool(t["archived"]),
                "metadata": t["meta"] if t["meta"] is not None else {},
                "is_compaction_summary": bool(t["is_compaction_summary"]),
                "tool_calls": t["tool_calls"],
                "tool_call_id": t["tool_call_id"],
            }
            self.stream.write(json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n")

    def end(self) -> None:
        pass
