"""In-process event bus: synchronous, ordered, listener failures isolated."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable

from memviewer.events import EventRecord

log = logging.getLogger("memviewer.session")

Listener = Callable[[EventRecord], None]


class EventBus:
    def __init__(self) -> None:
        self._by_kind: dict[str, list[Listener]] = defaultdict(list)
        self._any: list[Listener] = []

    def on(self, kind: str, listener: Listener) -> Callable[[], None]:
        """Listen to one kind; returns a function that removes the listener."""
        self._by_kind[kind].append(listener)
        return lambda: self._remove(self._by_kind[kind], listener)

    def on_any(self, listener: Listener) -> Callable[[], None]:
        self._any.append(listener)
        return lambda: self._remove(self._any, listener)

    @staticmethod
    def _remove(listeners: list[Listener], listener: Listener) -> None:
        if listener in listeners:
            listeners.remove(listener)

    def listener_count(self, kind: str | None = None) -> int:
        if kind is None:
            return len(self._any) + sum(len(v) for v in self._by_kind.values())
        return len(self._by_kind.get(kind, ())) + len(self._any)

    def emit(self, event: EventRecord) -> None:
        """Deliver to kind listeners, then catch-all listeners, in registration order."""
        for listener in [*self._by_kind.get(event.kind, ()), *self._any]:
            try:
                listener(event)
            except Exception:
                log.exception("listener %r failed on %s #%d", listener, event.kind, event.seq)

    def emit_all(self, events: list[EventRecord]) -> None:
        for ev in events:
            self.emit(ev)
