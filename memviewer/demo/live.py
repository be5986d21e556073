"""``memviewer demo --live``: a simulated agent publishing in real time through ``Publisher``.

It plays the demo episode scripts at ``rate`` turns per second: a long-lived
coding session with a small active window (so compaction happens while you
watch), a continuation session in the same lineage every dozen episodes, and
an automated (``source="cron"``) audit session every few episodes.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

from memviewer.demo import scripts as S
from memviewer.demo.scripts import EpisodeScript

LIVE_WINDOW = 30
# How ``memviewer demo --remove`` knows this agent's sessions (their ids are minted fresh):
# these agent names with this ``meta`` mark, set on every session since the first release.
LIVE_AGENTS = ("live-coder", "nightly-audit")
LIVE_MARK = {"demo": "live"}


class LiveAgent:
    def __init__(
        self,
        publisher: Any,
        *,
        rate: float = 2.0,
        seed: int | None = None,
        out: Callable[[str], None] = print,
        stop: threading.Event | None = None,
    ) -> None:
        if rate <= 0:
            raise ValueError("rate must be > 0 turns per second")
        self.pub = publisher
        self.rate = rate
        self.rng = random.Random(seed)
        self.out = out
        self.stop = stop or threading.Event()
        self.lineage = f"lin-live-{int(time.time())}"
        self.root: str | None = None
        self.session: str | None = None
        self.episode: str | None = None
        self.counts = {"sessions": 0, "episodes": 0, "turns": 0, "automated_sessions": 0}

    def _tick(self, factor: float = 1.0) -> bool:
        """Wait one turn's worth of time; False once we should stop."""
        return not self.stop.wait(1.0 / (self.rate * factor))

    def _open_main(self, part: int) -> None:
        if self.session is not None:
            self.pub.close_session(self.session)
        self.session = self.pub.open_session(
            agent=LIVE_AGENTS[0],
            scope="user",
            scope_id="u-live",
            title=f"Live demo session (part {part})",
            active_window=LIVE_WINDOW,
            retention="compact",
            lineage_id=self.lineage,
            root_session_id=self.root,
            meta={**LIVE_MARK, "part": part},
        )
        if self.root is None:
            self.root = self.session
        self.counts["sessions"] += 1
        self.out(f"[live] session {self.session} (part {part}, lineage {self.lineage})")

    def _play(self, session_id: str, script: EpisodeScript, speed: float = 1.0) -> bool:
        self.episode = self.pub.start_episode(session_id, script.user)
        self.counts["episodes"] += 1
        self.counts["turns"] += 1
        self.out(f"[live] episode: {script.user[:70]}")
        for turn in script.turns:
            if not self._tick(speed):
                return False
            self.pub.add_turn(
                self.episode,
                turn.role,
                turn.content,
                metadata=turn.metadata,
                tool_calls=turn.tool_calls,
                tool_call_id=turn.tool_call_id,
            )
            self.counts["turns"] += 1
        if script.outcome == "abandon":
            self.pub.abandon_episode(self.episode, reason=script.abandon_reason)
        else:
            self.pub.finalize_episode(self.episode, r_task=script.r_task)
        self.episode = None
        return True

    def _automated(self, night: int) -> bool:
        sid = self.pub.open_session(
            agent=LIVE_AGENTS[1], scope="agent", scope_id="ops", source="cron", meta=dict(LIVE_MARK)
        )
        self.counts["sessions"] += 1
        self.counts["automated_sessions"] += 1
        self.out(f"[live] automated session {sid} (source=cron)")
        ok = self._play(sid, S.nightly_audit(night), speed=3.0)
        if self.episode is not None:
            self.pub.abandon_episode(self.episode, reason="demo stopped")
            self.episode = None
        self.pub.close_session(sid)
        return ok

    def run(self, duration: float | None = None) -> dict[str, int]:
        """Publish until ``duration`` seconds passed or ``stop`` is set."""
        if duration is not None:
            timer = threading.Timer(duration, self.stop.set)
            timer.daemon = True
            timer.start()
        part = 1
        self._open_main(part)
        n = 0
        library = list(S.LIVE_LIBRARY) + S.csv_exporter_rounds(3)
        try:
            while not self.stop.is_set():
                n += 1
                if n % 5 == 0:
                    if not self._automated(n // 5):
                        break
                    continue
                if n % 12 == 0:
                    part += 1
                    self._open_main(part)
                assert self.session is not None
                if not self._play(self.session, self.rng.choice(library)):
                    break
                if not self._tick():
                    break
        finally:
            if self.episode is not None:
                self.pub.abandon_episode(self.episode, reason="demo stopped")
            if self.session is not None:
                self.pub.close_session(self.session)
        return dict(self.counts)
