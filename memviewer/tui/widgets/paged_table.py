"""A ``DataTable`` that holds one page of a larger result and asks for neighbours.

The store may hold 100k sessions; the table only ever holds one page. When the
cursor is pushed past the last (or first) row it posts ``Edge`` and the screen
loads the next (or previous) page, so scrolling feels continuous while memory
stays bounded by the page size.
"""

from __future__ import annotations

from typing import Any

from textual.message import Message
from textual.widgets import DataTable


class PagedTable(DataTable[Any]):
    class Edge(Message):
        """The cursor tried to leave the page: ``direction`` is +1 (down) or -1 (up)."""

        def __init__(self, direction: int) -> None:
            super().__init__()
            self.direction = direction

    def action_cursor_down(self) -> None:
        if self.row_count and self.cursor_row >= self.row_count - 1:
            self.post_message(self.Edge(+1))
            return
        super().action_cursor_down()

    def action_cursor_up(self) -> None:
        if self.cursor_row <= 0:
            self.post_message(self.Edge(-1))
            return
        super().action_cursor_up()
