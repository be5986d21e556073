"""When to compact the index's tables, and doing it under the write lock.

Every append, update, merge or delete makes a table version with a fragment or deletion
file of its own, and every query and manifest grows with the fragments, so the tables are
compacted (and the ANN index built past ``ann_threshold``) now and then.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memviewer.index.lance import LanceIndex

log = logging.getLogger("memviewer.index")

OPTIMIZE_EVERY_S = 120.0
OPTIMIZE_AFTER_ROWS = 5_000
#: ... and after this many new table versions (every append, update, merge or delete is
#: one, with a fragment or deletion file of its own). Small batches arrive faster than
#: rows add up: 16,000 turns in a hub's small passes made ~3,000 versions and up to 270
#: fragments between two passes of ``OPTIMIZE_AFTER_ROWS``, and every query and manifest
#: grows with the fragments. Compacting after ``OPTIMIZE_AFTER_VERSIONS`` (checked after each pass)
#: keeps a table under about that many fragments plus one pass's, whatever the batch size.
OPTIMIZE_AFTER_VERSIONS = 100


class Compaction:
    """The rows and versions written since the last compaction, and the compaction itself.

    ``lock`` is the indexer's pass lock; a compaction cannot be interrupted, so none
    starts once ``stop`` is set (the next start does it).
    """

    def __init__(self, lock: threading.RLock, stop: threading.Event, ann_threshold: int) -> None:
        self.lock = lock
        self.stop = stop
        self.ann_threshold = ann_threshold
        self.last = time.monotonic()
        self.rows = 0  # rows written since the last compaction
        self.versions = 0  # table versions after the last compaction (0: none yet)

    def maybe(self, index: LanceIndex, force: bool = False) -> None:
        """Compact when forced, or when enough rows, time or versions have accumulated."""
        if self.stop.is_set():
            return
        due = time.monotonic() - self.last > OPTIMIZE_EVERY_S
        if (
            not force
            and not (self.rows and due)
            and self.rows < OPTIMIZE_AFTER_ROWS
            and self._versions_since(index) < OPTIMIZE_AFTER_VERSIONS
        ):
            return
        try:
            with self.lock, index.write_lock():
                index.optimize()
                index.build_ann(threshold=self.ann_threshold)
        except Exception:
            log.exception("optimising the index failed")
        from memviewer.index.heap import release_free_memory

        release_free_memory()  # the compaction's buffers are free; give the pages back
        self.last = time.monotonic()
        self.rows = 0
        self.versions = _table_versions(index)

    def _versions_since(self, index: LanceIndex) -> int:
        """Versions both tables gained since this indexer last compacted them.

        Before the first compaction of a process that is every version since the tables were
        created, so a hub starting on a table others appended to compacts it once.
        """
        now = _table_versions(index)
        if now < self.versions:  # the tables were rebuilt (fresh versions)
            self.versions = now
        return now - self.versions


def _table_versions(index: LanceIndex) -> int:
    try:
        return sum(index.versions().values())
    except Exception:  # noqa: BLE001 - a damaged table: the integrity check reports it
        return 0
