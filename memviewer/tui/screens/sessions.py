"""Sessions: a paged table of every session, filter-as-you-type, sort keys,
and keyword discovery whose hits open a session at the matching turn."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Header, Input, OptionList, Static
from textual.widgets.option_list import Option

from memviewer.present.highlight import query_terms
from memviewer.tui.formatting import (
    annotation_badge,
    badges,
    hit_text,
    one_line,
    printable,
    scope_label,
    short_time,
    status_text,
)
from memviewer.tui.messages import Loaded
from memviewer.tui.screens.annotate import AnnotateScreen
from memviewer.tui.screens.confirm import ConfirmScreen
from memviewer.tui.widgets.footer import CoalescedFooter
from memviewer.tui.widgets.paged_table import PagedTable

if TYPE_CHECKING:
    from memviewer.tui.viewer_app import ViewerApp

PAGE_SIZE = 100
SORTS = (
    ("last_seen", "last seen"),
    ("started", "started"),
    ("title", "title"),
    ("agent", "agent"),
    ("scope", "scope id"),
    ("episodes", "episodes"),
    ("active", "active turns"),
    ("archived", "archived turns"),
    ("status", "status"),
)
ASCENDING_FIRST = frozenset({"title", "agent", "scope", "status"})  # text reads A→Z first
COLUMN_SORTS = {
    "title": "title",
    "agent": "agent",
    "scope": "scope",
    "started": "started",
    "last": "last_seen",
    "episodes": "episodes",
    "active": "active",
    "archived": "archived",
    "status": "status",
}
NARROW = 100  # below this width the less important columns go, so Ep/Act/Arch/Status stay
NARROW_DROPPED = frozenset({"scope", "started", "badges"})
MEDIUM = 140  # below this the start date goes too (Last seen carries a date): the title gains 12
MEDIUM_DROPPED = frozenset({"started"})
ROOMY = 160  # from here the agent column is wide enough for the demo's names (14)
EMPTY_HINT = (
    "No sessions yet. Load the demo history with `.venv/bin/memviewer demo` (or `memviewer demo`), "
    "or connect an agent: `from memviewer.client import Publisher` publishes to this viewer's hub "
    "(see the README, 'Use it with your agent')."
)
# (key, label, width); the title column takes what is left of the screen width.
FIXED_COLUMNS = (
    ("agent", "Agent", 10),
    ("scope", "Scope", 12),
    ("started", "Started", 10),
    ("last", "Last seen", 16),
    ("episodes", "Ep", 3),
    ("active", "Act", 4),
    ("archived", "Arch", 4),
    ("status", "Status", 6),
    ("badges", "Badges", 12),
)
MIN_TITLE = 20
FILTER_DELAY = 0.15
LIVE_REFRESH_S = 2.0


class SessionsScreen(Screen[None]):
    """Page through sessions without loading them all (``service.sessions(limit, offset)``)."""

    if TYPE_CHECKING:  # self.app is the viewer (its service, feed, open_session)
        app = getters.app(ViewerApp)

    TITLE = "Sessions"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]
    BINDINGS = [
        Binding("enter", "open", "Open (a search hit opens at its turn)", show=False),
        Binding("slash", "focus_filter", "Filter", key_display="/"),
        Binding("s", "focus_search", "Search"),
        Binding("o", "cycle_sort", "Sort"),
        Binding("r", "reverse", "Reverse"),
        Binding("space", "mark", "Mark", key_display="space"),
        Binding("right_square_bracket", "page(1)", "Next page", key_display="]"),
        Binding("left_square_bracket", "page(-1)", "Prev page", key_display="["),
        Binding("D", "delete", "Delete session", key_display="D"),
        Binding("t", "annotate", "Tags / note", show=False),
        Binding("ctrl+r", "reload", "Reload", show=False),
        Binding("escape", "back", "Back", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.page_offset = 0
        self.requested_offset = 0  # where the latest load is heading (keys pressed faster than loads)
        self.total = 0
        self.sort_index = 0
        self.descending = True
        self.filter_text = ""
        self.rows: list[dict[str, Any]] = []
        self.marked: set[str] = set()
        self.hits: list[dict[str, Any]] = []
        self.search_terms: tuple[str, ...] = ()
        self._token = 0
        self._search_token = 0  # hits of a superseded search are dropped, like pages of a superseded load
        self._title_width = MIN_TITLE
        self._filter_timer: Timer | None = None
        self._seen_events = 0
        self._shown_columns = [key for key, _, _ in FIXED_COLUMNS]
        self._shown_widths = [(key, w) for key, _, w in FIXED_COLUMNS]
        self.loaded_once = False

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="sessions-bar"):
            yield Input(placeholder="filter: title, agent, id, scope id  (/)", id="filter", compact=True)
            yield Input(placeholder="keyword search across every turn, Enter  (s)", id="search", compact=True)
        yield Static(id="page-info")
        yield OptionList(id="hits", classes="hidden")
        yield PagedTable(id="sessions", cursor_type="row", zebra_stripes=True)
        yield CoalescedFooter()

    def on_mount(self) -> None:
        self._setup_columns()
        self.load(0, cursor="first")
        self.set_interval(LIVE_REFRESH_S, self._refresh_if_changed)
        self.query_one("#sessions", PagedTable).focus()

    # -- loading --------------------------------------------------------------
    def load(self, offset: int, cursor: str = "keep") -> None:
        self._token += 1
        self.requested_offset = max(0, offset)
        sort_key = SORTS[self.sort_index][0]
        self._fetch(self._token, max(0, offset), cursor, sort_key, self.descending, self.filter_text)

    @work(thread=True, exclusive=True, group="sessions-page")
    def _fetch(self, token: int, offset: int, cursor: str, sort: str, descending: bool, text: str) -> None:
        try:
            page = self.app.service.sessions(
                filter=text or None, sort=sort, descending=descending, limit=PAGE_SIZE, offset=offset
            )
            if not page["sessions"] and offset > 0 and page["total"] > 0:
                last = ((page["total"] - 1) // PAGE_SIZE) * PAGE_SIZE
                page = self.app.service.sessions(
                    filter=text or None, sort=sort, descending=descending, limit=PAGE_SIZE, offset=last
                )
        except Exception as exc:  # shown, never raised into the UI loop
            self.post_message(Loaded("page", error=f"{type(exc).__name__}: {exc}", token=token))
            return
        self.post_message(Loaded("page", (page, cursor), token=token))

    @on(Loaded)
    def _on_loaded(self, message: Loaded) -> None:
        if message.kind == "page":
            if message.token != self._token:
                return  # a newer request is on its way
            if message.error:
                self.notify(
                    printable(f"cannot list sessions: {message.error}"), severity="error", markup=False
                )
                return
            page, cursor = message.data
            self._apply_page(page, cursor)
        elif message.kind == "deleted":
            if message.error:
                self.notify(printable(f"cannot delete: {message.error}"), severity="error")
                return
            self.marked.discard(message.data["session_id"])
            self.notify(printable(f"deleted {message.data['session_id']} ({message.data['turns']} turns)"))
            self.load(self.page_offset, cursor="keep")
        elif message.kind == "hits":
            if message.token != self._search_token:
                return  # a superseded search (its thread cannot be stopped) finished late
            self._apply_hits(message.data, message.error)

    def _apply_page(self, page: dict[str, Any], cursor: str) -> None:
        table = self.query_one("#sessions", PagedTable)
        keep_id = self.current_id() if cursor == "keep" else None
        keep_row = table.cursor_row
        same_rows = [r["session_id"] for r in page["sessions"]] == [r["session_id"] for r in self.rows]
        if cursor == "keep" and same_rows and int(page["offset"]) == self.page_offset and table.row_count:
            self._update_in_place(table, page)  # live refresh: only changed cells repaint
            return
        self.rows = page["sessions"]
        self.total = int(page["total"])
        self.page_offset = self.requested_offset = int(page["offset"])
        table.clear()
        for row in self.rows:
            table.add_row(*self._cells(row), key=row["session_id"])
        if self.rows:
            if cursor == "last":
                target = len(self.rows) - 1
            elif cursor == "first":
                target = 0
            else:
                ids = [r["session_id"] for r in self.rows]
                target = ids.index(keep_id) if keep_id in ids else min(keep_row, len(self.rows) - 1)
            table.move_cursor(row=target, animate=False)
        self._update_info()
        if not self.loaded_once:
            self.loaded_once = True
            self.call_after_refresh(self.app.first_paint_done, len(self.rows), self.total)

    def _update_in_place(self, table: PagedTable, page: dict[str, Any]) -> None:
        keys = ["title", *self._shown_columns]
        for i, (old, new) in enumerate(zip(self.rows, page["sessions"], strict=True)):
            if old != new:
                for col, (a, b) in enumerate(zip(self._cells(old), self._cells(new), strict=True)):
                    if a != b:
                        table.update_cell(new["session_id"], keys[col], b)
                self.rows[i] = new
        self.total = int(page["total"])
        self._update_info()

    def _cells(self, row: dict[str, Any]) -> list[Any]:
        title = row.get("title") or "(untitled)"
        mark = "● " if row["session_id"] in self.marked else ""
        cell_title = Text()
        cell_title.append(mark, style="bold yellow")
        tagged = annotation_badge(row)  # the user's tags and note marker first: they survive truncation
        if row.get("annotated_turns"):
            if tagged:
                tagged.append(" ")
            tagged.append(f"+{row['annotated_turns']}✎", style="cyan")
        if tagged:
            cell_title.append_text(tagged)
            cell_title.append(" ")
        cell_title.append(one_line(title, max(self._title_width, 1)))
        cell_title.truncate(self._title_width, overflow="ellipsis")
        cells = dict(
            zip(
                [key for key, _, _ in FIXED_COLUMNS],
                self._fixed_cells(row),
                strict=True,
            )
        )
        return [cell_title, *(cells[key] for key in self._shown_columns)]

    def _fixed_cells(self, row: dict[str, Any]) -> list[Any]:
        return [
            Text(printable(row.get("agent") or ""), overflow="ellipsis"),
            Text(scope_label(row), overflow="ellipsis"),
            Text(short_time(row.get("started_at"))[:10]),
            Text(short_time(row.get("last_seen_at"))),
            Text(str(row.get("episodes", 0)), justify="right"),
            Text(str(row.get("active_turns", 0)), justify="right"),
            Text(
                str(row.get("archived_turns", 0)),
                justify="right",
                style="magenta" if row.get("archived_turns") else "",
            ),
            status_text(row.get("status")),
            badges({**row, "archived_turns": 0}),
        ]

    def _columns(self) -> list[tuple[str, str, int]]:
        """The fixed columns that fit: a narrow terminal drops scope, start date and badges
        (the session screen shows them) and keeps the counts and the status."""
        width = self.app.size.width
        if width >= ROOMY:
            return [(k, label, 14 if k == "agent" else w) for k, label, w in FIXED_COLUMNS]
        if width >= MEDIUM:
            return list(FIXED_COLUMNS)
        dropped = MEDIUM_DROPPED if width >= NARROW else NARROW_DROPPED
        return [c for c in FIXED_COLUMNS if c[0] not in dropped]

    def _compute_title_width(self) -> int:
        padding = 2 * self.query_one("#sessions", PagedTable).cell_padding
        columns = self._columns()
        fixed = sum(w for _, _, w in columns) + padding * (len(columns) + 1) + 2
        return max(MIN_TITLE, self.app.size.width - fixed)

    def _setup_columns(self) -> None:
        table = self.query_one("#sessions", PagedTable)
        self._title_width = self._compute_title_width()
        self._shown_columns = [key for key, _, _ in self._columns()]
        self._shown_widths = [(key, w) for key, _, w in self._columns()]
        table.clear(columns=True)
        table.add_column("Title", key="title", width=self._title_width)
        for key, label, w in self._columns():
            table.add_column(label, key=key, width=w)

    def on_resize(self) -> None:
        narrow_changed = [(key, w) for key, _, w in self._columns()] != self._shown_widths
        if self._compute_title_width() == self._title_width and not narrow_changed:
            return
        table = self.query_one("#sessions", PagedTable)
        cursor = table.cursor_row
        self._setup_columns()
        for row in self.rows:
            table.add_row(*self._cells(row), key=row["session_id"])
        if self.rows:
            table.move_cursor(row=min(cursor, len(self.rows) - 1), animate=False)

    def _update_info(self) -> None:
        info = Text()
        if self.total == 1:
            info.append("1 session", style="bold")
        elif self.total:
            info.append(
                f"Sessions {self.page_offset + 1:,}–{self.page_offset + len(self.rows):,} of {self.total:,}",
                style="bold",
            )
        elif self.filter_text:
            info.append("No sessions match the filter", style="bold")
        else:
            info.append(EMPTY_HINT, style="bold yellow")
        arrow = "↓" if self.descending else "↑"
        info.append(f"  ·  sort: {SORTS[self.sort_index][1]} {arrow}")
        if self.filter_text:
            info.append("  ·  filter: ")
            info.append(printable(repr(self.filter_text)), style="yellow")
        if self.marked:
            info.append(f"  ·  {len(self.marked)} marked", style="bold yellow")
        info.append("  ·  times UTC", style="dim")
        self.query_one("#page-info", Static).update(info)

    def _refresh_if_changed(self) -> None:
        """New hub events may have changed counts or added sessions: reload this page."""
        received = self.app.feed.received
        if received != self._seen_events and self.app.screen is self:
            self._seen_events = received
            self.load(self.page_offset, cursor="keep")

    # -- filter and search ------------------------------------------------------
    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        if self._filter_timer is not None:
            self._filter_timer.stop()
        value = event.value.strip()
        self._filter_timer = self.set_timer(FILTER_DELAY, lambda: self._apply_filter(value))

    def _apply_filter(self, value: str) -> None:
        if value != self.filter_text:
            self.filter_text = value
            self.load(0, cursor="first")

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self.query_one("#sessions", PagedTable).focus()

    @on(Input.Submitted, "#search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        query = event.value.strip()
        if not query:
            self._close_hits()
            return
        self.query_one("#hits", OptionList).set_options(
            [Option(Text("searching…", style="dim"), disabled=True)]
        )
        self.query_one("#hits", OptionList).remove_class("hidden")
        self._search_token += 1
        self._search(self._search_token, query)

    @work(thread=True, exclusive=True, group="sessions-search")
    def _search(self, token: int, query: str) -> None:
        try:
            from memviewer.recall_log import RecordAs

            result = self.app.service.search(query=query, limit=20, record=RecordAs("tui"))
        except Exception as exc:
            self.post_message(Loaded("hits", error=f"{type(exc).__name__}: {exc}", token=token))
            return
        if not result.get("success", False):
            hint = f" (hint: {result['hint']})" if result.get("hint") else ""
            error = f"{result.get('error', 'search failed')}{hint}"
            self.post_message(Loaded("hits", error=error, token=token))
            return
        self.post_message(Loaded("hits", result, token=token))

    def _apply_hits(self, result: dict[str, Any] | None, error: str | None) -> None:
        hits_list = self.query_one("#hits", OptionList)
        if error:
            self.hits = []
            error = printable(error)
            hits_list.set_options([Option(Text(error, style="bold red"), disabled=True)])
            self.notify(error, severity="error", markup=False)
            return
        assert result is not None
        self.hits = list(result.get("results") or [])
        if not self.hits:
            hits_list.set_options(
                [
                    Option(
                        Text(printable(f"no session matches {result.get('query')!r}"), style="dim"),
                        disabled=True,
                    )
                ]
            )
            return
        terms = query_terms(result.get("query"))
        self.search_terms = terms
        hits_list.set_options([Option(hit_text(h, terms), id=f"hit-{i}") for i, h in enumerate(self.hits)])
        hits_list.highlighted = 0
        hits_list.focus()

    @on(OptionList.OptionSelected, "#hits")
    def _hit_selected(self, event: OptionList.OptionSelected) -> None:
        hit = self.hits[event.option_index]
        self.app.open_session(hit["session_id"], anchor=hit.get("anchor_index"), terms=self.search_terms)

    def _close_hits(self) -> None:
        self._search_token += 1  # a search still running must not reopen the list
        self.hits = []
        hits_list = self.query_one("#hits", OptionList)
        hits_list.clear_options()
        hits_list.add_class("hidden")

    # -- table events and actions -------------------------------------------------
    @on(PagedTable.Edge)
    def _edge(self, event: PagedTable.Edge) -> None:
        if self.requested_offset != self.page_offset:
            return  # a page is on its way; a held arrow key must not skip pages
        if event.direction > 0 and self.page_offset + len(self.rows) < self.total:
            self.load(self.page_offset + PAGE_SIZE, cursor="first")
        elif event.direction < 0 and self.page_offset > 0:
            self.load(self.page_offset - PAGE_SIZE, cursor="last")

    @on(DataTable.RowSelected, "#sessions")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            self.app.open_session(str(event.row_key.value))

    @on(DataTable.HeaderSelected, "#sessions")
    def _header_selected(self, event: DataTable.HeaderSelected) -> None:
        key = COLUMN_SORTS.get(str(event.column_key.value))
        if key is None:
            self.notify("badges are not sortable", markup=False)
            return
        self.set_sort(key)

    def set_sort(self, key: str) -> None:
        """Sort by ``key``; choosing the current sort again reverses it. Text starts A→Z,
        dates and counts newest / largest first."""
        index = [k for k, _ in SORTS].index(key)
        if index == self.sort_index:
            self.descending = not self.descending
        else:
            self.sort_index = index
            self.descending = key not in ASCENDING_FIRST
        self.load(0, cursor="first")

    def current_id(self) -> str | None:
        table = self.query_one("#sessions", PagedTable)
        if not self.rows or table.cursor_row >= len(self.rows):
            return None
        return str(self.rows[table.cursor_row]["session_id"])

    def export_context(self) -> tuple[str | None, list[str]]:
        return self.current_id(), sorted(self.marked)

    def action_open(self) -> None:
        sid = self.current_id()
        if sid:
            self.app.open_session(sid)

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_focus_search(self) -> None:
        self.query_one("#search", Input).focus()

    def action_cycle_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self.descending = SORTS[self.sort_index][0] not in ASCENDING_FIRST
        self.load(0, cursor="first")

    def action_reverse(self) -> None:
        self.descending = not self.descending
        self.load(0, cursor="first")

    def action_page(self, direction: int) -> None:
        target = self.requested_offset + direction * PAGE_SIZE
        if 0 <= target < max(self.total, 1):
            self.load(target, cursor="first")

    def action_reload(self) -> None:
        self.load(self.page_offset, cursor="keep")

    def action_mark(self) -> None:
        sid = self.current_id()
        if sid is None:
            return
        self.marked.symmetric_difference_update({sid})
        table = self.query_one("#sessions", PagedTable)
        row = self.rows[table.cursor_row]
        table.update_cell(sid, "title", self._cells(row)[0])
        self._update_info()
        if table.cursor_row < len(self.rows) - 1:
            table.action_cursor_down()

    def action_delete(self) -> None:
        """Delete the session under the cursor, after a yes/no question (it cannot be undone)."""
        row = next((r for r in self.rows if r["session_id"] == self.current_id()), None)
        if row is None:
            return
        if self.app.service.readonly:
            self.notify(
                "this viewer reads another process's store (a hub runs): delete from the viewer "
                "that hosts the hub",
                severity="warning",
            )
            return
        sid = row["session_id"]
        turns = int(row.get("active_turns", 0)) + int(row.get("archived_turns", 0))

        def done(yes: bool | None) -> None:
            if yes:
                self._delete(sid)

        self.app.push_screen(
            ConfirmScreen(
                printable(f"Delete session {sid} ({row.get('title') or 'untitled'})?"),
                f"{turns} turns and {row.get('episodes', 0)} episodes are removed from the store and "
                "from the keyword and vector indexes. This cannot be undone (export it first: e).",
            ),
            done,
        )

    def action_annotate(self) -> None:
        """Tags and a note for the session under the cursor (a small dialog)."""
        row = next((r for r in self.rows if r["session_id"] == self.current_id()), None)
        if row is None:
            return

        def done(result: dict[str, Any] | None) -> None:
            if result is not None:
                self.notify(printable(f"saved tags and note of {row['session_id']}"), timeout=3)
                self.load(self.page_offset, cursor="keep")

        self.app.push_screen(
            AnnotateScreen(
                self.app.service,
                row["session_id"],
                f"session {row.get('title') or row['session_id']}",
                tags=row.get("tags"),
                note=row.get("note"),
            ),
            done,
        )

    @work(thread=True, exclusive=True, group="sessions-delete")
    def _delete(self, session_id: str) -> None:
        try:
            result = self.app.service.delete_session(session_id)
        except Exception as exc:
            self.post_message(Loaded("deleted", error=getattr(exc, "message", None) or str(exc)))
            return
        self.post_message(Loaded("deleted", result))

    def action_back(self) -> None:
        """Escape: close the hits, else clear the filter (one press each), and back to the table."""
        if self.hits or not self.query_one("#hits", OptionList).has_class("hidden"):
            self._close_hits()
        elif self.filter_text or self.query_one("#filter", Input).value:
            self.query_one("#filter", Input).value = ""
            if self._filter_timer is not None:
                self._filter_timer.stop()
            self._apply_filter("")
        self.query_one("#sessions", PagedTable).focus()
