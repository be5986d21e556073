"""A one-line modal that asks for a turn index."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class JumpScreen(ModalScreen[int | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, low: int, high: int) -> None:
        super().__init__()
        self.low, self.high = low, high

    def compose(self) -> ComposeResult:
        with Vertical(id="jump-box"):
            yield Label(f"Jump to turn index ({self.low}–{self.high}), Enter")
            yield Input(placeholder="index", type="integer", id="jump-index")
            yield Label("", id="jump-error")

    @on(Input.Submitted)
    def _submit(self, event: Input.Submitted) -> None:
        try:
            value = int(event.value)
        except ValueError:
            self.query_one("#jump-error", Label).update("type a whole number")
            return
        if not self.low <= value <= self.high:
            self.query_one("#jump-error", Label).update(
                f"no turn #{value}: this session has {self.low}–{self.high}"
            )
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)
