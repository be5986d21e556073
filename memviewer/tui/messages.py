"""Messages that carry worker results back to the UI thread/loop.

Thread workers never touch widgets: they post one of these and the screen
applies it in its own handler.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from memviewer.service import MemoryService


class HubChanged(Message):
    """The hub role or its socket state changed (header subtitle follows)."""

    def __init__(self, label: str, shorter: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.label = label
        self.shorter = shorter  # the same said shorter, for a narrow header (shortest last)


class HubGone(Message):
    """The hub this viewer was connected to stopped answering. ``service`` is a writable
    service to host on (None when this viewer cannot host; ``detail`` says why)."""

    def __init__(self, service: MemoryService | None, detail: str = "") -> None:
        super().__init__()
        self.service = service
        self.detail = detail


class LiveState(Message):
    """Subscriber connection state: connecting, connected, reconnecting, resumed, failed."""

    def __init__(self, state: str, detail: str = "") -> None:
        super().__init__()
        self.state = state
        self.detail = detail


class Loaded(Message):
    """A thread worker's result (``kind`` says which) or its error message."""

    def __init__(self, kind: str, data: Any = None, error: str | None = None, token: int = 0) -> None:
        super().__init__()
        self.kind = kind
        self.data = data
        self.error = error
        self.token = token


class Progress(Message):
    def __init__(self, done: int, total: int, item: str = "") -> None:
        super().__init__()
        self.done = done
        self.total = total
        self.item = item


class IndexLag(Message):
    """How far the vector index is behind the store (``index.progress.index_lag`` plus
    ``embedding``: whether a hub or background indexer is at it); None when unknown."""

    def __init__(self, lag: dict[str, Any] | None) -> None:
        super().__init__()
        self.lag = lag
