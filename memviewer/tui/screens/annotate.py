"""The tags-and-note dialog for a session or a turn (``t`` on the Sessions and Session
screens, ``T`` for the whole session there).

It saves through the typed ``LocalService`` (``MemoryService.tag`` / ``note``) in a
thread worker, shows a refused value (a tag with a space, an unknown id) in the dialog
without closing it, and is dismissed with the target's annotations after the save
(None when cancelled).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static, TextArea

from memviewer.api import LocalService
from memviewer.tui.formatting import printable
from memviewer.tui.messages import Loaded


def parse_tags(text: str) -> list[str]:
    """Tags as typed: separated by commas or spaces, ``#`` prefixes dropped."""
    return [t.lstrip("#") for t in text.replace(",", " ").split() if t.lstrip("#")]


class AnnotateScreen(ModalScreen[dict[str, Any] | None]):
    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "save", "Save"),
    ]

    def __init__(
        self,
        writer: LocalService,
        target_id: str,
        label: str,
        tags: list[str] | None = None,
        note: str | None = None,
    ) -> None:
        super().__init__()
        self.writer = writer
        self.target_id = target_id
        self.label = label
        self.tags = list(tags or [])
        self.note = note

    def compose(self) -> ComposeResult:
        with Vertical(id="annotate-box"):
            yield Static(Text(printable(f"Tags and note · {self.label}"), style="bold"))
            yield Label("tags (commas or spaces; lower case, no spaces inside one)")
            yield Input(" ".join(self.tags), placeholder="bug needs-review", id="annotate-tags", compact=True)
            yield Label("note (empty: none)")
            yield TextArea(self.note or "", id="annotate-note", soft_wrap=True, show_line_numbers=False)
            yield Static("", id="annotate-error")
            with Horizontal(id="annotate-buttons"):
                yield Button("Save (ctrl+s)", id="annotate-save", variant="primary")
                yield Button("Cancel (esc)", id="annotate-cancel")

    def on_mount(self) -> None:
        self.query_one("#annotate-tags", Input).focus()

    @on(Input.Submitted, "#annotate-tags")
    def _tags_submitted(self) -> None:
        self.query_one("#annotate-note", TextArea).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "annotate-save":
            self.action_save()
        else:
            self.action_cancel()

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_save(self) -> None:
        tags = parse_tags(self.query_one("#annotate-tags", Input).value)
        note = self.query_one("#annotate-note", TextArea).text.strip() or None
        self.query_one("#annotate-error", Static).update(Text("saving…", style="dim"))
        self._save(tags, note)

    @work(thread=True, exclusive=True, group="annotate-save")
    def _save(self, tags: list[str], note: str | None) -> None:
        from memviewer.session.annotations import check_note, check_tag

        try:
            for t in tags:  # every value checked before anything is written
                check_tag(t)
            if note is not None:
                check_note(note)
            wanted = {t.strip().lower() for t in tags}
            gone = [t for t in self.tags if t not in wanted]
            result: dict[str, Any] | None = None
            if tags:
                result = self.writer.tag(self.target_id, tags)
            if gone:
                result = self.writer.tag(self.target_id, gone, remove=True)
            if note != self.note:
                result = self.writer.note(self.target_id, note)
            if result is None:  # nothing changed: what is stored now
                found = self.writer.annotations(self.target_id)
                result = found[0] if found else {"target_id": self.target_id, "tags": [], "note": None}
        except Exception as exc:  # a refused tag or note stays in the dialog, to be fixed
            self.post_message(Loaded("annotate", error=getattr(exc, "message", None) or str(exc)))
            return
        self.post_message(Loaded("annotate", result))

    @on(Loaded)
    def _saved(self, message: Loaded) -> None:
        if message.kind != "annotate":
            return
        message.stop()
        if message.error:
            self.query_one("#annotate-error", Static).update(Text(printable(message.error), style="bold red"))
            return
        self.dismiss(message.data)
