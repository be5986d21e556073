"""Write a large PraisonAI session file without holding it in memory (tests and bench)."""

from __future__ import annotations

import json
from pathlib import Path


def write_big_session(path: Path, target_bytes: int, session_id: str = "big") -> int:
    """A session of many short messages (many parser events per byte); returns messages."""
    head = {
        "session_id": session_id,
        "user_id": "u-big",
        "agent_name": "bulk",
        "created_at": "2024-05-01T10:00:00",
        "updated_at": "2024-05-02T10:00:00",
        "metadata": {"title": "a very long session"},
    }
    n = 0
    written = 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(head)[:-1] + ', "messages": [')
        while written < target_bytes:
            msg = {
                "role": "user" if n % 2 else "assistant",
                "content": f"message {n}: the quick brown fox jumps over the lazy dog, again and again.",
                "timestamp": 1714557600 + n,
                "metadata": {"i": n, "tags": ["a", "b"], "ok": True},
            }
            line = ("," if n else "") + json.dumps(msg)
            fh.write(line)
            written += len(line)
            n += 1
        fh.write("]}")
    return n
