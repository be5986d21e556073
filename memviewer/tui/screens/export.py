"""Export: which sessions, which format, which redaction, where; with progress.

The export runs in a thread worker; its ``progress(done, total, item)``
callback posts messages, so the bar moves while the UI stays responsive.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, ProgressBar, RadioButton, RadioSet, Select, Static

from memviewer.tui.formatting import one_line, printable
from memviewer.tui.messages import Loaded, Progress

if TYPE_CHECKING:
    from memviewer.tui.viewer_app import ViewerApp

FORMATS = (("JSON", "json"), ("JSONL", "jsonl"), ("Markdown", "md"), ("PraisonAI session JSON", "praisonai"))
REDACTIONS = (("no redaction", "none"), ("standard", "standard"), ("strict", "strict"))
EXTENSIONS = {"json": ".json", "jsonl": ".jsonl", "md": ".md", "praisonai": ""}


def default_path(fmt: str, stamp: str | None = None) -> str:
    stamp = stamp or time.strftime("%Y%m%d-%H%M%S")
    return str(Path.cwd() / f"memviewer-export-{stamp}{EXTENSIONS.get(fmt, '')}")


class ExportScreen(ModalScreen[None]):
    if TYPE_CHECKING:  # self.app is the viewer (its service, feed, open_session)
        app = getters.app(ViewerApp)

    BINDINGS = [Binding("escape", "close", "Close"), Binding("ctrl+s", "export", "Export")]

    def __init__(self, current: str | None = None, selected: list[str] | None = None) -> None:
        super().__init__()
        self.current = current
        self.selected = list(selected or [])
        self._format = "json"
        self._stamp = time.strftime("%Y%m%d-%H%M%S")
        self.running = False
        self.last_result: dict[str, Any] | None = None
        # (format, path) the user was told would overwrite files: pressing Export again for
        # the very same target replaces them (the CLI's --force).
        self._confirm: tuple[str, Path] | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="export-box"):
            yield Label("Export sessions", id="export-title")
            with RadioSet(id="which"):
                yield RadioButton(  # a Text label: an id like 's[/]x' is not markup
                    Text(f"current session  {one_line(self.current or '(none)', 60)}"),
                    id="which-current",
                    value=bool(self.current) and not self.selected,
                    disabled=not self.current,
                )
                yield RadioButton(
                    f"marked sessions ({len(self.selected)})",
                    id="which-selected",
                    value=bool(self.selected),
                    disabled=not self.selected,
                )
                yield RadioButton(
                    "all sessions", id="which-all", value=not self.current and not self.selected
                )
            with Horizontal(classes="export-row"):
                yield Label("format")
                yield Select(FORMATS, value="json", allow_blank=False, id="format", compact=True)
                yield Label("redact")
                yield Select(REDACTIONS, value="none", allow_blank=False, id="redact", compact=True)
            with Horizontal(classes="export-row"):
                yield Label("path")
                yield Input(default_path("json", self._stamp), id="path", compact=True)
            yield ProgressBar(total=None, show_eta=False, id="export-progress", classes="hidden")
            yield Static(id="export-status")
            with Horizontal(classes="export-row", id="export-buttons"):
                yield Button("Export", variant="primary", id="export-go")
                yield Button("Close", id="export-close")

    def on_mount(self) -> None:
        self.query_one("#export-go", Button).focus()

    # -- form ---------------------------------------------------------------------
    @on(Select.Changed, "#format")
    def _format_changed(self, event: Select.Changed) -> None:
        """Follow the format with the default path's extension, unless the user typed a path."""
        path = self.query_one("#path", Input)
        if path.value == default_path(self._format, self._stamp):
            path.value = default_path(str(event.value), self._stamp)
        self._format = str(event.value)

    def chosen_ids(self) -> list[str] | None:
        """Session ids to export; ``None`` means all."""
        pressed = self.query_one("#which", RadioSet).pressed_button
        which = pressed.id if pressed is not None else "which-all"
        if which == "which-current" and self.current:
            return [self.current]
        if which == "which-selected" and self.selected:
            return list(self.selected)
        return None

    @on(Button.Pressed, "#export-go")
    def _go(self) -> None:
        self.action_export()

    @on(Button.Pressed, "#export-close")
    def _close(self) -> None:
        self.action_close()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_export(self) -> None:
        if self.running:
            return
        raw = self.query_one("#path", Input).value.strip()
        if not raw:
            self._status(Text("choose a path", style="bold red"))
            return
        out = Path(raw).expanduser().absolute()  # reported as a full path, wherever the viewer started
        if not out.parent.exists():
            self._status(Text(printable(f"folder {out.parent} does not exist"), style="bold red"))
            return
        fmt = str(self.query_one("#format", Select).value)
        redact = str(self.query_one("#redact", Select).value)
        self.running = True
        self.query_one("#export-go", Button).disabled = True
        bar = self.query_one("#export-progress", ProgressBar)
        bar.remove_class("hidden")
        bar.update(total=None, progress=0)
        self._status(Text(printable(f"exporting to {out}…"), style="yellow"))
        force, self._confirm = self._confirm == (fmt, out), None
        self._export(self.chosen_ids(), fmt, out, None if redact == "none" else redact, force)

    @work(thread=True, exclusive=True, group="export")
    def _export(
        self, ids: list[str] | None, fmt: str, out: Path, redact: str | None, force: bool = False
    ) -> None:
        app = self.app

        def progress(done: int, total: int, item: Any = "") -> None:
            self.post_message(Progress(done, total, str(item or "")))

        try:
            result = app.service.export(ids, fmt, out, redact=redact, progress=progress, force=force)
        except Exception as exc:
            error = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            data = getattr(exc, "data", None)
            if isinstance(data, dict) and data.get("existing") and not force:
                outcome = Loaded(
                    "export", data=(fmt, out), error=f"{error} — press Export again to replace them"
                )
            else:
                outcome = Loaded("export", error=error)
        else:
            outcome = Loaded("export", (result, out))
        # Through the app, not a message to this screen: the dialog may have been closed
        # while the export ran, and its end (a file written, or a failure) must still be told.
        try:
            app.call_from_thread(self._done, outcome)
        except RuntimeError:
            pass  # the app is shutting down

    @on(Progress)
    def _progress(self, message: Progress) -> None:
        bar = self.query_one("#export-progress", ProgressBar)
        bar.update(total=max(message.total, 1), progress=message.done)
        self._status(Text(f"{message.done}/{message.total}  {one_line(message.item, 60)}", style="dim"))

    def _done(self, message: Loaded) -> None:
        """Report how the export ended: a toast always, the dialog too while it is open."""
        self.running = False
        shown = self.is_attached
        if message.error:
            if message.data is not None:  # files would be overwritten: a second press confirms
                self._confirm = message.data
            error = printable(f"export failed: {message.error}")
            if shown:
                self.query_one("#export-go", Button).disabled = False
                self._status(Text(error, style="bold red"))
            self.app.notify(error, severity="error", timeout=8, markup=False)
            return
        result, out = message.data
        self.last_result = result if isinstance(result, dict) else {"result": result}
        path = (result or {}).get("path", str(out)) if isinstance(result, dict) else str(out)
        count = (result or {}).get("sessions") if isinstance(result, dict) else None
        what = f"{count} session{'s' if count != 1 else ''}" if isinstance(count, int) else "sessions"
        redactions = (result or {}).get("redactions") if isinstance(result, dict) else None
        if redactions:
            what += f" ({sum(redactions.values())} redactions)"
        done = printable(f"exported {what} to {path}")
        if shown:
            self.query_one("#export-go", Button).disabled = False
            bar = self.query_one("#export-progress", ProgressBar)
            bar.update(total=bar.total or 1, progress=bar.total or 1)
            self._status(Text(done, style="bold green"))
        self.app.notify(done, title="Export done", timeout=10, markup=False)

    def _status(self, text: Text) -> None:
        self.query_one("#export-status", Static).update(text)
