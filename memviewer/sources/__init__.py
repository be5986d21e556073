"""Sources: feeds the hub follows by itself, for agents that do not embed the Publisher.

Each source (a PraisonAI session folder, an OTLP/HTTP receiver) runs inside the hub,
the one writer, and hands its writes to the hub's writer queue: publish commands with
ids derived from the source's own ids (replays are no-ops), or an import on the writer
thread. ``build_sources(settings)`` makes the ones the settings ask for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def build_sources(settings: Any) -> list[Any]:
    """The sources configured by ``watch_praisonai`` and ``otlp`` (none by default)."""
    out: list[Any] = []
    folders = getattr(settings, "watch_praisonai", None) or []
    if folders:
        from memviewer.sources.praisonai_watch import PraisonAIWatcher

        for folder in folders:
            out.append(PraisonAIWatcher(Path(folder).expanduser()))
    address = getattr(settings, "otlp", None)
    if address:
        from memviewer.sources.otlp_http import OtlpReceiver, parse_address

        host, port = parse_address(address)
        out.append(OtlpReceiver(host, port))
    return out
