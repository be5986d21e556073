"""Sources: feeds the hub follows by itself, for agents that do not embed the Publisher.

Each source (a PraisonAI session folder, an OTLP/HTTP receiver) runs inside the hub,
the one writer, and hands its writes to the hub's writer queue: publish commands with
ids derived from the source's own ids (replays are no-ops), or an import on the writer
thread. ``build_sources(settings)`` makes the ones the settings ask for; each is a
``sources.source.Source`` (what the hub calls: ``kind``, ``start``, ``stop``, ``status``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memviewer.config import Settings
    from memviewer.sources.source import Source


def build_sources(settings: Settings) -> list[Source]:
    """The sources configured by ``watch_praisonai`` and ``otlp`` (none by default)."""
    out: list[Source] = []
    for folder in settings.watch_praisonai or []:
        from memviewer.praisonai.watch import PraisonAIWatcher

        out.append(
            PraisonAIWatcher(
                Path(folder).expanduser(),
                follow_symlinks=settings.watch_follow_symlinks,
                max_file_bytes=settings.watch_max_file_bytes,
                read_timeout=settings.watch_read_timeout,
            )
        )
    address = settings.otlp
    if address:
        from memviewer.access import home_token, token_path
        from memviewer.sources.otlp_http import OtlpReceiver, parse_address
        from memviewer.sources.otlp_queue import FOLDER, DurableQueue

        host, port = parse_address(address)
        token, created = home_token(settings.home_path)
        queue = DurableQueue(settings.home_path / FOLDER)
        out.append(
            OtlpReceiver(
                host,
                port,
                token=token,
                token_file=token_path(settings.home_path),
                new=created,
                queue=queue,
                process=True,  # HTTP, mapping and the queue's fsync off the hub's interpreter
            )
        )
    return out
