"""A virtual, capped, one-line-per-event log with tail-follow semantics.

Only the visible lines are rendered (cached per seq), so a burst of events
costs a list append each, not a layout pass. ``following`` is cleared when
the user scrolls up and set again when they reach the bottom; the owning
screen holds new events back while it is cleared, so what the user is
reading does not move.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from memviewer.events import EventRecord
from memviewer.tui.live_feed import event_text


class EventLog(ScrollView, can_focus=True):
    """Rows of ``EventRecord``; at most ``cap`` kept (the oldest go first)."""

    BINDINGS = [
        Binding("up", "scroll_up", "Up", show=False),
        Binding("down", "scroll_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "scroll_home", "Top", show=False),
        Binding("end", "follow", "Follow", show=False),
        Binding("enter", "open", "Open at the turn", show=False),
    ]

    class Opened(Message):
        """Enter (the row at the bottom of the view, shown reversed) or a click on a row."""

        def __init__(self, event: EventRecord) -> None:
            super().__init__()
            self.event = event

    class FollowChanged(Message):
        def __init__(self, following: bool) -> None:
            super().__init__()
            self.following = following

    def __init__(self, cap: int = 2000, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.cap = cap
        self.rows: list[EventRecord] = []
        self.following = True
        self._programmatic = False
        self._cache: LRUCache[tuple[int, int, Style], Strip] = LRUCache(2048)

    # -- content --------------------------------------------------------------
    def append(self, events: Iterable[EventRecord]) -> int:
        """Add rows at the bottom (and scroll there when following); returns rows added."""
        new = list(events)
        if not new:
            return 0
        self.rows.extend(new)
        if len(self.rows) > self.cap:
            del self.rows[: len(self.rows) - self.cap]
        self._resize()
        return len(new)

    def replace(self, events: Iterable[EventRecord]) -> None:
        self.rows = list(events)[-self.cap :]
        self._cache.clear()
        self._resize()

    def clear(self) -> None:
        self.replace([])

    def _resize(self) -> None:
        self._programmatic = True
        try:
            self.virtual_size = Size(self.size.width, len(self.rows))
            if self.following:
                self.scroll_to(
                    y=max(0, len(self.rows) - self.scrollable_content_region.height),
                    animate=False,
                    immediate=True,
                )
        finally:
            self._programmatic = False
        self.refresh()

    def on_resize(self) -> None:
        """Rows may arrive before the first layout: once sized, show the newest."""
        self._resize()

    # -- following --------------------------------------------------------------
    def set_following(self, following: bool) -> None:
        if following != self.following:
            self.following = following
            self.post_message(self.FollowChanged(following))
        if following:
            self._programmatic = True
            try:
                self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)
            finally:
                self._programmatic = False

    def action_follow(self) -> None:
        self.set_following(True)

    def action_scroll_home(self) -> None:
        self.scroll_home(animate=False)

    def action_page_up(self) -> None:
        self.scroll_page_up(animate=False)

    def action_page_down(self) -> None:
        self.scroll_page_down(animate=False)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self._programmatic:
            return
        # Scrolling up stops following; a terminal that grows clamps scroll_y down too, but
        # leaves the view at the bottom, which is still following.
        if new_value < old_value and self.following and new_value < self.max_scroll_y:
            self.set_following(False)
        elif new_value >= self.max_scroll_y and not self.following:
            self.set_following(True)

    # -- opening -------------------------------------------------------------------
    def target_index(self) -> int | None:
        """The row Enter opens: the last one in view."""
        if not self.rows:
            return None
        bottom = int(self.scroll_offset.y) + self.scrollable_content_region.height - 1
        return max(0, min(bottom, len(self.rows) - 1))

    def action_open(self) -> None:
        index = self.target_index()
        if index is not None:
            self.post_message(self.Opened(self.rows[index]))

    def on_focus(self) -> None:
        self.refresh()  # the Enter target is shown only while the log has the keyboard

    def on_blur(self) -> None:
        self.refresh()

    def on_click(self, event: events.Click) -> None:
        index = int(self.scroll_offset.y) + event.y
        if 0 <= index < len(self.rows):
            self.post_message(self.Opened(self.rows[index]))

    # -- rendering ----------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        style = self.rich_style
        if index >= len(self.rows):
            return Strip.blank(width, style)
        row = self.rows[index]
        if index == self.target_index() and self.has_focus:
            style = style + Style(reverse=True)
        key = (row.seq, width, style)
        strip = self._cache.get(key)
        if strip is None:
            text = event_text(row, width)
            text.truncate(max(width, 1) + scroll_x, overflow="ellipsis")
            segments = [
                Segment(s.text, style + s.style if s.style else style)
                for s in text.render(self.app.console)
                if s.text != "\n"
            ]
            strip = Strip(segments)
            self._cache[key] = strip
        return strip.crop_extend(scroll_x, scroll_x + width, style)
