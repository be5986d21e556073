"""Golden: the cases kept in the home and the score history of ``eval golden``.

``r`` scores every case now (default parameters, in a thread worker) and stores
the run, so the table shows it next to the earlier ones; a regression after a
change of weights or model is one row down.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from memviewer.eval.golden_view import HISTORY_COLUMNS, history_rows
from memviewer.tui.formatting import one_line, printable
from memviewer.tui.messages import Loaded
from memviewer.tui.widgets.footer import CoalescedFooter

if TYPE_CHECKING:
    from memviewer.tui.viewer_app import ViewerApp


class GoldenScreen(Screen):
    if TYPE_CHECKING:  # self.app is the viewer (its service, feed, open_session)
        app = getters.app(ViewerApp)

    TITLE = "Golden"
    CSS_PATH = "../golden.tcss"
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("r", "evaluate", "Run eval"),
        Binding("ctrl+r", "reload", "Reload", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[dict[str, Any]] = []
        self.cases: list[dict[str, Any]] = []
        self._token = 0

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(Text("golden cases", style="bold"), classes="golden-title")
        yield DataTable(id="golden-cases", cursor_type="row", zebra_stripes=True)
        yield Static(id="golden-status")
        yield DataTable(id="golden-runs", cursor_type="row", zebra_stripes=True)
        yield CoalescedFooter()

    def on_mount(self) -> None:
        self.query_one("#golden-cases", DataTable).add_columns("id", "query", "scope", "turns")
        self.query_one("#golden-runs", DataTable).add_columns(*HISTORY_COLUMNS)
        self.action_reload()

    def action_reload(self) -> None:
        self._token += 1
        self._load(self._token, False)

    def action_evaluate(self) -> None:
        self._token += 1
        self.query_one("#golden-status", Static).update(Text("scoring every case…", style="yellow"))
        self._load(self._token, True)

    @work(thread=True, exclusive=True, group="golden")
    def _load(self, token: int, evaluate: bool) -> None:
        from memviewer.eval import golden

        service = self.app.service
        try:
            report = golden.evaluate(service) if evaluate else None
            data = (golden.cases(service), golden.history(service), report)
        except Exception as exc:
            message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            self.post_message(Loaded("golden", error=message, token=token))
            return
        self.post_message(Loaded("golden", data, token=token))

    @on(Loaded)
    def _on_loaded(self, message: Loaded) -> None:
        if message.kind != "golden" or message.token != self._token:
            return
        status = self.query_one("#golden-status", Static)
        if message.error:
            status.update(Text(printable(message.error), style="bold red"))
            return
        self.cases, self.runs, report = message.data
        cases = self.query_one("#golden-cases", DataTable)
        cases.clear()
        for c in self.cases:
            cases.add_row(
                Text(str(c["id"])),
                Text(one_line(c["query"], 80)),
                Text(printable(f"{c['scope'] or '*'}:{c['scope_id'] or '*'}")),
                Text(str(len(c["turn_ids"]))),
            )
        runs = self.query_one("#golden-runs", DataTable)
        runs.clear()
        for row in history_rows(self.runs):
            runs.add_row(*(Text(printable(str(v))) for v in row))
        line = f"{len(self.runs)} run(s), newest first · r scores every case now"
        if report is not None:
            skipped = f", {report['skipped']} skipped (expected turns deleted)" if report["skipped"] else ""
            line = f"run {report['run_id']}: {report['cases']} case(s){skipped} · " + line
        status.update(Text(line, style="bold green" if report is not None else ""))
