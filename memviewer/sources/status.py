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
