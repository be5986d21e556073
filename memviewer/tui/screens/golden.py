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

from memviewer.eval.golden_view import METRICS, screen_rows
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
    # below WIDE the model and the changed parameters leave the table for the line under it
    WIDE = 120
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
        yield Static(id="golden-run-detail")
        yield CoalescedFooter()

    def on_mount(self) -> None:
        self.query_one("#golden-cases", DataTable).add_columns("id", "query", "scope", "turns")
        self._runs_width = 0
        self._setup_runs()
        self.action_reload()

    def _run_columns(self) -> list[tuple[str, int]]:
        """Fixed widths (the metrics always on screen); 0: the rest of the width."""
        width = self.app.size.width
        cols = [("run", 3), ("when", 16), ("K M top_k", 9), ("cases", 5)]
        cols += [(m, max(len(m), 5)) for m in METRICS]
        if width >= self.WIDE:
            cols += [("model", 21), ("changed", 0)]
        return cols

    def _setup_runs(self) -> None:
        table = self.query_one("#golden-runs", DataTable)
        self._runs_width = width = self.app.size.width
        table.clear(columns=True)
        cols = self._run_columns()
        fixed = sum(w for _, w in cols) + 2 * table.cell_padding * len(cols) + 4
        for label, w in cols:
            table.add_column(label, key=label, width=w or max(12, width - fixed))
        self._fill_runs()

    def on_resize(self) -> None:
        if self.app.size.width != self._runs_width:
            self._setup_runs()

    def _fill_runs(self) -> None:
        table = self.query_one("#golden-runs", DataTable)
        table.clear()
        keys = [str(c.key.value) for c in table.columns.values()]
        for cells in screen_rows(self.runs):
            # the changed parameters wrap in their cell rather than run off the screen
            table.add_row(*(Text(printable(cells[k])) for k in keys), height=None)
        self._show_run_detail(table.cursor_row)

    def _show_run_detail(self, row: int) -> None:
        """Under the table: the highlighted run's model and changed parameters, which the
        table itself shows only from WIDE columns."""
        detail = self.query_one("#golden-run-detail", Static)
        rows = screen_rows(self.runs)
        if not (0 <= row < len(rows)) or self.app.size.width >= self.WIDE:
            detail.update("")
            return
        cells = rows[row]
        text = Text(f"run {cells['run']}: ", style="bold")
        text.append(printable(f"model {cells['model']}"))
        text.append(printable(f" · changed: {cells['changed'] or 'nothing'}"), style="cyan")
        detail.update(text)

    @on(DataTable.RowHighlighted, "#golden-runs")
    def _run_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_run_detail(event.cursor_row)

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
        self._fill_runs()
        line = f"{len(self.runs)} run(s), newest first · r scores every case now"
        if report is not None:
            skipped = f", {report['skipped']} skipped (expected turns deleted)" if report["skipped"] else ""
            line = f"run {report['run_id']}: {report['cases']} case(s){skipped} · " + line
        status.update(Text(line, style="bold green" if report is not None else ""))
