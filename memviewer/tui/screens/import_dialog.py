"""Import from the viewer: a PraisonAI session file or folder, or a memviewer JSON export,
with a progress bar. The import runs in a thread worker (the UI stays live) through the
same functions as ``memviewer import praisonai`` / ``memviewer import json``; a bad file
is listed by name and the others still go in."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, ProgressBar, Select, Static

from memviewer.tui.formatting import printable
from memviewer.tui.messages import Loaded, Progress
from memviewer.tui.widgets.tick_box import TickBox

if TYPE_CHECKING:
    from memviewer.service import MemoryService
    from memviewer.tui.viewer_app import ViewerApp

KINDS = (("PraisonAI files or folder", "praisonai"), ("memviewer JSON export", "json"))


def run_import(service: MemoryService, kind: str, path: str, replace: bool, progress: Any) -> dict[str, Any]:
    """``{"imported": [...], "failed": [{"path", "error"}]}`` for one path of ``kind``."""
    target = Path(path).expanduser()
    if not target.exists():
        raise ValueError(f"{target} does not exist")
    if kind == "praisonai":
        # the service's path: a huge file is stored in chunks (bounded memory), and the index
        # catches up in the background (the viewer shows the lag) rather than in this worker
        return service.import_praisonai([target], progress, index=False, replace=replace).to_dict()
    from memviewer.io.json_import import ExportFileError, import_file

    try:
        return import_file(
            service.import_session,
            target,
            progress,
            replace=replace,
            annotate=service.import_annotations,
            record_calls=service.import_llm_calls,
        )
    except ExportFileError as exc:
        return {"imported": [], "failed": [{"path": str(target), "error": str(exc)}]}


class ImportScreen(ModalScreen[int]):
    """Dismissed with the number of sessions imported (0 when closed without importing)."""

    if TYPE_CHECKING:  # self.app is the viewer (its service, feed, open_session)
        app = getters.app(ViewerApp)

    BINDINGS = [Binding("escape", "close", "Close"), Binding("ctrl+s", "start", "Import")]

    def __init__(self) -> None:
        super().__init__()
        self.imported = 0
        self.running = False

    def compose(self) -> ComposeResult:
        with Vertical(id="import-box"):
            yield Label(Text("Import sessions", style="bold"))
            with Horizontal(classes="import-row"):
                yield Label("from  ")
                yield Select(KINDS, value="praisonai", allow_blank=False, id="import-kind", compact=True)
                yield TickBox("replace existing", value=False, id="import-replace", compact=True)
            with Horizontal(classes="import-row"):
                yield Label("path  ")
                yield Input(
                    placeholder="~/.praisonai/sessions or export.json", id="import-path", compact=True
                )
            yield ProgressBar(total=1, show_eta=False, id="import-progress")  # steady until it runs
            yield Static("", id="import-status")
            with Horizontal(classes="import-row"):
                yield Button("Import (ctrl+s)", id="import-start", variant="primary")
                yield Button("Close", id="import-close")

    @on(Button.Pressed, "#import-start")
    @on(Input.Submitted, "#import-path")
    def action_start(self) -> None:
        if self.running:
            return
        path = self.query_one("#import-path", Input).value.strip()
        if not path:
            self._status(Text("type a path first", style="yellow"))
            return
        if self.app.service.readonly:
            self._status(Text("a hub owns the store: run `memviewer import` instead", style="bold red"))
            return
        self.running = True
        self._status(Text(printable(f"importing {path}…"), style="yellow"))
        kind = str(self.query_one("#import-kind", Select).value)
        self._run(kind, path, self.query_one("#import-replace", Checkbox).value)

    @work(thread=True, exclusive=True, group="import")
    def _run(self, kind: str, path: str, replace: bool) -> None:
        def progress(done: int, total: int, item: str) -> None:
            self.post_message(Progress(done, total, item))

        try:
            report = run_import(self.app.local, kind, path, replace, progress)
        except Exception as exc:
            self.post_message(Loaded("import", error=getattr(exc, "message", None) or str(exc)))
            return
        self.post_message(Loaded("import", report))

    def on_progress(self, message: Progress) -> None:
        bar = self.query_one("#import-progress", ProgressBar)
        bar.update(total=max(message.total, 1), progress=message.done)
        self._status(Text(printable(f"{message.done}/{message.total}  {message.item}"), style="dim"))

    @on(Loaded)
    def _done(self, message: Loaded) -> None:
        if message.kind != "import":
            return
        self.running = False
        if message.error:
            self._status(Text(printable(f"import failed: {message.error}"), style="bold red"))
            return
        report = message.data
        imported, failed = report["imported"], report["failed"]
        self.imported += len(imported)
        turns = sum(int(r.get("turns", 0)) for r in imported)
        out = Text(f"imported {len(imported)} sessions ({turns} turns)", style="bold green")
        if failed:
            out.append(f"; {len(failed)} failed", style="bold red")
            for f in failed[:5]:
                out.append(printable(f"\n  {f['path']}: {f['error']}"), style="red")
        bar = self.query_one("#import-progress", ProgressBar)
        bar.update(total=max(bar.total or 1, 1), progress=bar.total or 1)
        self._status(out)

    @on(Button.Pressed, "#import-close")
    def action_close(self) -> None:
        self.dismiss(self.imported)

    def _status(self, text: Text) -> None:
        self.query_one("#import-status", Static).update(text)
