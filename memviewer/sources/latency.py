"""A bounded summary of recent durations: what a receiver reports of its own answer times.

An exporter's ``export()`` time mixes the hub's work with the client's (encoding, its own
interpreter's contention, the HTTP round trip); a receiver that times each request from its
first byte read to its answer written says which part is the hub's. The last ``size``
durations are kept in a ring (fixed memory whatever the traffic), so the percentiles describe
recent requests; ``n`` counts every request timed since the start.
"""

from __future__ import annotations

from collections import deque
from typing import Any

WINDOW = 1024


class Durations:
    """The last ``size`` durations (seconds) and how many were ever added."""

    def __init__(self, size: int = WINDOW) -> None:
        self._ring: deque[float] = deque(maxlen=size)
        self.n = 0

    def add(self, seconds: float) -> None:
        self._ring.append(seconds)
        self.n += 1

    def summary_ms(self) -> dict[str, Any]:
        """``{p50, p99, max, n, window}``: percentiles and max in ms over the window (nearest
        rank; null before any request), ``n`` requests timed in all, ``window`` how many the
        percentiles cover."""
        ordered = sorted(self._ring)
        k = len(ordered)

        def rank(q: float) -> float | None:
            return round(ordered[min(k - 1, int(q * k))] * 1000, 2) if k else None

        return {
            "p50": rank(0.50),
            "p99": rank(0.99),
            "max": round(ordered[-1] * 1000, 2) if k else None,
            "n": self.n,
            "window": k,
        }
