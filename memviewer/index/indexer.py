"""Keeps the LanceDB index in step with SQLite, off the hot path.

SQLite is the source of truth; the index is derived and can always be rebuilt
(``memviewer reindex``). The indexer tracks two watermarks in ``state.json``:

* ``turn_num`` — the largest ``turns.num`` embedded. New turns are exactly the
  rows above it (``num`` only grows), so catching up is one indexed range scan.
* ``event_seq`` — the last event examined for changes to turns that were
  already embedded: ``session.compacted`` (turns archived, the compaction
  summary rewritten) and ``session.imported`` (a re-import may change content,
  flags or scope). Those turns are re-read from SQLite, so the index follows
  the current state whatever order events arrived in.

``sync()`` is the blocking catch-up (import returns only after it);
``start_background()`` runs the same catch-up in a daemon thread woken by the
service's event bus (``index.runner``), and compacts the tables now and then
(``index.compaction``). One pass is ``index.catch_up``; its steps use
``index.reconcile`` (turns already embedded), ``index.summaries`` (the rule of
``index.summarizer``) and ``index.repair`` (what the index lost). Its SQL is in
``store.indexing``.

One writer at a time, across processes: every pass holds the index's
``write_lock`` (a flock) and re-reads the watermark under it, so two processes
never embed the same turns. A background indexer also claims the index
(``LanceIndex.claim_owner``) and polls SQLite every ``POLL_S`` for rows other
processes wrote; a blocking ``sync()`` in another process then leaves the
writing to it and waits until its watermark covers everything committed
(``index.owner_wait``). ``rebuild()`` embeds a probe first and builds into fresh
tables that replace the old ones only when complete, so a broken model or a
Ctrl-C never costs the working index.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from memviewer.errors import CONFLICT, MemviewerError
from memviewer.index.catch_up import CatchUp, IndexerMemory
from memviewer.index.compaction import Compaction
from memviewer.index.owner_wait import wait_for_owner
from memviewer.index.pass_context import PassContext
from memviewer.index.runner import Runner, exit_past_busy_indexer
from memviewer.index.status import index_status, indexer_status

if TYPE_CHECKING:
    from memviewer.index.embedder import Embedder
    from memviewer.index.lance import LanceIndex
    from memviewer.index.parts import IndexParts
    from memviewer.session.bus import EventBus

log = logging.getLogger("memviewer.index")

Progress = Callable[[int, int, str], None]

_LOCK_NOTICE = "another memviewer process is writing the vector index; waiting for it to finish..."


def _tty_notice(message: str) -> Callable[[], None]:
    """A callback printing ``message`` on stderr when it is a terminal (lock waits)."""

    def notice() -> None:
        if sys.stderr.isatty():
            print(message, file=sys.stderr, flush=True)

    return notice


class Indexer:
    """Embeds turns and session summaries into LanceDB (one per home and process).

    ``bus`` (the manager's in-process event bus) wakes the background thread on new
    turns; without one, only ``sync`` catches up.
    """

    def __init__(self, parts: IndexParts, *, bus: EventBus | None = None) -> None:
        self.parts = parts
        self.store = parts.store
        self.settings = parts.settings
        self.readonly = parts.readonly
        self.bus = bus
        self.index: LanceIndex = parts.lance  # a rebuild's staging tables while it runs
        self.summarizer = parts.summarizer
        self._sync_lock = threading.RLock()
        self.runner = Runner(self)
        self.memory = IndexerMemory()
        self.compaction = Compaction(self._sync_lock, self.runner.stop, self.settings.ann_threshold)

    # -- public API --------------------------------------------------------------------
    def sync(
        self, session_ids: Sequence[str] | None = None, *, progress: Progress | None = None
    ) -> dict[str, Any]:
        """Blocking catch-up; ``session_ids`` are also reconciled and re-summarised.

        When another process's background indexer (a hub) owns the index, this
        process writes nothing and waits until that indexer has caught up.
        """
        if self.readonly:
            return {"skipped": "read-only service", **self.status()}
        ids = list(session_ids or [])
        if not self.runner.started:
            owner = self.index.owner()
            if owner is not None:
                return wait_for_owner(
                    self.index,
                    self.store,
                    owner,
                    progress,
                    notice=lambda message: _tty_notice(message)(),
                    take_over=lambda: self.sync(ids, progress=progress),
                )
        with self._sync_lock, self.index.write_lock(_tty_notice(_LOCK_NOTICE)):
            report = self._guarded_catch_up(ids, progress)
            self.maybe_optimize()  # many small syncs compact too (OPTIMIZE_AFTER_VERSIONS)
            return report

    def rebuild(self, progress: Progress | None = None) -> dict[str, Any]:
        """Embed everything again from SQLite into fresh tables, then swap them in.

        The model is loaded and a probe embedded first: if that fails, the working
        index is untouched. An interrupted rebuild leaves the old index in place.
        """
        from memviewer.errors import ModelLoadError
        from memviewer.index.embedder import probe_embedder

        batch = self.settings.embed_batch
        if batch < 1:
            raise ModelLoadError(
                f"embed_batch must be >= 1, not {batch} (the embed_batch setting or MEMVIEWER_EMBED_BATCH)"
            )
        try:
            embedder = self._embedder()
        except ValueError as exc:
            raise ModelLoadError(f"cannot set up the embedding model: {exc}") from None
        probe_embedder(embedder)
        if not self.runner.started and (owner := self.index.owner()) is not None:
            raise MemviewerError(
                CONFLICT,
                f"a background indexer (pid {owner.get('pid', '?')}) owns the vector index",
                hint="stop the hub that serves this home, then run reindex again",
            )
        with self._sync_lock, self.index.write_lock(_tty_notice(_LOCK_NOTICE)):
            live = self.index
            staged = live.staging()
            self.index = staged
            self.memory.tail_checked = False
            try:
                report = self._guarded_catch_up([], progress)
            except BaseException:  # Ctrl-C, a full disk…: the old index stays as it was
                staged.close()
                live.discard_staging()
                raise
            finally:
                self.index = live
            live.swap_in(staged)
            self.memory.tail_checked = True
            self.memory.last_state = live.load_state()
            return report

    def start_background(self) -> None:
        if self.runner.started or self.readonly:
            return
        if not self.index.claim_owner():
            log.warning(
                "another process's indexer already serves %s; both will take turns writing", self.index.folder
            )
        self.runner.start(self.bus)

    def close(self, timeout: float = 3.0) -> None:
        self.runner.close(timeout)
        self.index.release_owner()

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until every committed change is in the index (tests, benchmarks)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.runner.wake.is_set() and self._sync_lock.acquire(blocking=False):
                try:  # holding the lock: no catch-up is half done
                    state = self.index.load_state()
                    idle = (
                        not self.runner.wake.is_set()
                        and int(state.get("event_seq", 0)) >= self.store.last_seq
                        and self.status()["lag"] == 0
                    )
                finally:
                    self._sync_lock.release()
                if idle:
                    return True
            time.sleep(0.02)
        return False

    def status(self) -> dict[str, Any]:
        return indexer_status(
            self.index,
            self.store,
            last_sync=self.memory.last_sync,
            background=self.runner.alive,
            last_error=self.runner.last_error,
            healed=self.memory.healed,
        )

    # -- what the background runner drives (runner.Host) ---------------------------------------
    def background_pass(self) -> None:
        with self._sync_lock, self.index.write_lock():
            self._guarded_catch_up([], None)

    def maybe_optimize(self, force: bool = False) -> None:
        self.compaction.maybe(self.index, force)

    def verify_due(self) -> bool:
        return time.monotonic() >= self.memory.next_verify

    # -- one pass ------------------------------------------------------------------------------
    def _embedder(self) -> Embedder:
        return self.parts.embedder

    def _guarded_catch_up(self, session_ids: list[str], progress: Progress | None) -> dict[str, Any]:
        """One ``CatchUp`` pass; after a failure the next pass first drops rows above the watermark.

        A pass can fail between appending rows and saving the watermark (a full disk
        refuses the state file); appending them again would duplicate them.
        """
        try:
            p = PassContext(
                index=self.index,
                store=self.store,
                summarizer=self.summarizer,
                embedder=self._embedder(),
                stop=self.runner.stop,
                contextual=self.settings.contextual_embeddings,
            )
            catch_up = CatchUp(p, self.memory, session_ids, lambda: self.maybe_optimize(force=True))
            report = catch_up.run(progress)
            self.compaction.rows += catch_up.rows_to_optimize()
            return report
        except BaseException:
            self.memory.tail_checked = False
            raise


__all__ = ["Indexer", "exit_past_busy_indexer", "index_status"]
