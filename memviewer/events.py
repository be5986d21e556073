"""The event record that the bus, the hub and subscribers all pass around."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

EVENT_KINDS = (
    "session.started",
    "session.closed",
    "session.idle_pruned",
    "session.compacted",
    "session.imported",
    "session.deleted",
    "session.agent_changed",
    "episode.started",
    "episode.turn_added",
    "episode.finalized",
    "episode.abandoned",
    "recall.performed",
    "llm_call.recorded",
)


@dataclass(frozen=True)
class EventRecord:
    seq: int
    kind: str
    ts: float
    session_id: str | None
    episode_id: str | None
    payload: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "kind": self.kind,
            "ts": self.ts,
            "session_id": self.session_id,
            "episode_id": self.episode_id,
            "payload": self.payload,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EventRecord:
        return cls(
            seq=int(data["seq"]),
            kind=str(data["kind"]),
            ts=float(data["ts"]),
            session_id=data.get("session_id"),
            episode_id=data.get("episode_id"),
            payload=dict(data.get("payload") or {}),
        )
