"""The live event feed between the subscriber worker and the Live screen.

The subscriber may deliver a thousand events a second; the screen repaints
at ~15 Hz. The feed sits in between: the worker appends (dropping duplicate
seqs after a reconnect), the screen drains a batch per tick. Both run on the
app's event loop, so no locking is needed. Memory stays bounded: the inbox
and the rate window are fixed-size.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from rich.text import Text

from memviewer.events import EventRecord
from memviewer.tui.formatting import one_line, printable
from memviewer.wire.event_summary import event_summary

KIND_STYLES = {
    "session.started": "bold green",
    "session.closed": "dim green",
    "session.idle_pruned": "yellow",
    "session.compacted": "bold magenta",
    "session.imported": "blue",
    "session.deleted": "bold red",
    "episode.started": "bold cyan",
    "episode.turn_added": "cyan",
    "episode.finalized": "green",
    "episode.abandoned": "red",
    "recall.performed": "bold yellow",
}


class LiveFeed:
    """Deduplicated, bounded buffer of events plus an events-per-second history."""

    def __init__(self, cap: int = 5000, window_s: int = 60, clock: Callable[[], float] = time.monotonic):
        self.cap = cap
        self.window_s = window_s
        self._clock = clock
        self.inbox: deque[EventRecord] = deque(maxlen=cap)
        self.last_seq = 0
        self.last_recall_seq = 0
        self.received = 0
        self.duplicates = 0
        self.overflowed = 0
        self.state = "starting"
        self.detail = ""
        self._seconds: deque[list[int]] = deque(maxlen=window_s)

    def add(self, event: EventRecord) -> bool:
        """Keep ``event`` unless its seq was already seen (replays after a resume)."""
        if event.seq <= self.last_seq:
            self.duplicates += 1
            return False
        self.last_seq = event.seq
        self.received += 1
        if event.kind == "recall.performed":  # the Recalls screen reloads when this moves
            self.last_recall_seq = event.seq
        if len(self.inbox) == self.cap:
            self.overflowed += 1
        self.inbox.append(event)
        second = int(self._clock())
        if self._seconds and self._seconds[-1][0] == second:
            self._seconds[-1][1] += 1
        else:
            self._seconds.append([second, 1])
        return True

    def drain(self) -> list[EventRecord]:
        out = list(self.inbox)
        self.inbox.clear()
        return out

    def rate_series(self) -> list[float]:
        """Events per second for each of the last ``window_s`` seconds (oldest first)."""
        now = int(self._clock())
        counts = {sec: n for sec, n in self._seconds}
        return [float(counts.get(sec, 0)) for sec in range(now - self.window_s + 1, now + 1)]

    def rate(self, seconds: int = 5) -> float:
        """Mean events per second over the last complete ``seconds``."""
        series = self.rate_series()[-seconds - 1 : -1]
        return sum(series) / len(series) if series else 0.0

    def set_state(self, state: str, detail: str = "") -> None:
        self.state, self.detail = state, detail


@dataclass(frozen=True)
class EventFilter:
    """Kinds are prefixes (``episode.`` matches every episode event); session is a substring."""

    kinds: tuple[str, ...] = ()
    session: str = ""

    @classmethod
    def parse(cls, kinds: str, session: str) -> EventFilter:
        parts = tuple(p.strip() for p in kinds.replace(" ", ",").split(",") if p.strip())
        return cls(parts, session.strip())

    def matches(self, event: EventRecord) -> bool:
        if self.kinds and not any(event.kind.startswith(k) for k in self.kinds):
            return False
        if self.session and self.session not in (event.session_id or ""):
            return False
        return True

    @property
    def active(self) -> bool:
        return bool(self.kinds or self.session)


def event_text(event: EventRecord, width: int = 200) -> Text:
    """One line per event: seq, date and time (UTC), kind, session, and what happened (the
    summary ``memviewer tail`` prints too)."""
    stamp = datetime.fromtimestamp(event.ts, tz=UTC).strftime("%m-%d %H:%M:%S.%f")[:18]
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append(f"{event.seq:>8} ", style="bold")
    out.append(f"{stamp} ", style="dim")
    out.append(printable(f"{event.kind:<20} "), style=KIND_STYLES.get(event.kind, ""))
    id_width = 12 if width < 100 else 20 if width < 150 else 28
    out.append(printable(f"{short_id(event.session_id or '-', id_width):>{id_width}} "), style="blue")
    out.append(one_line(event_summary(event.kind, event.payload), width))
    return out


def short_id(value: str, width: int) -> str:
    """``value`` whole when it fits, else its start and its end around an ellipsis: the
    prefix says what kind of id it is, the end tells ids of one kind apart."""
    if len(value) <= width:
        return value
    head = (width - 1) // 2
    return value[:head] + "…" + value[len(value) - (width - 1 - head) :]
