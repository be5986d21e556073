"""One catch-up pass: bring the index up to what SQLite has committed, in named steps.

1. open the tables for the model (a different model or schema rebuilds them) and drop
   rows a dead pass appended above the watermark;
2. repair what the index lost below the watermark, when the integrity check is due;
3. embed the turns above the watermark (``turn_num``), ``READ_BATCH`` at a time;
4. apply the change events after ``event_seq`` to turns already embedded (compaction,
   re-import, deletion, a new agent or scope);
5. refresh the summaries of every session touched, then save the watermarks.

The caller holds the index's write lock; ``IndexerMemory`` carries what one pass leaves
for the next in the same process.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memviewer.index.compaction import OPTIMIZE_AFTER_ROWS
from memviewer.index.lance import SCHEMA_VERSION, SUMMARIES, TURNS, WINDOWS, IndexMismatchError, sql_str
from memviewer.index.reconcile import reconcile
from memviewer.index.summaries import Progress, summarise
from memviewer.store import index_progress, indexing

if TYPE_CHECKING:
    from memviewer.events import EventRecord
    from memviewer.index.pass_context import PassContext
    from memviewer.store.db import Store

log = logging.getLogger("memviewer.index")

READ_BATCH = 2048
OPTIMIZE_AFTER_SUMMARIES = 200
CHANGE_EVENTS = [
    "session.compacted",
    "session.imported",
    "session.closed",
    "session.idle_pruned",
    "session.deleted",
    "session.agent_changed",
]
EVENT_PAGE = 1000


@dataclass
class IndexerMemory:
    """What an indexer carries from one pass to the next (one per ``Indexer``)."""

    last_state: dict[str, Any] | None = None  # what this process last saved
    tail_checked: bool = False  # rows above the watermark were looked for since the last failure
    next_verify: float = 0.0  # monotonic time of the next integrity check (0: the first pass)
    healed: dict[str, Any] = field(default_factory=dict)  # the last repair of an integrity check
    last_sync: float | None = None


def sql_heads(store: Store) -> tuple[int, int]:
    """``MAX(turns.num)`` and ``MAX(events.seq)``: what the watermarks must reach."""
    with store.read() as conn:
        return indexing.newest_num_and_seq(conn)


class CatchUp:
    """One pass over SQLite's new turns and change events (``run``), one step per method.

    ``optimize_now`` compacts the tables (after a bulk append, before the per-session
    lookups of step 4); ``session_ids`` are reconciled and re-summarised whatever happened.
    """

    def __init__(
        self,
        p: PassContext,
        memory: IndexerMemory,
        session_ids: list[str],
        optimize_now: Callable[[], None],
    ) -> None:
        self.p = p
        self.memory = memory
        self.asked = session_ids
        self.optimize_now = optimize_now
        self.state: dict[str, Any] = {}
        self.touched: set[str] = set(session_ids)
        self.forced: set[str] = set(session_ids)  # summaries rewritten whatever their count
        self.settled: set[str] = set()  # sessions already reconciled (or wholly new) in this pass
        self.deleted: set[str] = set()  # sessions deleted: nothing to summarise
        self.added = 0
        self.updated = 0

    def run(self, progress: Progress | None = None) -> dict[str, Any]:
        started = time.monotonic()
        self.state = self._open_tables()
        _num, last_seq = sql_heads(self.p.store)
        with self.p.store.read() as conn:
            total_new = index_progress.turns_after(conn, int(self.state["turn_num"]))
        self._drop_unsaved_tail()
        healed = self._repair_if_due()
        self._append_new_turns(total_new, progress)
        if self.added >= OPTIMIZE_AFTER_ROWS:
            # fold the new rows into the scalar indexes before the per-session lookups below
            self.optimize_now()
        self._apply_change_events()
        self.touched -= self.deleted
        self.forced -= self.deleted
        self.state["event_seq"] = max(int(self.state.get("event_seq", 0)), last_seq)
        for sid in self.asked:
            if sid not in self.settled:
                self.updated += self._reconcile(sid, None)
        summarised = self._refresh_summaries(progress)
        self._finish()
        return {
            "added_turns": self.added,
            "updated_turns": self.updated,
            "summaries": summarised,
            "sessions": len(self.touched),
            "seconds": round(time.monotonic() - started, 3),
            **({"healed": healed} if any(healed.values()) else {}),
        }

    # -- 1. the tables ---------------------------------------------------------------------
    def _open_tables(self) -> dict[str, Any]:
        """The state to advance, read under the write lock, with tables for the model.

        Another process may have advanced the watermark (or rebuilt the tables) since this
        one last wrote: the tables are then opened again.
        """
        index, embedder = self.p.index, self.p.embedder
        name, dim = embedder.name, int(embedder.dim)
        try:
            index.check_model(name, dim)
        except IndexMismatchError as exc:
            log.warning("%s: rebuilding the index", exc)
            index.drop()
        state = index.load_state()
        if state != self.memory.last_state:
            index.reopen()
        index.ensure_tables(dim)
        state = state or {"turn_num": 0, "event_seq": 0}
        state.update(model=name, dim=dim, schema=SCHEMA_VERSION)
        return state

    def _drop_unsaved_tail(self) -> None:
        """Rows above the watermark exist only if a pass (of any process) died between
        writing them and saving the watermark: drop them, then append freely."""
        if self.memory.tail_checked and not self.state.get("appending"):
            return
        above = f"num > {int(self.state['turn_num'])}"
        if self.p.index.count(TURNS, above):
            self.p.index.delete_where(above)
        self.memory.tail_checked = True

    def _save(self) -> None:
        self.p.index.save_state(self.state)
        self.memory.last_state = json.loads(json.dumps(self.state))  # as ``load_state`` will read it

    # -- 2. what the index lost ----------------------------------------------------------------
    def _repair_if_due(self) -> dict[str, Any]:
        """Re-embed what the index lost (``memviewer.index.integrity``): first pass, then each minute."""
        from memviewer.index import integrity
        from memviewer.index.repair import repair

        if time.monotonic() < self.memory.next_verify:
            return {}
        self.memory.next_verify = time.monotonic() + integrity.VERIFY_EVERY_S
        report = repair(self.p)
        if any(report.values()):
            self.memory.healed = {**report, "at": time.time()}
        return report

    # -- 3. new turns ------------------------------------------------------------------------
    def _append_new_turns(self, total_new: int, progress: Progress | None) -> None:
        p, state = self.p, self.state
        embed_started = time.monotonic()
        while True:
            with p.store.read() as conn:
                rows = indexing.turns_above(conn, int(state["turn_num"]), READ_BATCH)
            if not rows:
                return
            if not state.get("appending"):  # marks a pass that may leave rows above the mark
                state["appending"] = True
                self._save()
            self.touched.update(r["session_id"] for r in rows)
            if p.contextual:
                summarise(p, sorted({r["session_id"] for r in rows} - set(p.contexts)), self.forced)
            p.index.add_turns(p.embed(rows))
            self.added += len(rows)
            state["turn_num"] = int(rows[-1]["num"])
            # what this pass achieves (reads, embedding, appends): the ETA of the lag
            state["rate_turns_s"] = round(self.added / max(time.monotonic() - embed_started, 1e-6), 1)
            self._save()
            if progress is not None:
                progress(self.added, total_new, "turns")

    # -- 4. changes to turns already embedded ----------------------------------------------------
    def _apply_change_events(self) -> None:
        seq = int(self.state.get("event_seq", 0))
        while True:
            events = self.p.store.events_since(seq, EVENT_PAGE, CHANGE_EVENTS)
            if not events:
                return
            for ev in events:
                seq = ev.seq
                if ev.session_id is not None:
                    self.touched.add(ev.session_id)
                    self._apply_event(ev, ev.session_id)
            self.state["event_seq"] = seq
            self._save()

    def _apply_event(self, ev: EventRecord, sid: str) -> None:
        if ev.kind == "session.compacted":
            ids = [*ev.payload.get("archived_turn_ids", []), ev.payload.get("summary_turn_id")]
            self.updated += self._reconcile(sid, [i for i in ids if i])
        elif ev.kind == "session.deleted":
            self._on_deleted(sid, ev.payload.get("max_num_after"))
        elif ev.kind == "session.agent_changed":  # its rows carry the scope: re-read them
            self.forced.add(sid)
            if ev.payload.get("scope_changed") and sid not in self.settled:
                self.updated += self._reconcile(sid, None)
                self.settled.add(sid)
        elif ev.kind == "session.imported":
            self.forced.add(sid)
            if sid not in self.settled and not _wholly_new(ev.payload):
                self.updated += self._reconcile(sid, None)
            self.settled.add(sid)
        else:  # closed / pruned: a final summary
            self.forced.add(sid)

    def _on_deleted(self, sid: str, floor: Any) -> None:
        """No rows in SQLite: the session's index rows, summary and windows go too."""
        index = self.p.index
        if isinstance(floor, int) and 0 <= floor < int(self.state["turn_num"]):
            # numbers above it may be given again to new turns (SQLite reuses the
            # highest): the watermark must not cover them, and rows this pass
            # already appended above it are embedded again on the next, once
            self.state["turn_num"] = floor
            index.delete_where(f"num > {int(floor)}")
        self._reconcile(sid, None)
        index.delete_where(f"session_id = {sql_str(sid)}", SUMMARIES)
        index.delete_where(f"session_id = {sql_str(sid)}", WINDOWS)
        self.deleted.add(sid)
        self.settled.add(sid)

    def _reconcile(self, sid: str, turn_ids: list[str] | None) -> int:
        return reconcile(self.p, sid, turn_ids, int(self.state["turn_num"]))

    # -- 5. summaries and the watermarks --------------------------------------------------------
    def _refresh_summaries(self, progress: Progress | None) -> int:
        """Summaries of touched sessions; after an upgrade of the extractive summarizer, of
        every session once (the source hash then differs, so each is rewritten)."""
        from memviewer.index.summarizer import EXTRACTIVE_VERSION

        if self.state.get("summary_version") != EXTRACTIVE_VERSION:
            with self.p.store.read() as conn:
                every = indexing.session_ids_with_turns(conn)
            self.touched.update(every)
            self.forced.update(every)
        summarised = summarise(self.p, sorted(self.touched), self.forced, progress)
        self.state["summary_version"] = EXTRACTIVE_VERSION
        if summarised >= OPTIMIZE_AFTER_SUMMARIES:
            # BM25 over rows not yet in the full-text index is scored differently (and
            # searched flat): after a bulk import, index the new summaries right away.
            self.p.index.optimize(tables=(SUMMARIES,))
        return summarised

    def _finish(self) -> None:
        self.state["last_sync"] = time.time()
        self.state["appending"] = False
        self._save()
        self.memory.last_sync = self.state["last_sync"]

    def rows_to_optimize(self) -> int:
        """Rows this pass wrote that the next compaction should fold in (a bulk append
        was compacted already, by ``optimize_now``)."""
        return self.updated + (self.added if self.added < OPTIMIZE_AFTER_ROWS else 0)


def _wholly_new(payload: dict[str, Any]) -> bool:
    """An import whose turns are all new: none of them was embedded before, nothing to reconcile.

    A chunked import (``session.chunked_import``) also counts the turns it found unchanged:
    a continued import of a huge file re-reads no session.
    """
    unchanged = payload.get("unchanged_turns", 0) if payload.get("scope_changed") is False else 0
    return bool(
        payload.get("new_turns", 0) + unchanged == payload.get("turns")
        and not payload.get("updated_turns")
        and not payload.get("removed_turns")
    )
