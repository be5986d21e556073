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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memviewer.config import Settings
    from memviewer.service import MemoryService
    from memviewer.wire.hub import Hub

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

    def short_label(self) -> str:
        """The header's form where the full one does not fit: the role without the path."""
        return {
            "hosting": "hosting hub",
            "connected": "connected to hub",
            "off": "no hub (viewer only)",
        }.get(self.role, "hub not available")


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


def decide(socket_path: Path, mode: str, settings: Settings | None = None) -> HubStatus:
    """Pick the role before the service opens (a connected viewer opens read-only).

    With ``settings``, ``memviewer.wire.probe.serving_hub`` decides which hub serves the
    home: another home's hub (or another user's socket) makes the hub "unavailable"
    with its reason, never a hub the viewer connects to.
    """
    if mode not in MODES:
        raise ValueError(f"hub mode must be one of {MODES}, not {mode!r}")
    if mode == "off":
        return HubStatus("off", socket_path)
    if settings is not None and mode != "host":
        from memviewer.errors import MemviewerError
        from memviewer.wire.probe import probe_hub, serving_hub

        try:
            found = serving_hub(settings)
        except MemviewerError as exc:
            return HubStatus("unavailable", socket_path, exc.message)
        if found is not None:
            return HubStatus("connected", found, str(probe_hub(found) or "unknown"))
        if mode == "connect":
            return HubStatus("unavailable", socket_path, f"no hub answers on {socket_path}")
        return HubStatus("hosting", socket_path)
    answer, error = (None, "") if mode == "host" else probe(socket_path)
    if answer:
        return HubStatus("connected", socket_path, str(answer))
    if mode == "connect":
        return HubStatus("unavailable", socket_path, error or f"no hub answers on {socket_path}")
    return HubStatus("hosting", socket_path)


def sources_label(sources: list[dict[str, Any]], now: float | None = None, form: str = "full") -> str:
    """``praisonai ~/sessions: 12s ago · otlp 127.0.0.1:4318: waiting`` for the header:
    which sources the hub follows, whether each is connected and when it last delivered.
    ``form="short"`` names a folder by its last part and an address by its port, ``"kind"``
    only the kind: the state of each source stays in every form."""
    import time

    now = time.time() if now is None else now
    parts = []
    for src in sources:
        target = str(src.get("target", ""))
        home = str(Path.home())
        if target.startswith(home + "/"):
            target = "~" + target[len(home) :]
        if form == "short":
            target = (
                "…/" + Path(target).name
                if "/" in target.rstrip("/")
                else ":" + target.rsplit(":", 1)[-1]
                if ":" in target
                else target
            )
        elif form == "kind":
            target = ""
        if not src.get("connected"):
            state = "not connected"
        elif src.get("last_delivery"):
            age = max(0, int(now - float(src["last_delivery"])))
            state = (
                f"{age}s ago" if age < 120 else f"{age // 60}m ago" if age < 7200 else f"{age // 3600}h ago"
            )
        else:
            state = "nothing yet"
        parts.append(f"{src.get('kind', '?')}{' ' + target if target else ''}: {state}")
    return " · ".join(parts)


def header_forms(
    status: HubStatus, sources: list[dict[str, Any]], now: float | None = None
) -> tuple[str, tuple[str, ...]]:
    """The header's hub-and-sources line, then the same in fewer columns (shortest last):
    without the socket path, then with short folder names, then the source kinds alone."""
    label, short = status.label(), status.short_label()
    if not sources:
        return label, (short,)
    forms = tuple(f"{short} · {sources_label(sources, now, form)}" for form in ("full", "short", "kind"))
    tight = forms[-1].replace("nothing yet", "none yet").replace("not connected", "off")
    return f"{label} · {sources_label(sources, now)}", (*forms, tight)


def hub_sources(hosted: HostedHub | None, socket_path: Path) -> list[dict[str, Any]]:
    """The hub's sources: read in process when hosting, else from its ``stats`` (blocking)."""
    if hosted is not None and hosted.hub is not None:
        return [s.status() for s in hosted.hub.sources]
    try:
        from memviewer.wire.remote import RemoteService

        with RemoteService(socket_path) as remote:
            return list(remote.stats().get("hub", {}).get("sources", []))
    except Exception as exc:  # an old hub, a hub going away: no sources line
        log.debug("reading the hub's sources failed: %s", exc)
        return []


class HostedHub:
    """The in-process hub: started and closed on the app's event loop.

    Quitting the viewer stops this hub, which (like every hub) closes no episode:
    an agent that outlives the viewer spools and later replays into the same,
    still open, episode. ``close_report`` keeps what the hub's stop reported.
    """

    def __init__(self, service: MemoryService, socket_path: Path, *, start_indexer: bool = True) -> None:
        self.service = service
        self.socket_path = socket_path
        self.start_indexer = start_indexer
        self.hub: Hub | None = None
        self.close_report: dict[str, Any] = {}

    async def start(self) -> None:
        from memviewer.sources import build_sources
        from memviewer.wire.hub import Hub

        settings = self.service.settings
        try:
            sources = build_sources(settings)  # watch_praisonai / otlp settings
        except ValueError as exc:
            log.error("sources not started: %s", exc)
            sources = []
        self.hub = Hub(
            self.service,
            self.socket_path,
            start_indexer=self.start_indexer,
            sources=sources,
        )
        await self.hub.start()

    async def close(self) -> None:
        if self.hub is not None:
            hub, self.hub = self.hub, None
            try:
                self.close_report = await hub.close()
            except Exception:  # shutting down: log, never hang the exit
                log.exception("closing the hosted hub failed")
