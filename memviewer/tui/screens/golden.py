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


class GoldenScreen(Screen[None]):
    if TYPE_CHECKING:  # self.app is the viewer (its service, feed, open_session)
        app = getters.app(ViewerApp)

    TITLE = "Golden"
    CSS_PATH = "../golden.tcss"
    # The model and the changed parameters join the runs table only where the changed cell
    # gets this many columns (about 150 wide); below that they are the line under the table,
    # so the metrics never scroll off and the parameters never wrap a letter column.
    CHANGED_MIN = 40
    CASE_SCOPE = 24  # the cases' scope column; the query takes the rest
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
        self._width = 0
        self._query_width = 12
        self.wide = False  # the runs table holds the model and changed columns

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(Text("golden cases", style="bold"), classes="golden-title")
        yield DataTable(id="golden-cases", cursor_type="row", zebra_stripes=True)
        yield Static(id="golden-status")
        yield DataTable(id="golden-runs", cursor_type="row", zebra_stripes=True)
        yield Static(id="golden-run-detail")
        yield CoalescedFooter()

    def on_mount(self) -> None:
        self._setup_tables()
        self.action_reload()

    @staticmethod
    def _rest(table: DataTable[Any], width: int, cols: list[tuple[str, int]]) -> int:
        """What a table ``width`` wide leaves for its one 0-width column after the others
        (cell padding, the scrollbar and the margins counted)."""
        return width - sum(w for _, w in cols) - 2 * table.cell_padding * len(cols) - 4

    def _run_columns(self, table: DataTable[Any], width: int) -> list[tuple[str, int]]:
        """Fixed widths (the metrics always on screen); 0: the rest of the width."""
        cols = [("run", 3), ("when", 16), ("K M top_k", 9), ("cases", 5)]
        cols += [(m, max(len(m), 5)) for m in METRICS]
        wide = [*cols, ("model", 21), ("changed", 0)]
        self.wide = self._rest(table, width, wide) >= self.CHANGED_MIN
        return wide if self.wide else cols

    def _setup_tables(self) -> None:
        self._width = width = self.app.size.width
        cases = self.query_one("#golden-cases", DataTable)
        cases.clear(columns=True)
        case_cols = [("id", 4), ("query", 0), ("scope", self.CASE_SCOPE), ("turns", 5)]
        self._query_width = max(12, self._rest(cases, width, case_cols))
        for label, w in case_cols:
            cases.add_column(label, key=label, width=w or self._query_width)
        self._fill_cases()
        table = self.query_one("#golden-runs", DataTable)
        table.clear(columns=True)
        cols = self._run_columns(table, width)
        for label, w in cols:
            table.add_column(label, key=label, width=w or self._rest(table, width, cols))
        self._fill_runs()

    def on_resize(self) -> None:
        if self.app.size.width != self._width:
            self._setup_tables()

    def _fill_cases(self) -> None:
        table = self.query_one("#golden-cases", DataTable)
        table.clear()
        for c in self.cases:
            table.add_row(
                Text(str(c["id"])),
                Text(one_line(c["query"], self._query_width)),
                Text(one_line(f"{c['scope'] or '*'}:{c['scope_id'] or '*'}", self.CASE_SCOPE)),
                Text(str(len(c["turn_ids"]))),
            )

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
        table itself shows only when it is ``wide``."""
        detail = self.query_one("#golden-run-detail", Static)
        rows = screen_rows(self.runs)
        if not (0 <= row < len(rows)) or self.wide:
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

        service = self.app.local
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
        self._fill_cases()
        self._fill_runs()
        line = f"{len(self.runs)} run(s), newest first · r scores every case now"
        if report is not None:
            skipped = f", {report['skipped']} skipped (expected turns deleted)" if report["skipped"] else ""
            line = f"run {report['run_id']}: {report['cases']} case(s){skipped} · " + line
        status.update(Text(line, style="bold green" if report is not None else ""))
