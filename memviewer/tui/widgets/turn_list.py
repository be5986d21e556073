"""A list of turns with episode headers and the compaction boundary.

Each turn is one option whose prompt is built from the stored text verbatim;
long content and tool calls are folded until the user presses Enter on the
turn. Headers and the boundary are disabled options, so the cursor skips them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import on
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from memviewer.tui.formatting import turn_text


@dataclass(frozen=True)
class Row:
    """One line group of the list: a turn, or a header/boundary label."""

    kind: str  # "turn" | "episode" | "boundary" | "note"
    turn: dict[str, Any] | None = None
    label: Text | None = None
    episode_id: str | None = None


class TurnList(OptionList):
    """Turns of one side (archived or active) of a session."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: list[Row] = []
        self.expanded: set[int] = set()
        self.anchor_index: int | None = None
        self._by_index: dict[int, dict[str, Any]] = {}

    def show(self, rows: Sequence[Row], anchor: int | None = None) -> None:
        self.rows = list(rows)
        self.anchor_index = anchor
        self._by_index = {r.turn["index"]: r.turn for r in self.rows if r.turn is not None}
        options: list[Option | None] = []
        for n, row in enumerate(self.rows):
            if row.turn is not None:
                idx = row.turn["index"]
                options.append(Option(self._prompt(row.turn), id=f"t{idx}"))
                options.append(None)  # a thin rule between turns
            else:
                options.append(Option(row.label or Text(""), id=f"h{n}", disabled=True))
        self.set_options(options)
        first = next((i for i, r in enumerate(self.rows) if r.turn is not None), None)
        self.highlighted = first

    def _prompt(self, turn: dict[str, Any]) -> Text:
        idx = turn["index"]
        return turn_text(turn, expanded=idx in self.expanded, anchor=idx == self.anchor_index)

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
        self.replace_option_prompt(f"t{index}", self._prompt(turn))

    def set_all_expanded(self, expanded: bool) -> None:
        self.expanded = set(self._by_index) if expanded else set()
        for idx, turn in self._by_index.items():
            self.replace_option_prompt(f"t{idx}", self._prompt(turn))

    def go_to(self, index: int) -> bool:
        if index not in self._by_index:
            return False
        self.highlighted = self.get_option_index(f"t{index}")
        self.scroll_to_highlight(top=True)
        return True

    def episode_starts(self) -> list[int]:
        """Option positions of episode headers (for next/previous episode)."""
        return [i for i, r in enumerate(self.rows) if r.kind == "episode"]

    @on(OptionList.OptionSelected)
    def _toggle_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        turn = self.rows[event.option_index].turn
        if turn is not None:
            self.toggle(turn["index"])
