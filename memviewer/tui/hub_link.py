"""Whether the viewer connects to a running hub or hosts one itself.

The embedded default: ``memviewer`` alone must work, so when no hub
answers on the socket the viewer runs one inside its own event loop, on the
app's writable ``MemoryService``, and agents can publish to it. When a hub
does answer, that hub owns the store and the viewer opens it read-only.
The wire modules are imported lazily: they are someone else's area and the
viewer must still open (with a clear reason) when they are missing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("memviewer.tui")

MODES = ("auto", "host", "connect", "off")


@dataclass
class HubStatus:
    role: str  # "hosting" | "connected" | "off" | "unavailable"
    socket: Path
    detail: str = ""

    def label(self) -> str:
        if self.role == "hosting":
            return f"hosting hub on {self.socket}"
        if self.role == "connected":
            extra = f" ({self.detail})" if self.detail else ""
            return f"connected to hub {self.socket}{extra}"
        if self.role == "off":
            return "no hub (viewer only)"
        return f"hub not available: {self.detail}"


def probe(socket_path: Path) -> tuple[str | None, str]:
    """``(answer, error)``: the hub's identity when one answers on the socket."""
    try:
        from memviewer.wire.probe import probe_hub
    except ImportError as exc:
        return None, f"memviewer.wire.probe missing ({exc})"
    try:
        return probe_hub(socket_path), ""
    except Exception as exc:  # a broken socket file must not stop the viewer
        return None, str(exc)


def decide(socket_path: Path, mode: str) -> HubStatus:
    """Pick the role before the service opens (a connected viewer opens read-only)."""
    if mode not in MODES:
        raise ValueError(f"hub mode must be one of {MODES}, not {mode!r}")
    if mode == "off":
        return HubStatus("off", socket_path)
    answer, error = (None, "") if mode == "host" else probe(socket_path)
    if answer:
        return HubStatus("connected", socket_path, str(answer))
    if mode == "connect":
        return HubStatus("unavailable", socket_path, error or f"no hub answers on {socket_path}")
    return HubStatus("hosting", socket_path)


class HostedHub:
    """The in-process hub: started and closed on the app's event loop.

    Quitting the viewer stops this hub without abandoning open episodes
    (``abandon_on_stop=False``): an agent that outlives the viewer spools and
    later replays into the same, still open, episode instead of getting
    ``conflict``. ``close_report`` keeps what the hub's stop reported.
    """

    def __init__(self, service: Any, socket_path: Path, *, start_indexer: bool = True) -> None:
        self.service = service
        self.socket_path = socket_path
        self.start_indexer = start_indexer
        self.hub: Any = None
        self.close_report: dict[str, Any] = {}

    async def start(self) -> None:
        from memviewer.wire.hub import Hub

        settings = self.service.settings
        self.hub = Hub(
            self.service,
            self.socket_path,
            frame_limit=getattr(settings, "frame_limit", 1_048_576),
            subscriber_queue=getattr(settings, "subscriber_queue", 10_000),
            start_indexer=self.start_indexer,
            abandon_on_stop=False,
        )
        await self.hub.start()

    async def close(self) -> None:
        if self.hub is not None:
            hub, self.hub = self.hub, None
            try:
                self.close_report = await hub.close()
            except Exception:  # shutting down: log, never hang the exit
                log.exception("closing the hosted hub failed")
