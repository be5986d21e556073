"""The in-process bus: ordering, catch-all listeners, isolation, removal."""

from __future__ import annotations

import logging

from memviewer.events import EventRecord
from memviewer.session.bus import EventBus


def ev(seq: int, kind: str = "episode.turn_added") -> EventRecord:
    return EventRecord(seq=seq, kind=kind, ts=0.0, session_id="s", episode_id="e")


def test_delivery_is_synchronous_and_ordered():
    bus = EventBus()
    got: list[tuple[str, int]] = []
    bus.on("episode.turn_added", lambda e: got.append(("kind", e.seq)))
    bus.on_any(lambda e: got.append(("any", e.seq)))
    bus.emit_all([ev(1), ev(2, "session.closed"), ev(3)])
    assert got == [("kind", 1), ("any", 1), ("any", 2), ("kind", 3), ("any", 3)]


def test_a_raising_listener_is_logged_and_isolated(caplog):
    bus = EventBus()
    got = []

    def bad(_e: EventRecord) -> None:
        raise ValueError("listener bug")

    bus.on_any(bad)
    bus.on_any(lambda e: got.append(e.seq))
    with caplog.at_level(logging.ERROR, logger="memviewer.session"):
        bus.emit_all([ev(1), ev(2)])
    assert got == [1, 2]
    assert "listener bug" in caplog.text


def test_listener_removal_and_counts():
    bus = EventBus()
    got = []
    off = bus.on("session.closed", got.append)
    off_any = bus.on_any(got.append)
    assert bus.listener_count("session.closed") == 2
    off()
    off_any()
    bus.emit(ev(1, "session.closed"))
    assert got == [] and bus.listener_count() == 0
