"""What a source reports in the hub's ``stats`` (``hub.sources``) and the viewer's header."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class SourceStatus:
    """One source: what it follows, whether it is live, when it last stored something.

    ``counters`` only grow (files seen, turns added, bad input by reason …), so a
    problem shows as a number that moved, and ``last_error`` says what it was.
    """

    kind: str  # "praisonai" | "otlp"
    target: str  # the folder, or host:port
    connected: bool = False  # watching / listening
    last_delivery: float | None = None  # epoch s of the last write that stored something
    last_error: str | None = None
    counters: dict[str, int] = field(default_factory=dict)

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n

    def delivered(self) -> None:
        self.last_delivery = time.time()

    def error(self, message: str) -> None:
        self.last_error = message[:500]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "target": self.target,
            "connected": self.connected,
            "last_delivery": self.last_delivery,
            "last_error": self.last_error,
            "counters": dict(self.counters),
        }


# Counters that mean some input was not stored (the rest of the feed still was).
PROBLEM_COUNTERS = (
    "invalid_json",
    "rejected_files",
    "refused_files",
    "oversized_files",
    "stalled_reads",
    "store_refusals",
    "internal_errors",
    "bad_requests",
    "unsupported_media_type",
    "rejected_spans",
    "bad_messages",
    "command_errors",
    "messages_without_episode",
)


def doctor_check(sources: list[dict[str, Any]]) -> dict[str, Any]:
    """``memviewer doctor``'s sources line: fails when a configured source is not connected,
    or says (``state``, the folder watcher) it is stalled on a read or failing to store;
    bad input it met is reported (counted, with the last error) without failing."""
    if not sources:
        return {"name": "sources", "ok": True, "detail": "no sources configured on the hub"}
    parts = []
    ok = True
    for src in sources:
        counters = src.get("counters") or {}
        problems = {k: counters[k] for k in PROBLEM_COUNTERS if counters.get(k)}
        state = "connected" if src.get("connected") else "NOT connected"
        ok = ok and bool(src.get("connected"))
        if src.get("connected") and src.get("state") == "stalled":
            ok = False
            stuck = src.get("stuck_reads") or ([src["busy"]] if src.get("busy") else [])
            where = ", ".join(f"{s['path']} for {s['seconds']:g} s" for s in stuck[:3])
            state = f"STALLED (a read is stuck: {where})" if where else "STALLED"
        elif src.get("connected") and src.get("state") == "failing":
            ok = False
            state = f"FAILING (the last file was not stored: {src.get('last_error')})"
        text = f"{src.get('kind')} {src.get('target')}: {state}"
        if problems:
            text += " (" + ", ".join(f"{k} {v}" for k, v in problems.items()) + ")"
            if src.get("last_error"):
                text += f"; last: {src['last_error']}"
        parts.append(text)
    return {"name": "sources", "ok": ok, "detail": "; ".join(parts)}
