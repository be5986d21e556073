"""Recall: run two-stage (or flat) recall and read its explain trace.

Recall loads LanceDB and the embedding model on first use, so every run is a
thread worker in the exclusive ``recall`` group: the UI stays live, and a
parameter change simply supersedes the run in flight. Recall only reads.

The "as of" field is the moment the question is asked, so a past question (a
LongMemEval one with its question date) can be replayed: relative dates in the
query ("a week ago") count from it. Naive dates are UTC, like every time shown.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import events, getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import (
    Checkbox,
    DataTable,
    Header,
    Input,
    Label,
    Select,
    Static,
    TabbedContent,
    TabPane,
)
from textual.worker import get_current_worker

from memviewer.contract.checks import int_param
from memviewer.contract.requests import RecallParams, default, int_bounds
from memviewer.errors import MemviewerError
from memviewer.present.snippets import text_or_tool_calls
from memviewer.present.why_view import fix_line
from memviewer.recall_log import RecordAs
from memviewer.timeutil import utc_minutes
from memviewer.tui.formatting import one_line, printable
from memviewer.tui.handoff import recall_command, recall_json
from memviewer.tui.messages import Loaded
from memviewer.tui.notices import escalation_notice
from memviewer.tui.screens.recall_view import result_detail, summary_cell, trace_text
from memviewer.tui.widgets.footer import CoalescedFooter
from memviewer.tui.widgets.tick_box import TickBox

if TYPE_CHECKING:
    from memviewer.api import LocalService
    from memviewer.tui.viewer_app import ViewerApp

RERUN_DELAY = 0.3
CANCELLED = "why-not cancelled (x)"
MODES = (("hierarchical", "hierarchical"), ("flat", "flat"), ("compare flat | hier.", "compare"))
TAB_FOCUS = {
    "tab-results": "#results",
    "tab-stage1": "#stage1",
    "tab-pool": "#dropped",
    "tab-trace": "#trace-box",
    "tab-compare": "#cmp-hier",
}
NARROW = 100  # below this the results table trims session, role and rank (Content keeps ~30)
SIDE_BY_SIDE = 130  # from here the side-by-side's two tables stand side by side (else stacked)
WIDE = 170  # from here every parameter field, the B field too, fits on one row
ROLE_SHORT = {"assistant": "asst", "system": "sys"}
#: (field id, label, parameter, default, lo, hi): recall's integer parameters, default and
#: bounds read from the request model (``RecallParams``), refused here, inline.
INT_PARAMS: tuple[tuple[str, str, str, int, int, int], ...] = tuple(
    (widget, label, name, default(RecallParams, name), *int_bounds(RecallParams, name))
    for widget, label, name in (
        ("k", "K", "top_sessions"),
        ("m", "M", "chunks_per_session"),
        ("top-k", "top_k", "top_k"),
    )
)
VS_HELP = (
    "The side-by-side's second parameter set (B), laid over the fields: e.g. top_k=20,\n"
    "mode=flat, k=8, w_dense=0.3 (see `memviewer recall --vs`). Empty: flat vs hierarchical."
)
AS_OF_HELP = (
    "When the question is asked; relative dates in the query count from it.\n"
    "2023-05-30, 2023-05-30 21:24 (UTC), ISO 8601 or epoch seconds; empty = now."
)


class QueryInput(Input):
    """The query field: ``/`` on an empty query only keeps the focus (the README's "``/``
    query" key must not type a slash into the field it lands in); anywhere else it is text.
    Up / down walk the query history (newest first), kept across restarts in the home."""

    BINDINGS = [
        Binding("up", "history(-1)", "Older query", show=False),
        Binding("down", "history(1)", "Newer query", show=False),
    ]

    def __init__(self, *args: Any, history: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.history = history if history is not None else []
        self._pos: int | None = None  # position in history while walking it
        self._draft = ""

    def action_history(self, step: int) -> None:
        if not self.history:
            return
        if self._pos is None:
            if step > 0:
                return
            self._draft, self._pos = self.value, len(self.history)
        pos = self._pos + step
        if pos >= len(self.history):
            self._pos, self.value = None, self._draft
        else:
            self._pos = max(0, pos)
            self.value = self.history[self._pos]
        self.cursor_position = len(self.value)

    def remember(self, query: str) -> None:
        self._pos = None

    async def _on_key(self, event: events.Key) -> None:
        if event.character == "/" and not self.value:
            event.stop()
            event.prevent_default()
            return
        await super()._on_key(event)


class RecallScreen(Screen[None]):
    if TYPE_CHECKING:  # self.app is the viewer (its service, feed, open_session)
        app = getters.app(ViewerApp)

    TITLE = "Recall"
    # -narrow: short columns; -medium: parameter groups stacked, the side-by-side's tables
    # stacked too; -roomy: tables side by side; -wide: the parameters on one row.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW, "-medium"), (SIDE_BY_SIDE, "-roomy"), (WIDE, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]
    BINDINGS = [
        Binding("slash", "focus_query", "Query", key_display="/"),
        Binding("ctrl+r", "rerun", "Re-run"),
        Binding("m", "cycle_mode", "Mode"),
        Binding("t", "next_tab", "Next tab"),
        Binding("y", "copy_command", "Copy as CLI command", key_display="y"),
        Binding("Y", "copy_json", "Copy result JSON", key_display="Y"),
        Binding("escape", "focus_results", "Results", show=False),
        Binding("f", "apply_fix", "Apply why-not fix", show=False),
        Binding("a", "add_golden", "Add golden case", show=False),
        Binding("h", "golden", "Golden history", show=False),
        Binding("x", "cancel_why", "Cancel why-not"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.result: dict[str, Any] | None = None
        self.flat: dict[str, Any] | None = None
        self.titles: dict[str, str] = {}
        self._token = 0
        self._timer: Timer | None = None
        self._engine_loaded = False
        self._as_of: float | None = None  # resolved "as of" of the run in flight / shown
        self._columns_width = 0
        self._session_width = 24
        self._pending_params: tuple[str, dict[str, Any]] | None = None
        self._shown_params: tuple[str, dict[str, Any]] | None = None  # what the shown result ran with
        self._shown: tuple[float, bool] | None = None  # (elapsed, rerank) of the result shown
        self.whys: list[dict[str, Any]] = []  # why-not of each expected turn (Session screen w)
        self._weights: dict[str, float] = {}  # weights set by an applied why-not fix
        self._b_label = ""
        self._why_cancel: threading.Event | None = None  # set by x: the running why-not stops
        self._why_running = False
        self._why_line: Text | None = None
        self._status_base = Text()  # the shown result's status line, before its why-not part

    def compose(self) -> ComposeResult:
        yield Header()
        yield QueryInput(
            placeholder="recall query, Enter to run  (/; up/down: history)",
            id="query",
            compact=True,
            history=self.app.prefs.history,
        )
        # Three groups: one row from WIDE columns, stacked below that (recall.tcss), so no
        # field sits off-screen where tab reaches it but nobody sees it; the B field's group
        # shows only in compare mode.
        with Horizontal(id="recall-params"):
            with Horizontal(classes="param-group"):
                yield Label("scope")
                yield Input(placeholder="any", id="scope", compact=True)
                yield Label("id")
                yield Input(placeholder="any", id="scope-id", compact=True)
                for widget, label, _name, value, _lo, _hi in INT_PARAMS:
                    yield Label(label)
                    yield Input(str(value), id=widget, type="integer", compact=True)
            with Horizontal(classes="param-group"):
                yield Label("as of")
                yield Input(placeholder="now", id="as-of", compact=True, tooltip=AS_OF_HELP)
                yield TickBox(
                    "rerank", value=False, id="rerank", compact=True, disabled=not self._has_reranker()
                )
                yield Select(MODES, value="hierarchical", allow_blank=False, id="mode", compact=True)
            with Horizontal(classes="param-group", id="vs-group"):
                yield Label("B")
                yield Input(
                    placeholder="B: key=value,… (empty: flat)",
                    id="vs",
                    compact=True,
                    tooltip=VS_HELP,
                )
        yield Static(
            Text("Type a query and press Enter. Recall never changes memory.", style="dim"),
            id="recall-status",
        )
        yield Static(id="recall-notice", classes="hidden")
        with TabbedContent(id="recall-tabs"):
            with TabPane("Results", id="tab-results"):
                with Vertical():
                    yield DataTable(id="results", cursor_type="row", zebra_stripes=True)
                    with VerticalScroll(id="result-detail-box"):
                        yield Static(id="result-detail")
            with TabPane("Stage 1 sessions", id="tab-stage1"):
                yield DataTable(id="stage1", cursor_type="row", zebra_stripes=True)
            with TabPane("Post-filter", id="tab-pool"):
                with Vertical():
                    yield Static(id="pool-info")
                    yield DataTable(id="dropped", cursor_type="row", zebra_stripes=True)
            with TabPane("Trace", id="tab-trace"):
                with VerticalScroll(id="trace-box"):
                    yield Static(id="trace")
            with TabPane("Flat vs hierarchical", id="tab-compare"):
                with Horizontal(id="cmp-row"):
                    with Vertical(classes="cmp"):
                        yield Static(Text("HIERARCHICAL", style="bold green"), classes="cmp-title")
                        yield DataTable(id="cmp-hier", cursor_type="row", zebra_stripes=True)
                    with Vertical(classes="cmp"):
                        yield Static(
                            Text("FLAT (turn query only)", style="bold cyan"),
                            classes="cmp-title",
                            id="cmp-b-title",
                        )
                        yield DataTable(id="cmp-flat", cursor_type="row", zebra_stripes=True)
        yield CoalescedFooter()

    def _has_reranker(self) -> bool:
        return self.app.service.reranker is not None

    def on_mount(self) -> None:
        rerank = self.query_one("#rerank", Checkbox)
        if rerank.disabled:  # off, greyed and saying why, rather than a toggle that does nothing
            rerank.label = "rerank (none configured)"
            rerank.tooltip = "No reranker is configured: results keep the blended score order."
        self._setup_columns(self.app.size.width)
        self.query_one("#query", Input).focus()

    def on_resize(self) -> None:
        """Column widths follow the terminal (the content column takes what is left)."""
        width = self.app.size.width
        if width == self._columns_width:
            return
        row = self.query_one("#results", DataTable).cursor_row
        self._setup_columns(width)
        if self.result is not None and self._shown is not None:
            self._show_result(*self._shown)
            results = self.query_one("#results", DataTable)
            if 0 < row < results.row_count:
                results.move_cursor(row=row, animate=False)

    def _setup_columns(self, width: int) -> None:
        self._columns_width = width
        for table in self.query(DataTable):
            table.clear(columns=True)
        narrow = width < NARROW
        self._session_width = 12 if narrow else 24
        _columns(
            self.query_one("#results", DataTable),
            width,
            [
                ("#", 2 if narrow else 3),
                ("Score", 5 if narrow else 6),
                ("Session", self._session_width),
                ("Turn", 10),
                ("Role", 4 if narrow else 9),
                ("Content", 0),
            ],
        )
        _columns(
            self.query_one("#stage1", DataTable),
            width,
            [("#", 3), ("Score", 6), ("Session", 24), ("Summary", 0)],
        )
        _columns(
            self.query_one("#dropped", DataTable),
            width,
            [("Why", 14), ("Score", 6), ("Session", 24), ("Turn id", 0)],
        )
        half = (width - 2) // 2 if width >= SIDE_BY_SIDE else width
        for table_id in ("#cmp-hier", "#cmp-flat"):
            _columns(
                self.query_one(table_id, DataTable),
                half,
                [("#", 3), ("Score", 6), ("Session", 16), ("Turn", 4), ("Content", 0)],
            )

    # -- parameters ---------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        """The recall keyword arguments from the inputs; raises ValueError with a reason."""
        out: dict[str, Any] = {}
        scope = self.query_one("#scope", Input).value.strip()
        scope_id = self.query_one("#scope-id", Input).value.strip()
        if scope:
            out["scope"] = scope
        if scope_id:
            out["scope_id"] = scope_id
        for widget_id, _label, name, value, lo, hi in INT_PARAMS:
            raw = self.query_one(f"#{widget_id}", Input).value.strip()
            try:
                out[name] = int_param(name, raw or None, value, lo, hi)
            except MemviewerError as exc:
                raise ValueError(exc.message) from None
        as_of = self.query_one("#as-of", Input).value.strip()
        if as_of:  # resolved once here: refused with recall's own message before a run
            out["as_of"] = resolve_as_of(as_of)
        mode = self.query_one("#mode", Select).value
        out["mode"] = "hierarchical" if mode == "compare" else str(mode)
        if self._weights:
            out["weights"] = dict(self._weights)
        return out

    def b_overrides(self) -> dict[str, Any]:
        """The side-by-side's B parameter set (``mode=flat`` when the field is empty)."""
        from memviewer.contract.compare import parse_overrides

        spec = self.query_one("#vs", Input).value.strip()
        if not spec:
            return {"mode": "flat"}
        try:
            return parse_overrides(spec)
        except Exception as exc:
            raise ValueError(f"B: {getattr(exc, 'message', exc)}") from None

    @property
    def compare(self) -> bool:
        return self.query_one("#mode", Select).value == "compare"

    @property
    def rerank(self) -> bool:
        return self.query_one("#rerank", Checkbox).value

    @on(Input.Submitted, "#query, #as-of, #vs")
    def _query_submitted(self) -> None:
        """Run, and hand the keyboard to the results, so the screen keys (t, m, 1/2/3, e, ?)
        work as documented instead of typing into the query; ``/`` goes back to it."""
        if self.action_rerun():
            self.action_focus_results()

    @on(Input.Changed, "#scope, #scope-id, #k, #m, #top-k, #as-of, #vs")
    @on(Checkbox.Changed)
    @on(Select.Changed)
    def _param_changed(self) -> None:
        if not self.query_one("#query", Input).value.strip():
            return
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(RERUN_DELAY, self.action_rerun)

    def action_rerun(self) -> bool:
        """Start a run with the current inputs; False (and a status line) when they are refused."""
        if self._timer is not None:  # Enter beats a pending debounced re-run
            self._timer.stop()
            self._timer = None
        query = self.query_one("#query", Input).value.strip()
        if not query:
            self._status(Text("type a query first", style="yellow"))
            return False
        try:
            params = self.params()
            b = self.b_overrides() if self.compare else None
        except ValueError as exc:
            self._status(Text(printable(f"bad parameter: {exc}"), style="bold red"))
            return False
        prefs = self.app.prefs
        prefs.add_query(query)
        query_input = self.query_one("#query", QueryInput)
        query_input.history = prefs.history
        query_input.remember(query)
        self._token += 1
        if self._why_cancel is not None:  # a why-not of the run this one supersedes stops
            self._why_cancel.set()
        self._why_running, self._why_line = False, None
        self.refresh_bindings()
        self._as_of = params.get("as_of")
        self._pending_params = (query, params)
        note = "" if self._engine_loaded else " (first run loads LanceDB and the embedding model)"
        self._status(Text(f"running {params['mode']} recall…{note}", style="yellow"))
        self._b_label = _b_label(b)
        self._run(self._token, query, params, b, self.rerank, self._expected())
        return True

    def _expected(self) -> list[dict[str, Any]]:
        from memviewer.tui.expected import expected_turns

        return list(expected_turns(self.app))

    @work(thread=True, exclusive=True, group="recall")
    def _run(
        self,
        token: int,
        query: str,
        params: dict[str, Any],
        b: dict[str, Any] | None,
        rerank: bool,
        expected: list[dict[str, Any]] | None = None,
    ) -> None:
        service = self.app.service
        started = time.perf_counter()
        try:
            from memviewer.contract.compare import apply_overrides

            kwargs = {**params, **rerank_kwargs(rerank)}
            # with_tool_calls: tool-call-only turns show their calls instead of a blank cell
            result = service.recall(query, **kwargs, with_tool_calls=True, record=RecordAs("tui"))
            flat = (
                service.recall(query, **apply_overrides(kwargs, b), with_tool_calls=True)
                if b is not None
                else None
            )
            titles = _titles(service, result, flat)
        except Exception as exc:
            message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            hint = exc.hint if isinstance(exc, MemviewerError) else None
            self.post_message(
                Loaded("recall", error=message + (f" (hint: {hint})" if hint else ""), token=token)
            )
            return
        elapsed = (time.perf_counter() - started) * 1000
        # the results first: the why-nots follow in this worker, with progress and a cancel key
        self.post_message(Loaded("recall", (result, flat, titles, elapsed, rerank, []), token=token))
        if not expected:
            return
        worker = get_current_worker()
        cancel = self._why_cancel = threading.Event()

        def progress(turn: int, done: int, planned: int) -> None:
            self.post_message(Loaded("why-progress", (turn, len(expected), done, planned), token=token))

        def stopped() -> bool:
            return cancel.is_set() or worker.is_cancelled

        self.post_message(Loaded("why-progress", (1, len(expected), 0, 0), token=token))
        whys = why_nots(service, query, kwargs, expected, progress=progress, cancelled=stopped)
        if worker.is_cancelled:  # superseded by a newer run: nobody is waiting for these
            return
        self.post_message(Loaded("why", whys, token=token))

    @property
    def run_token(self) -> int:
        """The latest run's token: only a ``Loaded`` result carrying it is shown (older runs'
        results arrive late and are dropped)."""
        return self._token

    @on(Loaded)
    def _on_loaded(self, message: Loaded) -> None:
        if message.token != self._token:
            return
        if message.kind == "why-progress":
            self._why_progress(*message.data)
            return
        if message.kind == "why":
            self._why_running = False
            self.refresh_bindings()
            self.whys = message.data
            self._show_whys()
            return
        if message.kind != "recall":
            return
        if message.error:
            error = printable(message.error)
            self._status(Text(error, style="bold red"))
            self.notify(error, severity="error", timeout=8, markup=False)
            return
        self._engine_loaded = True
        self._shown_params = self._pending_params
        self.result, self.flat, titles, elapsed, rerank = message.data[:5]
        self.whys = message.data[5] if len(message.data) > 5 else []
        self.titles.update(titles)
        self._show_result(elapsed, rerank)

    def _why_progress(self, turn: int, turns: int, done: int, planned: int) -> None:
        """``why-not of turn 1 of 2: re-run 12 of at most 60 (x cancels)`` after the results."""
        if not self._why_running:
            self._why_running = True
            self.refresh_bindings()
        self._why_line = Text(f"why-not of expected turn {turn} of {turns}: ", style="bold magenta")
        self._why_line.append(
            f"re-run {done} of at most {planned}" if planned else "tracing every stage…", style="magenta"
        )
        self._why_line.append("  (x cancels)", style="dim")
        self._show_whys()

    def action_cancel_why(self) -> None:
        """Stop the why-not fix search (the results stay; the trace says what was cut short)."""
        if self._why_cancel is not None and self._why_running:
            self._why_cancel.set()
            self.notify("why-not cancelled", timeout=3)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_why":
            return self._why_running
        return True

    # -- rendering ------------------------------------------------------------------
    def _status(self, text: Text) -> None:
        self.query_one("#recall-status", Static).update(text)

    def _session_label(self, session_id: str, width: int = 24) -> Text:
        title = self.titles.get(session_id) or session_id
        return Text(one_line(title, width))

    def _show_result(self, elapsed: float, rerank: bool) -> None:
        assert self.result is not None
        self._shown = (elapsed, rerank)
        result, diag = self.result, self.result.get("diagnostics") or {}
        rows = result.get("results") or []
        status = Text(f"{len(rows)} results", style="bold green")
        status.append(
            f"  ·  {diag.get('mode', 'hierarchical')}  ·  stage 1: {len(diag.get('stage1') or [])} sessions"
        )
        if self._as_of is not None:
            status.append(f"  ·  as of {utc_minutes(self._as_of)}")
        if diag.get("time_window"):
            status.append("  ·  ")
            status.append(printable(f"time “{diag['time_window'].get('phrase')}”"), style="bold cyan")
        if diag.get("escalations"):
            status.append(f"  ·  escalations: {', '.join(diag['escalations'])}", style="bold yellow")
        if (diag.get("index") or {}).get("scope_turns") == 0:
            status.append(
                "  ·  the vector index holds no turns here yet (the hub indexes in the background;"
                " `memviewer reindex` builds it now)",
                style="yellow",
            )
        self._status(status)
        notice = escalation_notice(diag)
        box = self.query_one("#recall-notice", Static)
        box.update(notice or "")
        box.set_class(notice is None, "hidden")
        table = self.query_one("#results", DataTable)
        table.clear()
        narrow = self._columns_width < NARROW
        for rank, r in enumerate(rows, 1):
            role = str(r.get("role") or "")
            table.add_row(
                Text(str(rank)),
                Text(f"{float(r['score']):.3f}"[: 5 if narrow else 6], style="green"),
                self._session_label(r["session_id"], self._session_width),
                Text(
                    f"#{r['index']}" + (" arch" if r.get("archived") else ""),
                    style="magenta" if r.get("archived") else "",
                ),
                Text(printable(role if not narrow else ROLE_SHORT.get(role, role))),
                Text(
                    one_line(text_or_tool_calls(r.get("content"), r.get("tool_calls")), 300),
                    overflow="ellipsis",
                    no_wrap=True,
                ),
                key=str(rank - 1),
            )
        self._show_detail(0)
        stage1 = self.query_one("#stage1", DataTable)
        stage1.clear()
        for rank, s in enumerate(diag.get("stage1") or [], 1):
            stage1.add_row(
                Text(str(rank)),
                Text(f"{float(s.get('score', 0)):.3f}", style="green"),
                self._session_label(s["session_id"]),
                summary_cell(s.get("summary")),
                key=s["session_id"],
            )
        self._render_pool(diag)
        self._status_base = status
        self._show_whys()
        self._render_compare()

    def _show_whys(self) -> None:
        """The trace and the status line's why-not part (progress while it runs)."""
        if self.result is None or self._shown is None:
            return
        status = self._status_base.copy()
        trace = trace_text(self.result, self._shown[0], as_of=self._as_of)
        if self.whys:
            trace.append("\n")
            trace.append_text(why_text(self.whys))
            status.append(f"  ·  {why_summary(self.whys)}", style="bold magenta")
        elif self._why_running and self._why_line is not None:
            status.append("\n")
            status.append_text(self._why_line)
        self._status(status)
        self.query_one("#trace", Static).update(trace)

    def _render_pool(self, diag: dict[str, Any]) -> None:
        dropped, capped = diag.get("dropped") or [], diag.get("capped") or []
        info = Text()
        info.append(f"{diag.get('stage2_candidates', 0)} stage-2 candidates", style="bold")
        info.append(f" → {diag.get('post_filter', 0)} in Stage-1 sessions")
        info.append(f" · {len(dropped)} dropped (session not in Stage 1)", style="red")
        info.append(f" · {len(capped)} over the per-session cap M", style="yellow")
        self.query_one("#pool-info", Static).update(info)
        table = self.query_one("#dropped", DataTable)
        table.clear()
        for why, items, style in (("not in stage 1", dropped, "red"), ("over cap M", capped, "yellow")):
            for item in items:
                table.add_row(
                    Text(why, style=style),
                    Text(f"{float(item.get('score', 0)):.3f}"),
                    self._session_label(item.get("session_id", "")),
                    Text(printable(item.get("turn_id", ""))),
                )

    def _render_compare(self) -> None:
        """The A column is the run as set; the B column is the second parameter set (flat when
        none is given). A flat run with no B goes under FLAT, and HIERARCHICAL stays empty."""
        self.query_one("#cmp-b-title", Static).update(
            Text(self._b_label or "FLAT (turn query only)", style="bold cyan")
        )
        shown_flat = ((self.result or {}).get("diagnostics") or {}).get("mode") == "flat"
        alone_flat = shown_flat and self.flat is None
        hier = None if alone_flat else self.result
        flat = self.flat if self.flat is not None else (self.result if alone_flat else None)
        for table_id, result in (("#cmp-hier", hier), ("#cmp-flat", flat)):
            table = self.query_one(table_id, DataTable)
            table.clear()
            if result is None:
                continue
            for rank, r in enumerate(result.get("results") or [], 1):
                table.add_row(
                    Text(str(rank)),
                    Text(f"{float(r['score']):.3f}", style="green"),
                    self._session_label(r["session_id"], 16),
                    Text(f"#{r['index']}"),
                    Text(one_line(text_or_tool_calls(r.get("content"), r.get("tool_calls")), 80)),
                    key=f"{r['session_id']}|{r['index']}",
                )

    def _show_detail(self, row: int) -> None:
        rows = (self.result or {}).get("results") or []
        detail = self.query_one("#result-detail", Static)
        if 0 <= row < len(rows):
            detail.update(result_detail(rows[row]))
        else:
            detail.update(Text("no results", style="dim"))

    @on(DataTable.RowHighlighted, "#results")
    def _result_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail(event.cursor_row)

    @on(DataTable.RowSelected, "#results")
    def _result_selected(self, event: DataTable.RowSelected) -> None:
        rows = (self.result or {}).get("results") or []
        if 0 <= event.cursor_row < len(rows):
            r = rows[event.cursor_row]
            self.app.open_session(r["session_id"], anchor=r["index"])

    @on(DataTable.RowSelected, "#stage1")
    def _stage1_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            self.app.open_session(str(event.row_key.value))

    @on(DataTable.RowSelected, "#cmp-hier, #cmp-flat")
    def _compare_selected(self, event: DataTable.RowSelected) -> None:
        key = str(event.row_key.value or "")
        if "|" in key:
            sid, index = key.rsplit("|", 1)
            self.app.open_session(sid, anchor=int(index))

    @on(TabbedContent.TabActivated, "#recall-tabs")
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """Opening the comparison without a flat run switches to compare mode (which re-runs)."""
        if event.pane.id == "tab-compare" and self.result is not None and self.flat is None:
            self.query_one("#mode", Select).value = "compare"

    # -- actions --------------------------------------------------------------------
    def action_focus_query(self) -> None:
        self.query_one("#query", Input).focus()

    def action_focus_results(self) -> None:
        """Focus the main widget of the tab on show (the results table on the first tab)."""
        active = self.query_one("#recall-tabs", TabbedContent).active
        self.query_one(TAB_FOCUS.get(active, "#results")).focus()

    def action_cycle_mode(self) -> None:
        select = self.query_one("#mode", Select)
        values = [v for _, v in MODES]
        select.value = values[(values.index(str(select.value)) + 1) % len(values)]
        if select.value == "compare":
            self.show_tab("tab-compare")

    def show_tab(self, tab_id: str) -> None:
        """Switch tab and focus its main widget (focus left in a hidden pane would switch back)."""
        self.query_one("#recall-tabs", TabbedContent).active = tab_id
        self.query_one(TAB_FOCUS[tab_id]).focus()

    def action_next_tab(self) -> None:
        tabs = self.query_one("#recall-tabs", TabbedContent)
        ids = list(TAB_FOCUS)
        self.show_tab(ids[(ids.index(tabs.active) + 1) % len(ids)] if tabs.active in ids else ids[0])

    def action_copy_command(self) -> None:
        """The ``memviewer recall`` command that reproduces the recall shown (same moment)."""
        if self.result is None or self._shown_params is None:
            self.notify("run a recall first", timeout=3)
            return
        query, params = self._shown_params
        self.app.copy_to_clipboard(recall_command(query, params))
        self.notify("recall copied as a CLI command", timeout=3)

    def action_copy_json(self) -> None:
        if self.result is None:
            self.notify("run a recall first", timeout=3)
            return
        self.app.copy_to_clipboard(recall_json(self.result))
        self.notify("recall result copied as JSON", timeout=3)

    def export_context(self) -> tuple[str | None, list[str]]:
        rows = (self.result or {}).get("results") or []
        return None, sorted({r["session_id"] for r in rows})

    @on(Select.Changed, "#mode")
    def _mode_changed(self) -> None:
        self.query_one("#vs-group").display = self.query_one("#vs", Input).display = self.compare

    # -- why-not and golden cases --------------------------------------------------------
    def action_apply_fix(self) -> None:
        """Set the parameters of the first verified why-not fix and re-run."""
        why = next((w for w in self.whys if w.get("fix")), None)
        if why is None:
            note = "no why-not fix to apply" + (
                "" if self.whys else ": mark a turn expected (Session screen, w)"
            )
            self.notify(note, severity="warning", markup=False)
            return
        from memviewer.contract.compare import WEIGHT_KEYS

        for widget_id, _label, name, *_bounds in INT_PARAMS:
            if name in why["fix"]:
                self.query_one(f"#{widget_id}", Input).value = str(why["fix"][name])
        self._weights.update({WEIGHT_KEYS[k]: v for k, v in why["fix"].items() if k in WEIGHT_KEYS})
        self.notify(f"applied {fix_line(why)}", markup=False)
        self.action_rerun()

    def action_add_golden(self) -> None:
        """Keep the current query and the expected turns as a golden case."""
        query = self.query_one("#query", Input).value.strip()
        turns = [m["turn_id"] for m in self._expected()]
        if not query or not turns:
            self.notify(
                "a golden case needs a query and expected turns (Session screen, w)",
                severity="warning",
                markup=False,
            )
            return
        params = self.params() if query else {}
        self._add_golden(query, turns, params.get("scope"), params.get("scope_id"))

    @work(thread=True, exclusive=True, group="golden-add")
    def _add_golden(self, query: str, turns: list[str], scope: str | None, scope_id: str | None) -> None:
        from memviewer.eval.golden import add_case

        try:
            case = add_case(self.app.local, query, turns, scope, scope_id)
        except Exception as exc:
            message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            self.app.call_from_thread(
                self.notify, f"golden case not added: {message}", severity="error", markup=False
            )
            return
        self.app.call_from_thread(
            self.notify, f"golden case {case['id']} added ({len(case['turn_ids'])} turns)", markup=False
        )

    def action_golden(self) -> None:
        from memviewer.tui.screens.golden import GoldenScreen

        self.app.push_screen(GoldenScreen())


def why_nots(
    service: LocalService,
    query: str,
    kwargs: dict[str, Any],
    expected: list[dict[str, Any]],
    *,
    progress: Callable[[int, int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> list[dict[str, Any]]:
    """The why-not of each expected turn in this run's scope (others are noted, not run).

    One ``RerunCache`` serves every expected turn (same question, same moment);
    ``progress(turn, done, planned)`` hears each re-run; once ``cancelled()`` says so the
    search in flight and the turns after it say "cancelled" instead of a fix."""
    from memviewer.errors import WhyCancelled

    kwargs = dict(kwargs)
    if kwargs.get("as_of") in (None, ""):  # one moment for every turn's run, so they share
        kwargs["as_of"] = time.time()
    cache = service.why_cache()
    out = []
    for n, mark in enumerate(expected, 1):
        if cancelled is not None and cancelled():
            out.append({"turn_id": mark["turn_id"], "index": mark.get("index"), "error": CANCELLED})
            continue
        try:
            _, why = service.why(
                query,
                mark["turn_id"],
                kwargs,
                cache=cache,
                progress=_for_turn(progress, n),
                cancelled=cancelled,
            )
        except WhyCancelled as exc:
            why = {
                "turn_id": mark["turn_id"],
                "error": f"{CANCELLED} after {exc.done} of {exc.planned} re-runs",
            }
        except Exception as exc:
            message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            why = {"turn_id": mark["turn_id"], "error": message}
        why["index"] = mark.get("index")
        out.append(why)
    return out


def _for_turn(
    progress: Callable[[int, int, int], None] | None, turn: int
) -> Callable[[int, int], None] | None:
    if progress is None:
        return None

    def report(done: int, planned: int) -> None:
        progress(turn, done, planned)

    return report


def why_text(whys: list[dict[str, Any]]) -> Text:
    """The trace's why-not section: each expected turn through every stage."""
    from memviewer.present.why_view import fix_line, stage_lines, verdict

    text = Text("why not (expected turns)\n", style="bold magenta")
    for why in whys:
        head = f"turn #{why.get('index')} {why['turn_id']}: "
        if why.get("error"):
            text.append(printable(head + why["error"]) + "\n", style="yellow")
            continue
        style = "green" if why["retrieved"] else "bold red"
        text.append(printable(head + verdict(why)) + "\n", style=style)
        for line in stage_lines(why):
            text.append(printable(line) + "\n")
        if not why["retrieved"]:
            text.append(
                printable("  " + fix_line(why) + ("  (f applies it)" if why.get("fix") else "")) + "\n"
            )
    return text


def why_summary(whys: list[dict[str, Any]]) -> str:
    missed = [w for w in whys if not w.get("error") and not w["retrieved"]]
    if not missed:
        return f"{len(whys)} expected turn(s): all retrieved" if whys else ""
    first = missed[0]
    note = f"expected turn #{first.get('index')} out at {first['eliminated_at']}"
    return note + (" (f: apply fix)" if first.get("fix") else "")


def _b_label(b: dict[str, Any] | None) -> str:
    if not b or b == {"mode": "flat"}:
        return ""
    return "B: " + ", ".join(f"{k}={v}" for k, v in b.items())


def resolve_as_of(value: str) -> float:
    """Epoch seconds of an "as of" entry by recall's own rule (``timeref.parse_as_of``), so
    the screen never accepts what recall would refuse; ValueError with its message otherwise."""
    from memviewer.contract.timeref import parse_as_of

    return parse_as_of(value)


def rerank_kwargs(rerank: bool) -> dict[str, Any]:
    """How to ask recall for (no) reranking: ``rerank`` is part of recall's parameters."""
    return {"rerank": rerank}


def _columns(table: DataTable[Any], width: int, columns: list[tuple[str, int]]) -> None:
    """Fixed widths; the one given as 0 takes what is left (so no sideways scrolling)."""
    fixed = sum(w for _, w in columns) + 2 * table.cell_padding * len(columns) + 2
    for label, w in columns:
        table.add_column(label, width=w or max(20, width - fixed))


def _titles(service: LocalService, *results: dict[str, Any] | None) -> dict[str, str]:
    """Session titles for the ids a recall returned (a handful of primary-key reads)."""
    ids: set[str] = set()
    for res in results:
        if not res:
            continue
        ids.update(r["session_id"] for r in res.get("results") or [])
        diag = res.get("diagnostics") or {}
        ids.update(s["session_id"] for s in diag.get("stage1") or [])
        ids.update(d.get("session_id", "") for d in (diag.get("dropped") or []) + (diag.get("capped") or []))
    return service.session_titles(ids)
