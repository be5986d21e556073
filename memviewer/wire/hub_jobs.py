"""The hub's background jobs: the vector indexer's start, spool ingestion, keyword upkeep.

Each write they make runs on the one writer thread (``GroupCommitWriter.run``), in turn
with the publish batches, so a job never stops the loop or a publish for long.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

from memviewer.wire import spool
from memviewer.wire.group_commit import GroupCommitWriter
from memviewer.wire.hub_service import HubService

log = logging.getLogger("memviewer.hub")

KEYWORD_SEGMENTS_MAX = 8  # an idle hub merges the keyword index down to one past this many segments
KEYWORD_MERGE_STEPS = 1000  # at most this many merge steps in one go


class HubJobs:
    """What a hub does beside answering requests, and what it last saw doing it."""

    def __init__(
        self,
        service: HubService,
        writes: GroupCommitWriter,
        *,
        spool_dir: Path,
        spool_scan_interval: float,
        keyword_upkeep_interval: float,
    ) -> None:
        self.service = service
        self.writes = writes
        self.spool_dir = spool_dir
        self.spool_scan_interval = spool_scan_interval
        self.keyword_upkeep_interval = keyword_upkeep_interval
        self.spool_reports: list[dict[str, Any]] = []  # the last ten ingestions that found files
        self.indexer_status = "not started"
        self.keyword_segments: int | None = None  # the keyword index's segments, last seen

    def start_indexer(self) -> None:
        """A thread of its own: opening the indexer loads the model, which the loop must not wait on."""
        try:
            idx = self.service.indexer()
            if idx is None:
                self.indexer_status = "not available"
                return
            idx.start_background()
            self.indexer_status = "running"
        except Exception as exc:
            self.indexer_status = f"failed: {type(exc).__name__}: {exc}"
            log.exception("the vector indexer did not start")

    async def ingest_spools(self) -> None:
        """Store what dead publishers left in the spool folder; a failure keeps the files."""
        try:
            report = await self.writes.run(spool.ingest, self.spool_dir, self._apply_spooled)
        except Exception:
            log.exception("spool ingestion failed; files are kept for the next attempt")
            return
        if report["files"] or report.get("refused_files"):
            log.info("ingested %d spool files (%d commands)", report["files"], report["commands"])
            self.spool_reports.append({"at": time.time(), **report})
            del self.spool_reports[:-10]

    def _apply_spooled(self, commands: list[Any]) -> list[dict[str, Any]]:
        """Writer thread: a chunk of a dead publisher's spool; refusals are counted like publishes."""
        results = self.service.apply_batch(commands)
        self.writes.count_refusals(commands, results, where="spool")
        return results

    async def spool_scanner(self) -> None:
        """Every ``spool_scan_interval``: a publisher that died while the hub ran left a spool."""
        while True:
            await asyncio.sleep(self.spool_scan_interval)
            await self.ingest_spools()

    async def keyword_upkeep(self) -> None:
        """Merge the keyword index's segments (``store.fts.merge_step``) on the writer thread:
        down to one at start, then whenever more than ``KEYWORD_SEGMENTS_MAX`` have piled up
        (checked every ``keyword_upkeep_interval``). One bounded step per writer job, so a
        publish queued meanwhile is applied between two steps; a failure is logged and the
        hub serves on."""
        above = 1
        while True:
            try:
                await self.merge_keyword_index(above)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a full disk, a locked store: the next pass tries again
                log.warning("merging the keyword index failed: %s", exc)
            above = KEYWORD_SEGMENTS_MAX
            await asyncio.sleep(self.keyword_upkeep_interval)

    async def merge_keyword_index(self, above: int = 1) -> int:
        """When the keyword index holds more than ``above`` segments: bounded merge steps
        (``service.merge_keyword_index``), each its own writer job, until one is left; the
        segments left."""
        merge = self.service.merge_keyword_index
        _, left, worked = await self.writes.run(merge, None, above)
        steps = 0
        while worked and left > 1 and steps < KEYWORD_MERGE_STEPS:
            _, left, worked = await self.writes.run(merge, None, 1)
            steps += 1
        self.keyword_segments = left
        return int(left)
