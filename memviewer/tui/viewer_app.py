"""What a screen may use of the viewer's ``App``: the base class screens are typed against.

``memviewer.tui.app`` composes every screen, so a screen that imported it (even for its
type) would close an import circle. Screens name this base instead; ``MemviewerApp``
derives from it and fills it in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import App

from memviewer.tui.live_feed import LiveFeed
from memviewer.tui.prefs import ViewerPrefs

if TYPE_CHECKING:
    from memviewer.api import LocalService
    from memviewer.service import MemoryService


class ViewerApp(App[None]):
    """The viewer's shared parts (one service, the live feed, the user's preferences) and the
    two calls screens make back into the app."""

    #: What screens read and write through (``memviewer.api.LocalService``).
    service: LocalService
    #: The same object as the in-process service the app composed: only for what is not part
    #: of the reader protocol (the golden tables of ``eval.golden``, the hub the app hosts).
    local: MemoryService
    feed: LiveFeed
    prefs: ViewerPrefs
    live_cap: int  # how many live events the tail keeps

    def open_session(self, session_id: str, anchor: int | None = None, terms: tuple[str, ...] = ()) -> None:
        """Push the Session screen at ``anchor`` (a turn index) with ``terms`` highlighted."""
        raise NotImplementedError

    def first_paint_done(self, rows: int, total: int) -> None:
        """Called once by the first screen that has painted its rows (start-up timing)."""
        raise NotImplementedError
