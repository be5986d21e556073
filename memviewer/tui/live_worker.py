"""The body of the app's long-lived ``live`` worker: hub events into the feed.

Kept apart from the app so the adaptation to ``memviewer.wire.subscriber``
(another area) lives in one place. The subscriber reconnects with backoff
and resumes from the last seq it delivered; the feed drops any seq it has
already seen as a second line of defence.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from memviewer.events import EventRecord

OnEvent = Callable[[EventRecord], object]
OnState = Callable[[str, str], object]


def describe_state(status: str, last_seq: int, detail: str = "") -> str:
    """What the Live screen prints next to the connection dot."""
    if status == "resumed":
        return f"from seq {last_seq}"  # shown as "● resumed from seq N"
    if status == "connected":
        return f"streaming events after seq {last_seq}"
    if status == "lagged":
        return f"hub dropped our queue; resuming from seq {last_seq}"
    return detail


async def follow_hub(
    socket_path: Path, from_seq: int, on_event: OnEvent, on_state: OnState, home: Path | None = None
) -> None:
    """Subscribe from ``from_seq`` until cancelled; states go to ``on_state(status, detail)``.

    ``home``: a hub serving another home is never followed (the state says why)."""
    from memviewer.wire.subscriber import ConnectionState, Subscriber

    on_state("connecting", str(socket_path))
    sub = Subscriber(socket_path, from_seq=from_seq, client="memviewer.tui", home=home)
    try:
        async for item in sub.stream(states=True):
            if isinstance(item, ConnectionState):
                on_state(item.status, describe_state(item.status, item.last_seq, item.detail))
            else:
                on_event(item)
    except Exception as exc:  # noqa: BLE001 - the screen shows why the stream stopped
        on_state("failed", f"{type(exc).__name__}: {exc}")
    finally:
        sub.close()
