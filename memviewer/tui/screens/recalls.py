"""Recalls: the recall log, newest first, and what one caller got at that moment.

Every search and recall (this viewer, the CLI, the hub RPC, the MCP server) and every
recall an agent reported with ``Publisher.record_recall`` is listed. ``enter`` opens
one (``RecallEntryScreen``): the query, parameters and the results as they came back
then. From there ``ctrl+r`` re-runs it today on the Recall screen with the same
parameters, and ``enter`` on a result opens its turn in its session.
The list reloads when shown, on ``r``, and when a ``recall.performed`` event arrives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Header, Select, Static

from memviewer.contract.requests import RecallParams
from memviewer.recall_log import SOURCES
from memviewer.tui.formatting import one_line, printable
from memviewer.tui.messages import Loaded
from memviewer.tui.screens.recall_fill import fill_recall_screen
from memviewer.tui.widgets.footer import CoalescedFooter

if TYPE_CHECKING:
    from memviewer.tui.viewer_app import ViewerApp

PAGE = 200
#: What the Recall screen's fields take from a logged recall: the request model's fields but
#: the query (its own field) and ``rerank`` (the screen's tick box follows the reranker).
RECALL_PARAMS = tuple(k for k in RecallParams.model_fields if k not in ("query", "rerank"))


class RecallsScreen(Screen[None]):
    if TYPE_CHECKING:  # self.app is the viewer (its service, feed, open_session)
        app = getters.app(ViewerApp)

    TITLE = "Recalls"
    BINDINGS = [
        Binding("r", "reload", "Reload"),
        Binding("s", "focus_source", "Source filter"),
        Binding("escape", "focus_table", "List", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[dict[str, Any]] = []
        self.total = 0
        self._token = 0
        self._seen_seq = 0

    def compose(self) -> ComposeResult:
        yield Header()
        yield Select(
            [("every source", "")] + [(s, s) for s in SOURCES],
            value="",
            allow_blank=False,
            id="recalls-source",
            compact=True,
        )
        yield Static(id="recalls-status")
        yield DataTable(id="recalls", cursor_type="row", zebra_stripes=True)
        yield CoalescedFooter()

    def on_mount(self) -> None:
        self._setup_columns()
        self.query_one("#recalls", DataTable).focus()
        self.action_reload()
        self.set_interval(1.0, self._watch_events)

    def _setup_columns(self) -> None:
        """Below 100 columns the time drops its year and seconds and the caller narrows, so
        the query keeps about 30 characters; the query takes what is left of the width."""
        table = self.query_one("#recalls", DataTable)
        self._width = width = self.app.size.width
        self._narrow = width < 100
        table.clear(columns=True)
        cols = [
            ("When (UTC)", 11 if self._narrow else 19),
            ("Source", 6),
            ("Kind", 6),
            ("Caller", 10 if self._narrow else 14),
            ("#", 4),
        ]
        for label, w in cols:
            table.add_column(label, width=w)
        fixed = sum(w for _, w in cols) + 2 * table.cell_padding * (len(cols) + 1) + 2
        table.add_column("Query", width=max(20, width - fixed))

    def on_resize(self) -> None:
        if getattr(self, "_width", None) != self.app.size.width:
            self._setup_columns()
            self.action_reload()

    def on_screen_resume(self) -> None:
        self.action_reload()

    def _watch_events(self) -> None:
        """Reload when the live feed saw a new ``recall.performed`` (cheap: one attribute)."""
        seq = self.app.feed.last_recall_seq
        if seq > self._seen_seq:
            self._seen_seq = seq
            self.action_reload()

    @property
    def source(self) -> str | None:
        value = self.query_one("#recalls-source", Select).value
        return str(value) if value else None

    def action_reload(self) -> None:
        self._token += 1
        self._load(self._token, self.source)

    @work(thread=True, exclusive=True, group="recalls")
    def _load(self, token: int, source: str | None) -> None:
        try:
            page = self.app.service.recalls(source=source, limit=PAGE)
        except Exception as exc:
            self.post_message(Loaded("recalls", error=f"{type(exc).__name__}: {exc}", token=token))
            return
        self.post_message(Loaded("recalls", page, token=token))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        if message.kind != "recalls" or message.token != self._token:
            return
        status = self.query_one("#recalls-status", Static)
        if message.error:
            status.update(Text(printable(message.error), style="bold red"))
            return
        page = message.data
        self.entries, self.total = page["recalls"], page["total"]
        table = self.query_one("#recalls", DataTable)
        row = table.cursor_row
        table.clear()
        for e in self.entries:
            table.add_row(
                Text(
                    (e.get("at") or "")[5 if self._narrow else 0 : 16 if self._narrow else 19].replace(
                        "T", " "
                    )
                ),
                Text(e["source"], style="bold cyan" if e["source"] in ("agent", "mcp", "otlp") else ""),
                Text(e["kind"]),
                Text(one_line(e.get("session_id") or "-", 10 if self._narrow else 14)),
                Text(str(e["result_count"])),
                Text(one_line(e["query"] or "(browse)", 200)),
                key=e["recall_id"],
            )
        if 0 <= row < table.row_count:
            table.move_cursor(row=row, animate=False)
        shown = f"{len(self.entries)} of {self.total}" if self.total > len(self.entries) else str(self.total)
        status.update(
            Text(f"{shown} recorded searches and recalls, newest first  ·  enter opens one", style="dim")
        )

    @on(Select.Changed, "#recalls-source")
    def _source_changed(self) -> None:
        self.action_reload()

    @on(DataTable.RowSelected, "#recalls")
    def _selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            self.app.push_screen(RecallEntryScreen(str(event.row_key.value)))

    def action_focus_source(self) -> None:
        self.query_one("#recalls-source", Select).focus()

    def action_focus_table(self) -> None:
        self.query_one("#recalls", DataTable).focus()


class RecallEntryScreen(Screen[None]):
    """One recorded search or recall: what the caller got at that moment."""

    if TYPE_CHECKING:  # self.app is the viewer (its service, feed, open_session)
        app = getters.app(ViewerApp)

    TITLE = "Recall log entry"
    BINDINGS = [
        Binding("ctrl+r", "rerun", "Re-run now"),
        Binding("o", "open_caller", "Caller session"),
        Binding("L", "context", "LLM call that followed", key_display="L"),
        Binding("escape", "app.pop_screen", "Back"),
    ]

    def __init__(self, recall_id: str) -> None:
        super().__init__()
        self.recall_id = recall_id
        self.entry: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="entry-head")
        yield DataTable(id="entry-results", cursor_type="row", zebra_stripes=True)
        yield CoalescedFooter()

    def on_mount(self) -> None:
        table = self.query_one("#entry-results", DataTable)
        for label, width in (("#", 3), ("Score", 6), ("Session", 24), ("Turn", 6)):
            table.add_column(label, width=width)
        table.add_column("What came back")
        table.focus()
        self._load()

    @work(thread=True, exclusive=True, group="recall-entry")
    def _load(self) -> None:
        try:
            entry = self.app.service.recall_entry(self.recall_id)
        except Exception as exc:
            message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            self.post_message(Loaded("recall-entry", error=message))
            return
        self.post_message(Loaded("recall-entry", entry))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        if message.kind != "recall-entry":
            return
        head = self.query_one("#entry-head", Static)
        if message.error:
            head.update(Text(printable(message.error), style="bold red"))
            return
        e = self.entry = message.data
        text = Text()
        text.append(f"{e['kind']} ", style="bold")
        text.append(printable(e["recall_id"]), style="dim")
        text.append(f"  ·  {e.get('at')}  ·  from ")
        text.append(e["source"], style="bold cyan")
        if e.get("session_id"):
            text.append(printable(f"  ·  caller session {e['session_id']}"))
        text.append("\nquery: ")
        text.append(printable(e["query"] or "(none: browse or scroll)"), style="bold")
        if e.get("params"):
            text.append(
                printable("\nparams: " + ", ".join(f"{k}={v}" for k, v in sorted(e["params"].items()))),
                style="dim",
            )
        escalations = (e.get("diagnostics") or {}).get("escalations")
        if escalations:
            text.append(printable(f"\nescalations: {', '.join(escalations)}"), style="yellow")
        hint = "ctrl+r re-runs it now on the Recall screen" if e["kind"] == "recall" else ""
        text.append(f"\n{len(e['results'])} results as they came back then  ·  {hint}", style="dim")
        head.update(text)
        table = self.query_one("#entry-results", DataTable)
        table.clear()
        for i, r in enumerate(e["results"]):
            score = r.get("score")
            table.add_row(
                Text(str(r.get("rank") or i + 1)),
                Text("" if score is None else f"{float(score):.3f}", style="green"),
                Text(one_line(r.get("session_id") or "-", 24)),
                Text("" if r.get("index") is None else f"#{r['index']}"),
                Text(one_line(r.get("text") or r.get("title") or r.get("turn_id") or "", 300)),
                key=str(i),
            )

    @on(DataTable.RowSelected, "#entry-results")
    def _result_selected(self, event: DataTable.RowSelected) -> None:
        results = (self.entry or {}).get("results") or []
        row = event.cursor_row
        if 0 <= row < len(results) and results[row].get("session_id"):
            r = results[row]
            self.app.open_session(r["session_id"], anchor=r.get("index"))

    def action_open_caller(self) -> None:
        """The caller's session, at the last turn before the recall: where it happened."""
        e = self.entry or {}
        if not e.get("session_id"):
            self.notify("this entry names no caller session", severity="warning")
            return
        self._open_caller(e["session_id"], float(e["ts"]))

    @work(thread=True, exclusive=True, group="recall-caller")
    def _open_caller(self, session_id: str, ts: float) -> None:
        from memviewer.timeutil import parse_ts

        try:
            turns = self.app.service.session(session_id)["turns"]
        except Exception as exc:
            message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            self.app.call_from_thread(self.notify, printable(message), severity="error")
            return
        anchor = None
        for t in turns:  # archived first, then active: index order; the last one not after ts
            try:
                when = parse_ts(t.get("timestamp"))
            except ValueError:  # a stored time no calendar holds: not a place to anchor
                continue
            if when is not None and when <= ts and (anchor is None or t["index"] > anchor):
                anchor = t["index"]
        self.app.call_from_thread(self.app.open_session, session_id, anchor)

    def action_context(self) -> None:
        """The Context screen of the LLM call that followed this recall: the one naming it,
        else the caller session's first call after it."""
        e = self.entry or {}
        if not e.get("session_id"):
            self.notify("this entry names no caller session", severity="warning")
            return
        self._open_context(e["session_id"], e["recall_id"], float(e["ts"]))

    @work(thread=True, exclusive=True, group="recall-context")
    def _open_context(self, session_id: str, recall_id: str, ts: float) -> None:
        from memviewer.tui.screens.context import ContextScreen

        try:
            calls = self.app.service.llm_calls(session_id=session_id, limit=10_000)["calls"]
        except Exception as exc:
            message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            self.app.call_from_thread(self.notify, printable(message), severity="error")
            return
        call = next((c for c in calls if recall_id in c["recall_ids"]), None) or next(
            (c for c in calls if c["ts"] >= ts), None
        )
        if call is None:
            self.app.call_from_thread(
                self.notify, "no LLM call recorded after this recall", severity="warning"
            )
            return
        self.app.call_from_thread(self.app.push_screen, ContextScreen(call["call_id"]))

    async def action_rerun(self) -> None:
        """The same question on the Recall screen, today, with the recorded parameters."""
        e = self.entry
        if e is None:
            return
        if e["kind"] != "recall":
            self.notify(
                f"a search is re-run with `memviewer recalls show {e['recall_id']} --rerun`",
                severity="warning",
            )
            return
        params = {k: v for k, v in (e.get("params") or {}).items() if k in RECALL_PARAMS}
        await self.app.switch_mode("recall")
        fill_recall_screen(self.app.screen, e["query"], params)
