"""Session: episodes and their turns, archived vs active (or both side by side),
the compaction boundary and its synthetic summary, bookends, folded tool calls."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from memviewer.present.snippets import text_or_tool_calls
from memviewer.tui.formatting import (
    annotation_badge,
    badges,
    boundary_text,
    episode_text,
    lineage_of,
    one_line,
    printable,
    scope_label,
    short_time,
    status_text,
)
from memviewer.tui.handoff import open_external, turn_plain
from memviewer.tui.messages import Loaded
from memviewer.tui.screens.annotate import AnnotateScreen
from memviewer.tui.screens.find import FindScreen
from memviewer.tui.screens.jump import JumpScreen
from memviewer.tui.widgets.footer import CoalescedFooter
from memviewer.tui.widgets.turn_list import Row, TurnList
from memviewer.words import plural

if TYPE_CHECKING:
    from memviewer.tui.viewer_app import ViewerApp

VIEWS = ("active", "archived", "both")
TITLE_WIDTH = 100  # the header shows the title on one line: a long one must not push the turns away
VIEW_LABELS = {"active": "active window", "archived": "archived (compacted out)", "both": "archived | active"}


def build_rows(
    turns: list[dict[str, Any]],
    episodes: list[dict[str, Any]],
    side: str,
    archived_count: int,
    first_active: int | None,
) -> list[Row]:
    """Turns of one side, an episode header whenever the episode changes, and the boundary."""
    numbers = {e["episode_id"]: n for n, e in enumerate(episodes, 1)}
    by_id = {e["episode_id"]: e for e in episodes}
    per_episode: dict[str | None, int] = {}
    for t in turns:
        per_episode[t.get("episode_id")] = per_episode.get(t.get("episode_id"), 0) + 1
    rows: list[Row] = []
    if side == "active" and archived_count:
        rows.append(Row("boundary", label=boundary_text(archived_count, first_active, side="active")))
    current: object = object()
    for turn in turns:
        if turn.get("is_compaction_summary"):
            rows.append(Row("turn", turn=turn))
            current = object()  # the next real turn re-opens its episode header
            continue
        eid = turn.get("episode_id")
        if eid != current:
            current = eid
            if eid in by_id:
                label = episode_text(by_id[eid], numbers[eid], per_episode[eid])
            else:
                label = Text("▌ imported history (no episode)", style="bold dim")
            rows.append(Row("episode", label=label, episode_id=eid))
        rows.append(Row("turn", turn=turn))
    if side == "archived" and archived_count:
        rows.append(Row("boundary", label=boundary_text(archived_count, first_active, side="archived")))
    if not turns:
        note = (
            "no archived turns: this session was never compacted" if side == "archived" else "no active turns"
        )
        rows.append(Row("note", label=Text(note, style="dim italic")))
    return rows


def side_rows(data: dict[str, Any]) -> tuple[list[Row], list[Row]]:
    """Rows of the archived and the active side. Built in the loader thread: 5,000 turns
    take ~40 ms, which would otherwise stall the UI when the session opens."""
    episodes, turns = data["episodes"], data["turns"]
    archived = [t for t in turns if t["archived"]]
    active = [t for t in turns if not t["archived"]]
    first_active = active[0]["index"] if active else None
    return (
        build_rows(archived, episodes, "archived", len(archived), first_active),
        build_rows(active, episodes, "active", len(archived), first_active),
    )


def bookends(turns: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]] | None:
    """Bookends: the first two and last two user/assistant messages (when > 2)."""
    talk = [t for t in turns if t["role"] in ("user", "assistant") and not t.get("is_compaction_summary")]
    if len(talk) <= 2:
        return None
    return {"opening": talk[:2], "closing": talk[-2:]}


class SessionScreen(Screen[None]):
    """One session; ``anchor`` (a turn index) is highlighted when opened from a search hit."""

    if TYPE_CHECKING:  # self.app is the viewer (its service, feed, open_session)
        app = getters.app(ViewerApp)

    TITLE = "Session"
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]
    AUTO_FOCUS = "#active-list"  # focus once: every focus change rebuilds the footer
    BINDINGS = [
        Binding("escape", "back", "Back"),  # clears an active find first (the header says so)
        Binding("v", "cycle_view", "Active/Archived/Both"),
        Binding("g", "jump", "Go to #"),
        Binding("slash", "find", "Find", key_display="/"),
        Binding("n", "next(1)", "Next match / episode", show=False),
        Binding("N", "next(-1)", "Previous match", key_display="N", show=False),
        Binding("p", "next(-1)", "Previous match / episode", show=False),
        Binding("x", "expand_all", "Expand all"),
        Binding("b", "bookends", "Bookends"),
        Binding("c", "copy_turn", "Copy turn"),
        Binding("C", "session_markdown('copy')", "Copy session (Markdown)", key_display="C"),
        Binding("o", "open_turn", "Turn in $PAGER", show=False),
        Binding("O", "session_markdown('pager')", "Session in $PAGER", key_display="O", show=False),
        Binding("E", "session_markdown('editor')", "Session in $EDITOR", key_display="E", show=False),
        Binding("ctrl+r", "reload", "Reload", show=False),
        Binding("w", "mark_expected", "Mark expected (why-not)", show=False),
        Binding("L", "context", "LLM call after the turn", key_display="L", show=False),
        Binding("t", "annotate_turn", "Tag / note the turn", show=False),
        Binding("T", "annotate_session", "Tag / note the session", key_display="T", show=False),
    ]

    def __init__(
        self,
        session_id: str,
        *,
        anchor: int | None = None,
        view: str | None = None,
        terms: tuple[str, ...] = (),
    ) -> None:
        super().__init__()
        self.terms = tuple(terms)  # search terms: highlighted, and n / N jump between matches
        self.session_id = session_id
        self.anchor_index = anchor
        self.view = view or "active"
        self.data: dict[str, Any] | None = None
        self._all_expanded = False
        self._return_to: int | None = None  # after a reload (a saved tag): back to this turn
        self._match_cache: tuple[tuple[Any, ...], list[int]] | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(Text("loading…", style="dim"), id="session-info")
        yield Static(id="bookends", classes="hidden")
        yield DataTable(id="episodes", cursor_type="row", zebra_stripes=True)
        with Horizontal(id="panes"):
            with Vertical(id="archived-pane", classes="pane"):
                yield Static(id="archived-title", classes="pane-title")
                yield TurnList(id="archived-list")
            with Vertical(id="active-pane", classes="pane"):
                yield Static(id="active-title", classes="pane-title")
                yield TurnList(id="active-list")
        yield CoalescedFooter()

    def on_mount(self) -> None:
        self._setup_episode_columns()
        self._apply_view()
        self._fetch()

    def _setup_episode_columns(self) -> None:
        """Below 100 columns the start time leaves the episodes table (each episode's header
        in the turn list carries it) and the rule takes what is left, so Turns stays."""
        table = self.query_one("#episodes", DataTable)
        self._episodes_width = width = self.app.size.width
        cols = [
            ("n", "#", 3),
            ("intent", "Intent", 12),
            ("rule", "Rule that fired", 30),
            ("conf", "Conf", 4),
            ("status", "Status", 9),
            ("reward", "Reward", 6),
            ("turns", "Turns", 5),
            ("started", "Started", 16),
        ]
        if width < 100:
            cols = [c for c in cols if c[0] != "started"]
            fixed = sum(w for k, _, w in cols if k != "rule") + 2 * table.cell_padding * len(cols) + 2
            cols = [(k, label, max(12, width - fixed) if k == "rule" else w) for k, label, w in cols]
        self._episode_keys = [k for k, _, _ in cols]
        table.clear(columns=True)
        for key, label, w in cols:
            table.add_column(label, key=key, width=w)

    def on_resize(self) -> None:
        if self.app.size.width != getattr(self, "_episodes_width", None):
            self._setup_episode_columns()
            if self.data is not None:
                self._fill_episodes(self.data["episodes"], self.data["turns"])

    @work(thread=True, exclusive=True, group="session-load")
    def _fetch(self) -> None:
        try:
            data = self.app.service.session(self.session_id)
            marks = data.get("annotations") or {}
            for turn in data["turns"]:  # the turn header shows its tags and note
                if turn["turn_id"] in marks:
                    turn["annotation"] = marks[turn["turn_id"]]
            rows = side_rows(data)
        except Exception as exc:
            self.post_message(Loaded("session", error=getattr(exc, "message", None) or str(exc)))
            return
        self.post_message(Loaded("session", (data, rows)))

    @on(Loaded)
    def _on_loaded(self, message: Loaded) -> None:
        if message.kind == "markdown":
            self._on_markdown(message)
            return
        if message.kind != "session":
            return
        if message.error:
            self._show_error(printable(message.error))
            return
        self.data, rows = message.data
        self._render_session(*rows)

    def _show_error(self, error: str) -> None:
        """The session is gone (or unreadable): drop what was shown, so no stale turns stay
        on screen and no later key (``v``, ``x``) redraws them over the error."""
        self.data = None
        self.query_one("#session-info", Static).update(
            Text(f"cannot open session: {error}", style="bold red")
        )
        for list_id in ("#archived-list", "#active-list"):
            self.query_one(list_id, TurnList).show([])
        for title_id in ("#archived-title", "#active-title"):
            self.query_one(title_id, Static).update("")
        table = self.query_one("#episodes", DataTable)
        table.clear()
        table.display = False
        self.query_one("#bookends", Static).update(
            Text("no bookends: the session could not be read", style="dim")
        )
        self.notify(error, severity="error", markup=False)

    # -- rendering --------------------------------------------------------------
    def _render_session(self, archived_rows: list[Row], active_rows: list[Row]) -> None:
        assert self.data is not None
        session, episodes, turns = self.data["session"], self.data["episodes"], self.data["turns"]
        archived = [t for t in turns if t["archived"]]
        active = [t for t in turns if not t["archived"]]
        self.query_one("#session-info", Static).update(self._info(session, len(archived), len(active)))
        self._fill_episodes(episodes, turns)
        anchor_turn = next((t for t in turns if t["index"] == self.anchor_index), None)
        if anchor_turn is not None and anchor_turn["archived"] and self.view == "active":
            self.view = "both"
            self._apply_view()
        arch_list = self.query_one("#archived-list", TurnList)
        act_list = self.query_one("#active-list", TurnList)
        arch_list.terms = act_list.terms = self.terms
        arch_list.show(archived_rows, self.anchor_index)  # each list renders one window of turns
        act_list.show(active_rows, self.anchor_index)
        self.query_one("#archived-title", Static).update(
            Text(
                f" ARCHIVED · {len(archived)} turns compacted out of the active window", style="bold magenta"
            )
        )
        summary = next((t for t in active if t.get("is_compaction_summary")), None)
        title = Text(f" ACTIVE · {len(active)} turns", style="bold green")
        if summary is not None:
            title.append(
                f" (incl. 1 synthetic summary for {summary['replaced_count']} archived)", style="yellow"
            )
        self.query_one("#active-title", Static).update(title)
        self._fill_bookends(turns)
        back, self._return_to = self._return_to, None
        if back is not None:
            self.go_to(back)
        elif self.anchor_index is not None:
            self.go_to(self.anchor_index)
        else:
            self._focus_visible()

    def _info(self, s: dict[str, Any], n_archived: int, n_active: int) -> Text:
        out = Text()
        width = max(20, min(TITLE_WIDTH, self.app.size.width - 45))  # badges and view label follow
        out.append(one_line(s.get("title") or "(untitled)", width), style="bold")
        tags = badges({**s, "archived_turns": n_archived})
        if tags:
            out.append("  ")
            out.append_text(tags)
        mark = annotation_badge((self.data or {}).get("annotations", {}).get(s["session_id"]), note_width=30)
        if mark:
            out.append("  ")
            out.append_text(mark)
        out.append(f"   view: {VIEW_LABELS[self.view]}", style="bold cyan")
        if self.terms:
            out.append(printable(f"   {self.find_status()}"), style="bold yellow")
        out.append("\n")
        out.append(f"{printable(s['session_id'])} ", style="blue")
        out.append(f"  agent {one_line(s.get('agent') or '-', 40)}  scope {scope_label(s)}  ")
        out.append_text(status_text(s.get("status")))
        out.append(
            f"   {short_time(s.get('started_at'))} → {short_time(s.get('last_seen_at'))} UTC", style="dim"
        )
        out.append("\n")
        out.append(
            f"{s.get('episodes', 0)} episodes · {n_active} active · {n_archived} archived turns"
            f" · retention {s.get('retention')} (window {s.get('active_window')})"
        )
        if s.get("source"):
            out.append(f" · source {printable(s['source'])}", style="yellow")
        lineage = lineage_of(s)
        if lineage:
            out.append(f" · lineage {printable(lineage)}", style="blue")
        if s.get("parent_session_id"):
            out.append(f" · parent {printable(s['parent_session_id'])}", style="dim")
        return out

    def _fill_episodes(self, episodes: list[dict[str, Any]], turns: list[dict[str, Any]]) -> None:
        table = self.query_one("#episodes", DataTable)
        table.clear()
        counts: dict[str, int] = {}
        for t in turns:
            if t.get("episode_id"):
                counts[t["episode_id"]] = counts.get(t["episode_id"], 0) + 1
        for n, e in enumerate(episodes, 1):
            intent = e.get("intent") or {}
            status = e.get("closed_by") or e.get("status") or ""
            reward = "" if e.get("r_task") is None else f"{float(e['r_task']):.2f}"
            cells = {
                "n": Text(str(n)),
                "intent": Text(printable(intent.get("kind", "")), style="cyan"),
                "rule": Text(printable(intent.get("rule_id", "")), overflow="ellipsis"),
                "conf": Text(f"{float(intent.get('confidence') or 0):.2f}"),
                "status": status_text(status),
                "reward": Text(reward, justify="right"),
                "turns": Text(str(counts.get(e["episode_id"], 0)), justify="right"),
                "started": Text(short_time(e.get("started_at"))),
            }
            table.add_row(*(cells[k] for k in self._episode_keys), key=e["episode_id"])
        table.display = bool(episodes)

    def _fill_bookends(self, turns: list[dict[str, Any]]) -> None:
        ends = bookends(turns)
        out = Text()
        if ends is None:
            out.append("no bookends: the session has 2 or fewer user/assistant messages", style="dim")
        else:
            for label, group in (("opening", ends["opening"]), ("closing", ends["closing"])):
                out.append(f"{label:<8}", style="bold")
                for i, t in enumerate(group):
                    if i:
                        out.append("\n        ")
                    out.append(f"#{t['index']} {printable(t['role'])}: ", style="cyan")
                    out.append(one_line(text_or_tool_calls(t.get("content"), t.get("tool_calls")), 100))
                out.append("\n")
            out.rstrip()
        self.query_one("#bookends", Static).update(out)

    # -- views and navigation -------------------------------------------------------
    def _apply_view(self) -> None:
        self.query_one("#archived-pane").display = self.view in ("archived", "both")
        self.query_one("#active-pane").display = self.view in ("active", "both")
        self.query_one("#panes").set_class(self.view == "both", "side-by-side")
        self._refresh_info()

    def _focus_visible(self) -> None:
        target = self.query_one(
            "#active-list" if self.view in ("active", "both") else "#archived-list", TurnList
        )
        if self.focused is not target:
            target.focus()

    def _focused_list(self) -> TurnList:
        focused = self.focused
        if isinstance(focused, TurnList):
            return focused
        return self.query_one("#active-list" if self.view != "archived" else "#archived-list", TurnList)

    def set_view(self, view: str) -> None:
        self.view = view
        self._apply_view()
        self._focus_visible()

    def action_cycle_view(self) -> None:
        self.set_view(VIEWS[(VIEWS.index(self.view) + 1) % len(VIEWS)])

    def go_to(self, index: int) -> bool:
        arch = self.query_one("#archived-list", TurnList)
        act = self.query_one("#active-list", TurnList)
        target = arch if arch.has_turn(index) else act if act.has_turn(index) else None
        if target is None:
            self.notify(f"no turn #{index} in this session", severity="warning", markup=False)
            return False
        if target is arch and self.view == "active":
            self.set_view("both")
        elif target is act and self.view == "archived":
            self.set_view("both")
        target.go_to(index)
        target.focus()
        return True

    def action_jump(self) -> None:
        if not self.data or not self.data["turns"]:
            return
        indexes = [t["index"] for t in self.data["turns"]]

        def done(value: int | None) -> None:
            if value is not None:
                self.go_to(value)

        self.app.push_screen(JumpScreen(min(indexes), max(indexes)), done)

    # -- find: highlighted matches, n / p (and N), escape clears ------------------------
    def matches(self) -> list[int]:
        """Indexes of the turns (both sides, in order) whose text matches the search terms
        (kept until the terms or the loaded turns change: the header asks on every move)."""
        from memviewer.present.highlight import match_spans

        if not self.terms or not self.data:
            return []
        key = (self.terms, id(self.data["turns"]), len(self.data["turns"]))
        if self._match_cache is None or self._match_cache[0] != key:
            found = [
                t["index"]
                for t in self.data["turns"]
                if match_spans(text_or_tool_calls(t.get("content"), t.get("tool_calls")), self.terms)
            ]
            self._match_cache = (key, found)
        return self._match_cache[1]

    def find_status(self) -> str:
        """``find 'refund': match 3 of 7``, where the cursor is among the matches (``7
        matches`` when it is on another turn); the keys that move and clear follow."""
        found = self.matches()
        head = f"find {' '.join(self.terms)!r}: "
        if not found:
            return head + "no match (escape clears)"
        turn = self.current_turn
        here = turn["index"] if turn else None
        count = plural(len(found), "match", "matches")
        where = f"match {found.index(here) + 1} of {len(found)}" if here in found else count
        return head + where + " (n/p move, escape clears)"

    def _refresh_info(self) -> None:
        if self.data is not None:
            turns = self.data["turns"]
            n_arch = sum(1 for t in turns if t["archived"])
            self.query_one("#session-info", Static).update(
                self._info(self.data["session"], n_arch, len(turns) - n_arch)
            )

    def action_back(self) -> None:
        """Escape: clear an active find first (n / p are episode jumps again), else go back."""
        if self.terms:
            self.set_terms(())
            self.notify("find cleared: n / p jump between episodes", markup=False)
        else:
            self.app.pop_screen()

    def set_terms(self, terms: tuple[str, ...]) -> None:
        self.terms = terms
        for lst in self.query(TurnList):
            lst.set_terms(terms)
        self._refresh_info()  # the header says which match of how many

    def action_find(self) -> None:
        from memviewer.present.highlight import query_terms

        def done(value: str | None) -> None:
            if value is None:
                return
            self.set_terms(query_terms(value))
            if self.terms:
                found = self.matches()
                if not found:
                    self.notify(printable(f"no turn matches {value!r}"), severity="warning")
                elif (self.current_turn or {}).get("index") not in found:
                    self.action_next(1)  # the first match after the cursor; on one, stay

        self.app.push_screen(FindScreen(" ".join(self.terms)), done)

    def action_next(self, direction: int) -> None:
        """With a find active: the next (``n``) / previous (``p``, ``N``) matching turn,
        wrapping; without one, ``n`` / ``p`` are the next / previous episode."""
        if not self.terms:
            self.action_episode(1 if direction > 0 else -1)
            return
        found = self.matches()
        if not found:
            self.notify("no matching turn in this session", severity="warning")
            return
        turn = self.current_turn
        here = turn["index"] if turn else (found[0] - 1 if direction > 0 else found[-1] + 1)
        later = [i for i in found if (i > here if direction > 0 else i < here)]
        target = (
            (later[0] if direction > 0 else later[-1])
            if later
            else (found[0] if direction > 0 else found[-1])
        )
        self.go_to(target)

    def action_episode(self, direction: int) -> None:
        self._focused_list().go_to_episode(direction)  # reaches episodes outside the shown window

    def action_expand_all(self) -> None:
        self._all_expanded = not self._all_expanded
        for lst in self.query(TurnList):
            lst.set_all_expanded(self._all_expanded)

    def action_bookends(self) -> None:
        self.query_one("#bookends", Static).toggle_class("hidden")

    def action_reload(self) -> None:
        self._fetch()

    # -- handing text out: clipboard (OSC 52), $PAGER, $EDITOR ------------------------
    def action_copy_turn(self) -> None:
        turn = self.current_turn
        if turn is None:
            return
        self.app.copy_to_clipboard(turn_plain(turn, self.session_id))
        self.notify(f"turn #{turn['index']} copied to the clipboard", timeout=3)

    def action_open_turn(self) -> None:
        turn = self.current_turn
        if turn is not None:
            self._show_external(turn_plain(turn, self.session_id), "pager", ".txt")

    def action_session_markdown(self, purpose: str) -> None:
        self._markdown(purpose)

    @work(thread=True, exclusive=True, group="session-markdown")
    def _markdown(self, purpose: str) -> None:
        """The session through the Markdown exporter (the same text as ``export --format md``)."""
        import io

        buf = io.StringIO()
        try:
            self.app.service.export([self.session_id], "md", buf)
        except Exception as exc:
            self.post_message(Loaded("markdown", error=getattr(exc, "message", None) or str(exc)))
            return
        self.post_message(Loaded("markdown", (purpose, buf.getvalue())))

    def _on_markdown(self, message: Loaded) -> None:
        if message.error:
            self.notify(printable(f"cannot render the session: {message.error}"), severity="error")
            return
        purpose, text = message.data
        if purpose == "copy":
            self.app.copy_to_clipboard(text)
            self.notify(f"session copied to the clipboard as Markdown ({len(text):,} characters)", timeout=3)
        else:
            self._show_external(text, purpose, ".md")

    def _show_external(self, text: str, kind: str, suffix: str) -> None:
        error = open_external(self.app, text, kind, suffix)
        if error:
            self.notify(printable(error), severity="warning")

    @on(TurnList.OptionHighlighted)
    def _turn_highlighted(self, event: TurnList.OptionHighlighted) -> None:
        """The episode table follows the turn cursor (n / p / g / arrows / search hits)."""
        if not isinstance(event.option_list, TurnList):
            return
        if self.terms:
            self._refresh_info()  # "match K of N" follows the cursor
        turn = event.option_list.current_turn()
        eid = (turn or {}).get("episode_id")
        table = self.query_one("#episodes", DataTable)
        if not eid or not table.row_count:
            return
        try:
            row = table.get_row_index(eid)
        except Exception:  # an episode the table does not list (imported history)
            return
        if table.cursor_row != row:
            table.move_cursor(row=row, animate=False)

    @on(DataTable.RowSelected, "#episodes")
    def _episode_selected(self, event: DataTable.RowSelected) -> None:
        if self.data is None:
            return
        eid = event.row_key.value
        first = next((t for t in self.data["turns"] if t.get("episode_id") == eid), None)
        if first is not None:
            self.go_to(first["index"])

    def export_context(self) -> tuple[str | None, list[str]]:
        return self.session_id, []

    @property
    def current_turn(self) -> dict[str, Any] | None:
        return self._focused_list().current_turn()

    # -- tags and notes -------------------------------------------------------------------
    def action_annotate_turn(self) -> None:
        turn = self.current_turn
        if turn is not None:
            self._annotate(turn["turn_id"], f"turn #{turn['index']} ({turn['role']})", turn["index"])

    def action_annotate_session(self) -> None:
        if self.data is not None:
            title = self.data["session"].get("title") or self.session_id
            self._annotate(self.session_id, f"session {title}", None)

    def _annotate(self, target_id: str, label: str, index: int | None) -> None:
        mark = ((self.data or {}).get("annotations") or {}).get(target_id) or {}

        def done(result: dict[str, Any] | None) -> None:
            if result is None:
                return
            self.notify(printable(f"saved tags and note of {label}"), timeout=3)
            self._return_to = index
            self._fetch()

        self.app.push_screen(
            AnnotateScreen(self.app.service, target_id, label, mark.get("tags"), mark.get("note")),
            done,
        )

    def action_context(self) -> None:
        """The Context screen of the first LLM call sent after the highlighted turn."""
        turn = self.current_turn
        if turn is not None:
            self._open_context(turn["index"])

    @work(thread=True, exclusive=True, group="session-context")
    def _open_context(self, index: int) -> None:
        from memviewer.tui.screens.context import ContextScreen

        try:
            calls = self.app.service.llm_calls(session_id=self.session_id, limit=10_000)["calls"]
        except Exception as exc:
            message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            self.app.call_from_thread(self.notify, printable(message), severity="error")
            return
        call = next(
            (c for c in calls if c.get("after_index") is not None and c["after_index"] >= index), None
        )
        if call is None:
            self.app.call_from_thread(self.notify, "no LLM call recorded after this turn", severity="warning")
            return
        self.app.call_from_thread(self.app.push_screen, ContextScreen(call["call_id"]))

    def action_mark_expected(self) -> None:
        """Mark the highlighted turn "expected": the Recall screen shows where it falls out."""
        from memviewer.tui.expected import toggle_expected

        turn = self.current_turn
        if turn is None:
            return
        marked = toggle_expected(self.app, turn)
        note = (
            f"turn #{turn['index']} marked expected: the Recall screen (3) shows where it falls out"
            if marked
            else f"turn #{turn['index']} is no longer expected"
        )
        self.notify(note, markup=False)
