"""Re-embed what the vector index lost below its watermark, as part of a catch-up pass.

``memviewer.index.integrity`` finds the gap (a rolled-back manifest, deleted files) and
``heal`` asks this module's readers and embedders for exactly the missing turns and
summaries, so a repaired row is indexed as a new one would be.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memviewer.index.summaries import summarise
from memviewer.store import indexing

if TYPE_CHECKING:
    from memviewer.index.pass_context import PassContext

log = logging.getLogger("memviewer.index")


def repair(p: PassContext) -> dict[str, Any]:
    """Check the index against SQLite and heal it (the caller holds the write lock).

    Returns ``integrity.heal``'s report, or ``{}`` when checking or repairing failed: a
    repair that fails must not stop new turns from being embedded.
    """
    from memviewer.index import integrity

    p.index.reopen()  # judge what is on disk, not this process's cached table versions

    def read(ids: Sequence[str]) -> list[dict[str, Any]]:
        with p.store.read() as conn:
            return indexing.turns_by_id(conn, ids)

    def embed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if p.contextual:  # the sessions' current summaries, as new turns use
            summarise(p, sorted({r["session_id"] for r in rows} - set(p.contexts)), set())
        return p.embed(rows)

    try:
        return integrity.heal(
            p.index,
            p.store,
            read_turns=read,
            embed_rows=embed,
            summarise=lambda ids: summarise(p, ids, set(ids)),
        )
    except Exception:
        log.exception("checking or repairing the vector index failed; `memviewer reindex` rebuilds it")
        return {}
