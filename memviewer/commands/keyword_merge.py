"""After an import: the keyword index merged to one segment, unless a hub serves the home.

An import writes its turns in many transactions (a batch of files, a chunk of a big file),
and each leaves FTS5 segments that every later lookup visits. A hub merges them on its
writer thread (``HubJobs.keyword_upkeep``: when more than ``KEYWORD_SEGMENTS_MAX`` have piled
up); without one the import does it before it returns, in the same bounded steps
(``MemoryService.merge_keyword_index_fully``, skipped on a disk with less free space than the
store's size).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import click

from memviewer.commands.common import settings_of

if TYPE_CHECKING:
    from memviewer.service import MemoryService

log = logging.getLogger(__name__)


def merge_after_import(ctx: click.Context, svc: MemoryService) -> dict[str, Any]:
    """Merge the keyword index's segments once the import is stored; what was done, for the
    report (``by``: ``"import"``, or ``"hub"`` when the serving hub keeps the index)."""
    from memviewer.errors import MemviewerError
    from memviewer.wire.probe import serving_hub

    try:
        hub = serving_hub(settings_of(ctx)) is not None
    except MemviewerError:
        hub = False  # the command already refused an untrusted socket; none serves this home
    if hub:
        n = svc.keyword_segments()
        return {"by": "hub", "segments_before": n, "segments_after": n, "seconds": 0.0}
    t0 = time.perf_counter()
    try:
        before, after = svc.merge_keyword_index_fully()
    except MemviewerError as exc:  # a full disk or a locked store: the import itself is stored
        log.warning("keyword index not merged after the import: %s", exc.message)
        n = svc.keyword_segments()
        return {"by": "import", "segments_before": n, "segments_after": n, "error": exc.message}
    return {
        "by": "import",
        "segments_before": before,
        "segments_after": after,
        "seconds": round(time.perf_counter() - t0, 3),
    }
