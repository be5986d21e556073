"""``?``: every key of every screen, generated from the bindings themselves so it
cannot drift from what the keys really do."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

NOTES = (
    "Stored text is shown verbatim (never rendered as Markdown). Times are UTC.",
    "Archived turns were compacted out of the agent's active window; the SUMMARY turn replaced them.",
    "The command palette (ctrl+p) lists every action of the current screen.",
)


def _screen_classes() -> list[tuple[str, type[Screen[Any]]]]:
    from memviewer.tui.screens.context import ContextScreen
    from memviewer.tui.screens.export import ExportScreen
    from memviewer.tui.screens.live import LiveScreen
    from memviewer.tui.screens.recall import RecallScreen
    from memviewer.tui.screens.session import SessionScreen
    from memviewer.tui.screens.sessions import SessionsScreen

    return [
        ("Sessions", SessionsScreen),
        ("Session", SessionScreen),
        ("Live", LiveScreen),
        ("Recall", RecallScreen),
        ("Context", ContextScreen),
        ("Export", ExportScreen),
    ]


# Keys handled by widgets rather than screen bindings.
WIDGET_KEYS = {
    "Session": [
        ("enter", "fold / unfold the turn (tool calls, long text, metadata)"),
        ("tab", "switch between the archived and active panes"),
    ],
    "Recall": [("enter", "open the highlighted turn in its session")],
    "Context": [("enter", "on a recalled item: open its turn in its session")],
    "Live": [("home / end", "scroll to the top (pauses the tail) / follow again")],
}


def bindings_table(app_bindings: list[Binding]) -> Table:
    table = Table(show_header=True, header_style="bold", box=None, expand=False, padding=(0, 2))
    table.add_column("Screen", style="bold cyan", no_wrap=True)
    table.add_column("Key", style="bold", no_wrap=True)
    table.add_column("Action")
    rows: list[tuple[str, str, str]] = [
        ("everywhere", b.key_display or b.key, b.description) for b in app_bindings
    ]
    rows.append(("everywhere", "ctrl+p", "command palette (every action of the current screen)"))
    for name, cls in _screen_classes():
        rows.extend((name, key, what) for key, what in WIDGET_KEYS.get(name, []))
        rows.extend(
            (name, b.key_display or b.key, b.description)
            for b in cls.BINDINGS
            if isinstance(b, Binding) and b.description
        )
    previous = ""
    for screen, key, what in rows:
        table.add_row(screen if screen != previous else "", key, what)
        previous = screen
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(Text("memviewer keys", style="bold"))
            yield Static(bindings_table([b for b in self.app.BINDINGS if isinstance(b, Binding)]))
            yield Static(Text("\n".join(NOTES), style="dim"))

    def action_close(self) -> None:
        self.dismiss(None)
