"""What the hub asks of a source: the one shape every feed it follows by itself has.

The hub (``wire.hub.Hub``) starts each source after its socket answers, stops each before
its writer queue drains, and lists each one's ``status()`` in ``stats`` (``hub.sources``:
the start line of ``memviewer hub``, the viewer's header, ``memviewer doctor``). The
PraisonAI folder watcher and the OTLP/HTTP receiver satisfy it structurally (no base
class: mypy checks ``build_sources``'s list against it). A new source implements these
four and is made by ``build_sources``.
"""

from __future__ import annotations

from typing import Any, Protocol


class Source(Protocol):
    """A feed the hub runs in its own process and event loop."""

    #: What it follows, for ``status()["kind"]`` and the hub's logs: "praisonai" | "otlp".
    kind: str

    async def start(self, hub: Any) -> None:
        """Begin following, on the hub's event loop. ``hub`` is the ``wire.hub.Hub`` (not
        named here: the hub's own annotation names this protocol, and a type-only import
        back would close a circle); a source writes only through its ``submit`` / ``write``.
        Raising is reported and the hub serves without this source."""
        ...

    async def stop(self) -> None:
        """Stop following; no write is handed to the hub after this returns."""
        ...

    def status(self) -> dict[str, Any]:
        """``SourceStatus.to_dict()`` (``sources.status``) plus the source's own keys
        (the watcher's ``state``, ``stuck_reads`` …), as ``stats`` and ``doctor`` read it."""
        ...
