"""A list of turns with episode headers and the compaction boundary.

Each turn is one option whose prompt is built from the stored text verbatim;
long content and tool calls are folded until the user presses Enter on the
turn. Headers and the boundary are disabled options, so the cursor skips them.

Textual's OptionList measures the height of every option whenever its line
cache resets (new options, a prompt replaced, a resize, a pane appearing), so a
session of thousands of turns froze the UI for a second or more. The list
therefore shows a window of at most ``WINDOW_TURNS`` turns, with a disabled
edge header saying how many turns lie beyond each cut; moving past an edge
loads the adjacent window. Everything addressed by turn index (``go_to``,
``toggle``, expanded state, episode navigation) covers the whole session.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text
from textual import on
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from memviewer.tui.formatting import turn_text


@dataclass(frozen=True)
class Row:
    """One line group of the list: a turn, or a header/boundary label."""

    kind: str  # "turn" | "episode" | "boundary" | "note" | "edge" (turns beyond the window)
    turn: dict[str, Any] | None = None
    label: Text | None = None
    episode_id: str | None = None


WINDOW_TURNS = 250  # turns rendered at once: measuring one folded turn costs ~0.2 ms, so ~50 ms a window
EDGE_KEEP = WINDOW_TURNS // 4  # turns of the old window still shown past the cursor after loading the next


def edge_text(count: int, earlier: bool) -> Text:
    """The disabled header at a cut edge of the window (plain text: never parsed as markup)."""
    if earlier:
        return Text(f"▲ {count:,} earlier turns · ↑ at the top loads more", style="dim italic")
    return Text(f"▼ {count:,} later turns · ↓ at the bottom loads more", style="dim italic")


class OneLine:
    """A label drawn on one line, cut with an ellipsis to the width it is drawn at.

    The cut happens when the option is rendered, at the width of that render, so it follows
    the pane (a resize, a scrollbar appearing) with no width read ahead of layout."""

    def __init__(self, text: Text) -> None:
        self.text = text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        line = self.text.copy()
        line.no_wrap = True
        line.truncate(max(1, options.max_width - 1), overflow="ellipsis")
        yield line


class TurnList(OptionList):
    """Turns of one side (archived or active) of a session, rendered a window at a time.

    ``rows`` are the rows shown (one per option, edge headers included); ``all_rows`` are
    every row of the side. The window is turn ordinals ``[_k0, _k1)`` = rows
    ``[_start, _stop)`` of ``all_rows``, preceded by one edge header when ``_k0 > 0``.
    """

    def __init__(self, *, id: str | None = None, window: int = WINDOW_TURNS) -> None:
        super().__init__(id=id)
        self.window = max(1, window)
        self.all_rows: list[Row] = []
        self.rows: list[Row] = []
        self.expanded: set[int] = set()
        self.anchor_index: int | None = None
        self.terms: tuple[str, ...] = ()  # search terms highlighted in every turn
        self._by_index: dict[int, dict[str, Any]] = {}
        self._turn_rows: list[int] = []  # all_rows position of each turn, in order
        self._ordinal: dict[int, int] = {}  # turn index -> its position in _turn_rows
        self._episode_rows: list[int] = []  # all_rows positions of episode headers
        self._k0 = self._k1 = self._start = self._stop = self._lead = 0
        self._first_option: int | None = None  # option index of the window's first / last turn
        self._last_option: int | None = None

    # -- content ----------------------------------------------------------------
    def show(self, rows: Sequence[Row], anchor: int | None = None) -> None:
        """Replace the content; the window opens around ``anchor`` (if it is one of these
        turns) or on the newest turns, with the window's first turn highlighted."""
        self.all_rows = list(rows)
        self.anchor_index = anchor
        self._turn_rows = [p for p, r in enumerate(self.all_rows) if r.turn is not None]
        self._by_index = {r.turn["index"]: r.turn for r in self.all_rows if r.turn is not None}
        self._ordinal = {idx: k for k, idx in enumerate(self._by_index)}
        self._episode_rows = [p for p, r in enumerate(self.all_rows) if r.kind == "episode"]
        k = self._ordinal.get(anchor) if anchor is not None else None
        self._render_window(len(self._turn_rows) - self.window if k is None else k - self.window // 2)
        self.highlighted = self._first_option

    @property
    def windowed(self) -> bool:
        """True when the side has more turns than one window holds."""
        return len(self._turn_rows) > self.window

    def _render_window(self, k0: int) -> None:
        """Show turns ``[k0, k0 + window)`` (clamped) and the rows between them; resets the
        highlight and the scroll position, like ``set_options``."""
        n = len(self._turn_rows)
        k0 = max(0, min(k0, n - self.window))
        k1 = min(n, k0 + self.window)
        start = 0 if k0 == 0 else self._turn_rows[k0 - 1] + 1
        stop = len(self.all_rows) if k1 == n else self._turn_rows[k1 - 1] + 1
        self._k0, self._k1, self._start, self._stop, self._lead = k0, k1, start, stop, int(k0 > 0)
        rows: list[Row] = []
        options: list[Option | None] = []
        if k0 > 0:
            label = edge_text(k0, earlier=True)
            rows.append(Row("edge", label=label))
            options.append(Option(label, id="edge-up", disabled=True))
        for pos in range(start, stop):
            row = self.all_rows[pos]
            rows.append(row)
            if row.turn is not None:
                options.append(Option(self._prompt(row.turn), id=f"t{row.turn['index']}"))
                options.append(None)  # a thin rule between turns
            else:
                options.append(Option(self._header(row), id=f"h{pos}", disabled=True))
        if k1 < n:
            label = edge_text(n - k1, earlier=False)
            rows.append(Row("edge", label=label))
            options.append(Option(label, id="edge-down", disabled=True))
        self.rows = rows
        turn_options = [i for i, r in enumerate(rows) if r.turn is not None]
        self._first_option = turn_options[0] if turn_options else None
        self._last_option = turn_options[-1] if turn_options else None
        self.set_options(options)

    def _header(self, row: Row) -> Text | OneLine:
        """Episode headers on one line, cut with an ellipsis to the pane (a split pane
        wrapped them over three rows); other labels as they are."""
        label = row.label or Text("")
        return OneLine(label) if row.kind == "episode" else label

    def _shown(self, index: int) -> bool:
        k = self._ordinal.get(index)
        return k is not None and self._k0 <= k < self._k1

    def _prompt(self, turn: dict[str, Any]) -> Text:
        idx = turn["index"]
        return turn_text(
            turn, expanded=idx in self.expanded, anchor=idx == self.anchor_index, terms=self.terms
        )

    # -- turns by index (the whole side, not only the window) ---------------------
    @property
    def turn_indexes(self) -> list[int]:
        return list(self._by_index)

    def has_turn(self, index: int) -> bool:
        return index in self._by_index

    def current_turn(self) -> dict[str, Any] | None:
        if self.highlighted is None or self.highlighted >= len(self.rows):
            return None
        return self.rows[self.highlighted].turn

    def toggle(self, index: int) -> None:
        turn = self._by_index.get(index)
        if turn is None:
            return
        self.expanded.symmetric_difference_update({index})
        if self._shown(index):
            self.replace_option_prompt(f"t{index}", self._prompt(turn))

    def set_terms(self, terms: tuple[str, ...]) -> None:
        """Highlight ``terms``; only the window's prompts are rebuilt."""
        if terms == self.terms:
            return
        self.terms = terms
        for pos in self._turn_rows[self._k0 : self._k1]:
            turn = self.all_rows[pos].turn
            assert turn is not None
            self.replace_option_prompt(f"t{turn['index']}", self._prompt(turn))

    def set_all_expanded(self, expanded: bool) -> None:
        """Every turn of the side is marked; only the window's prompts are rebuilt."""
        self.expanded = set(self._by_index) if expanded else set()
        for pos in self._turn_rows[self._k0 : self._k1]:
            turn = self.all_rows[pos].turn
            assert turn is not None
            self.replace_option_prompt(f"t{turn['index']}", self._prompt(turn))

    def go_to(self, index: int) -> bool:
        """Highlight turn ``index`` at the top of the list, re-windowing around it if needed."""
        k = self._ordinal.get(index)
        if k is None:
            return False
        if not self._k0 <= k < self._k1:
            self._render_window(k - self.window // 2)
        self.highlighted = self.get_option_index(f"t{index}")
        self.scroll_to_highlight(top=True)
        return True

    def episode_starts(self) -> list[int]:
        """Option positions of the episode headers in the window (see ``go_to_episode``)."""
        return [i for i, r in enumerate(self.rows) if r.kind == "episode"]

    def go_to_episode(self, direction: int) -> bool:
        """First turn of the next (``direction`` > 0) episode, or of the previous one; from
        inside an episode, ``-1`` goes to its own start. Crosses window edges."""
        here = self._row_position(self.highlighted)
        if direction > 0:
            i = bisect_right(self._episode_rows, here)
            header = self._episode_rows[i] if i < len(self._episode_rows) else None
        else:
            i = bisect_left(self._episode_rows, here - 1)
            header = self._episode_rows[i - 1] if i > 0 else None
        if header is None or header + 1 >= len(self.all_rows):
            return False
        turn = self.all_rows[header + 1].turn
        return turn is not None and self.go_to(turn["index"])

    def _row_position(self, option: int | None) -> int:
        """The ``all_rows`` position of option ``option`` (an edge header maps just outside)."""
        if option is None:
            return self._start
        return max(self._start - 1, min(self._start + option - self._lead, self._stop))

    def line_span(self, option: int) -> tuple[int, int]:
        """The content lines ``[top, bottom)`` option ``option`` occupies (OptionList keeps
        them privately; tests and scrolling ask here)."""
        top = self._index_to_line.get(option, 0)
        return top, top + self._heights.get(option, 1)

    # -- moving past the window's edges -------------------------------------------
    def _load_adjacent(self, direction: int) -> None:
        """Re-window so the highlighted turn keeps its place on screen, with the unseen turns
        on the ``direction`` side (-1 earlier, 1 later) loaded and ``EDGE_KEEP`` kept beyond."""
        turn = self.current_turn()
        if turn is None:
            return
        screen_row = self._index_to_line.get(self.highlighted or 0, 0) - round(self.scroll_y)
        k = self._ordinal[turn["index"]]
        keep = min(EDGE_KEEP, self.window // 2)
        self._render_window(k + keep + 1 - self.window if direction < 0 else k - keep)
        self.highlighted = self.get_option_index(f"t{turn['index']}")
        line = self._index_to_line.get(self.highlighted)
        if line is not None:
            self.scroll_to(y=max(0, line - screen_row), animate=False, immediate=True)

    def _at_top(self) -> bool:
        return self.highlighted is not None and self.highlighted <= (self._first_option or 0)

    def _at_bottom(self) -> bool:
        return self.highlighted is not None and self.highlighted >= (self._last_option or 0)

    def action_cursor_up(self) -> None:
        if self.windowed and self._at_top():
            if self._k0 == 0:  # the side's first turn: wrap round, as OptionList does
                self.action_last()
                return
            self._load_adjacent(-1)
        super().action_cursor_up()

    def action_cursor_down(self) -> None:
        if self.windowed and self._at_bottom():
            if self._k1 == len(self._turn_rows):
                self.action_first()
                return
            self._load_adjacent(1)
        super().action_cursor_down()

    def action_page_up(self) -> None:
        if self.windowed and self._at_top() and self._k0 > 0:
            self._load_adjacent(-1)
        super().action_page_up()  # type: ignore[no-untyped-call]  # untyped in Textual

    def action_page_down(self) -> None:
        if self.windowed and self._at_bottom() and self._k1 < len(self._turn_rows):
            self._load_adjacent(1)
        super().action_page_down()  # type: ignore[no-untyped-call]  # untyped in Textual

    def action_first(self) -> None:
        """The side's first turn (not only the window's)."""
        if self._k0 > 0:
            self._render_window(0)
        super().action_first()

    def action_last(self) -> None:
        """The side's last turn."""
        if self._k1 < len(self._turn_rows):
            self._render_window(len(self._turn_rows))
        super().action_last()

    @on(OptionList.OptionSelected)
    def _toggle_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        turn = self.rows[event.option_index].turn
        if turn is not None:
            self.toggle(turn["index"])
