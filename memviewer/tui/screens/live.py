"""Live: the hub's event stream, newest at the bottom.

The subscriber (an app-level worker) fills ``app.feed``; this screen drains
it on a ~15 Hz timer, so a burst of a thousand events a second becomes a
dozen cheap list appends per second, not a repaint per event. While the user
is scrolled up (or has paused) new events wait in ``pending`` and the count
is shown; following again appends them. Filters re-apply to the kept rows.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from rich.text import Text
from textual import getters, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Header, Input, Sparkline, Static

from memviewer.events import EventRecord
from memviewer.tui.formatting import printable
from memviewer.tui.live_feed import EventFilter
from memviewer.tui.widgets.event_log import EventLog
from memviewer.tui.widgets.footer import CoalescedFooter

if TYPE_CHECKING:
    from memviewer.tui.viewer_app import ViewerApp

FLUSH_HZ = 15
STATE_STYLES = {
    "connected": "bold green",
    "resumed": "bold green",
    "reconnecting": "bold yellow",
    "connecting": "yellow",
    "failed": "bold red",
    "off": "dim",
    "starting": "dim",
}


class LiveScreen(Screen[None]):
    if TYPE_CHECKING:  # self.app is the viewer (its service, feed, open_session)
        app = getters.app(ViewerApp)

    TITLE = "Live"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    BINDINGS = [
        Binding("space", "toggle_pause", "Pause/Resume", key_display="space"),
        Binding("c", "clear", "Clear"),
        Binding("f", "follow", "Follow"),
        Binding("k", "focus_kinds", "Kind filter"),
        Binding("slash", "focus_session", "Session filter", key_display="/"),
        Binding("escape", "focus_log", "Log", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.cap = self.app.live_cap
        self.history: deque[EventRecord] = deque(maxlen=self.cap)
        self.pending: list[EventRecord] = []
        self.paused = False
        self.event_filter = EventFilter()
        self.shown_total = 0

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="live-top"):
            yield Static(id="live-status")
            yield Sparkline([0.0], id="live-rate")
        with Horizontal(id="live-filters"):
            yield Input(placeholder="kinds, e.g. session.,episode.  (k)", id="kind-filter", compact=True)
            yield Input(placeholder="session id contains  (/)", id="session-filter", compact=True)
        yield EventLog(cap=self.cap, id="events")
        yield Static(id="live-pending")
        yield CoalescedFooter()

    def on_mount(self) -> None:
        self.flush()
        self.set_interval(1 / FLUSH_HZ, self.flush)
        self.set_interval(1.0, self._tick_rate)
        self._tick_rate()
        self.query_one("#events", EventLog).focus()

    # -- the coalescing loop -------------------------------------------------
    def flush(self) -> None:
        """Move what the subscriber buffered into the log (or into ``pending``)."""
        fresh = self.app.feed.drain()
        log = self.query_one("#events", EventLog)
        if fresh:
            self.history.extend(fresh)
            matching = [e for e in fresh if self.event_filter.matches(e)]
            if self.paused or not log.following:
                self.pending.extend(matching)
                if len(self.pending) > self.cap:
                    del self.pending[: len(self.pending) - self.cap]
            else:
                self.shown_total += log.append(matching)
        self._update_status()

    @property
    def following(self) -> bool:
        return not self.paused and self.query_one("#events", EventLog).following

    def _release_pending(self) -> None:
        if self.pending and self.following:
            self.shown_total += self.query_one("#events", EventLog).append(self.pending)
            self.pending = []
        self._update_status()

    def _update_status(self) -> None:
        feed = self.app.feed
        status = Text()
        status.append("● ", style=STATE_STYLES.get(feed.state, "bold"))
        status.append(feed.state, style=STATE_STYLES.get(feed.state, "bold"))
        if feed.detail:
            status.append(printable(f" {feed.detail}"), style="dim")
        status.append(
            f"\nlast seq {feed.last_seq}  ·  received {feed.received:,}  ·  "
            f"{feed.rate():.0f} ev/s  ·  kept {len(self.history):,}"
        )
        if feed.duplicates:
            status.append(f"  ·  {feed.duplicates} duplicates dropped", style="yellow")
        self.query_one("#live-status", Static).update(status)
        pending = Text()
        if self.paused:
            pending.append(" ⏸ PAUSED ", style="bold black on yellow")
        elif not self.query_one("#events", EventLog).following:
            pending.append(" ▲ SCROLLED UP ", style="bold black on cyan")
        else:
            pending.append(" ▼ FOLLOWING ", style="bold black on green")
        if self.pending:
            pending.append(f"  {len(self.pending):,} new events waiting — f or End to follow", style="bold")
        if self.event_filter.active:
            kinds = ",".join(self.event_filter.kinds) or "*"
            pending.append(
                printable(f"  filter: kinds={kinds} session={self.event_filter.session or '*'}"), style="cyan"
            )
        self.query_one("#live-pending", Static).update(pending)

    def _tick_rate(self) -> None:
        self.query_one("#live-rate", Sparkline).data = self.app.feed.rate_series()

    # -- filters -----------------------------------------------------------------
    @on(Input.Changed, "#kind-filter")
    @on(Input.Changed, "#session-filter")
    def _filter_changed(self) -> None:
        self.event_filter = EventFilter.parse(
            self.query_one("#kind-filter", Input).value, self.query_one("#session-filter", Input).value
        )
        log = self.query_one("#events", EventLog)
        log.replace(e for e in self.history if self.event_filter.matches(e))
        self.pending = []
        self._update_status()

    @on(Input.Submitted)
    def _filter_submitted(self) -> None:
        self.action_focus_log()

    @on(EventLog.Opened)
    def _opened(self, message: EventLog.Opened) -> None:
        """Open the event's session, at its turn when it added one."""
        event = message.event
        if not event.session_id:
            self.notify("this event belongs to no session", markup=False)
            return
        turn = (event.payload or {}).get("turn") or {}
        index = turn.get("index") if isinstance(turn.get("index"), int) else None
        self.app.open_session(event.session_id, anchor=index)

    @on(EventLog.FollowChanged)
    def _follow_changed(self, event: EventLog.FollowChanged) -> None:
        if event.following:
            self._release_pending()
        else:
            self._update_status()

    # -- actions -------------------------------------------------------------------
    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        if not self.paused:
            self.query_one("#events", EventLog).set_following(True)
            self._release_pending()
        self._update_status()

    def action_follow(self) -> None:
        self.paused = False
        self.query_one("#events", EventLog).set_following(True)
        self._release_pending()

    def action_clear(self) -> None:
        self.history.clear()
        self.pending = []
        self.query_one("#events", EventLog).clear()
        self._update_status()

    def action_focus_kinds(self) -> None:
        self.query_one("#kind-filter", Input).focus()

    def action_focus_session(self) -> None:
        self.query_one("#session-filter", Input).focus()

    def action_focus_log(self) -> None:
        self.query_one("#events", EventLog).focus()
