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

Summaries of every touched session are refreshed by the rule documented in
``memviewer.index.summarizer``. ``sync()`` is the blocking catch-up (import
returns only after it); ``start_background()`` runs the same catch-up in a
daemon thread woken by the service's event bus (the bus listener only sets a
flag, so the writer thread never waits for embeddings), batching about
``BATCH_TURNS`` turns or ``BATCH_WAIT_S`` seconds, and optimising the tables
now and then.

One writer at a time, across processes: every pass holds the index's
``write_lock`` (a flock) and re-reads the watermark under it, so two processes
never embed the same turns. A background indexer also claims the index
(``LanceIndex.claim_owner``) and polls SQLite every ``POLL_S`` for rows other
processes wrote; a blocking ``sync()`` in another process then leaves the
writing to it and waits until its watermark covers everything committed
(``import`` still returns only once the turns are recallable). ``rebuild()``
embeds a probe first and builds into fresh tables that replace the old ones
only when complete, so a broken model or a Ctrl-C never costs the working index.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select

from memviewer import paths
from memviewer.errors import CONFLICT, INTERNAL, MemviewerError
from memviewer.index.timing import BATCH_TURNS, BATCH_WAIT_S, POLL_S
from memviewer.store.tables import Session, Turn
from memviewer.words import plural

if TYPE_CHECKING:
    from memviewer.config import Settings
    from memviewer.index.embedder import Embedder
    from memviewer.index.parts import IndexParts
    from memviewer.index.progress import Embedding
    from memviewer.session.bus import EventBus

log = logging.getLogger("memviewer.index")

T = Turn.__table__
S = Session.__table__

READ_BATCH = 2048
#: Turns embedded per model call inside a batch: between two, a stopping indexer gives up the
#: batch (its watermark not moved: the next start embeds it again), so a hub stops within about
#: one such call (0.2–1 s on 2 cores) instead of a whole ``READ_BATCH`` (5–20 s).
EMBED_CHUNK = 128


class IndexerStopping(Exception):
    """The background indexer was asked to stop in the middle of a pass."""


def exit_past_busy_indexer(say: Callable[[str], None]) -> None:
    """End the process at once when the background indexer is still inside a model call.

    For a process that is done (``serve`` after the hub closed, the viewer after it quit):
    everything durable is committed and closed by then; a thread still in native code would
    otherwise be torn down by the interpreter's exit, which aborts the process
    ("terminate called without an active exception", SIGABRT). The index is derived: the next
    start embeds what that call did not finish."""
    if not any(t.name == "memviewer-indexer" and t.is_alive() for t in threading.enumerate()):
        return
    say("the indexer was mid-call; the next start embeds what it did not finish")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


SUMMARY_CHUNK = 256
#: Turns of one session compared with the index (text read, re-embedded when changed) at a
#: time when a session is reconciled (a re-import, a deletion), so a huge changed session
#: costs one page of memory; ids are looked up in the index ``LOOKUP_CHUNK`` at a time.
RECONCILE_PAGE = 2048
LOOKUP_CHUNK = 500
IDLE_TICK_S = 5.0  # an idle indexer wakes this often: optimize, retry a failed pass
OWNER_WAIT_POLL_S = 0.1
#: A process waiting for the hub's indexer gives up when the hub neither writes nor
#: catches up for this long, or keeps failing for ``OWNER_ERROR_GRACE_S``.
OWNER_STALL_S = 30.0
OWNER_ERROR_GRACE_S = 15.0
OPTIMIZE_EVERY_S = 120.0
OPTIMIZE_AFTER_ROWS = 5_000
OPTIMIZE_AFTER_SUMMARIES = 200
#: ... and after this many new table versions (every append, update, merge or delete is
#: one, with a fragment or deletion file of its own). Small batches arrive faster than
#: rows add up: 16,000 turns in a hub's small passes made ~3,000 versions and up to 270
#: fragments between two passes of ``OPTIMIZE_AFTER_ROWS``, and every query and manifest
#: grows with the fragments. Compacting after ``OPTIMIZE_AFTER_VERSIONS`` (checked after each pass)
#: keeps a table under about that many fragments plus one pass's, whatever the batch size.
OPTIMIZE_AFTER_VERSIONS = 100
CONTEXT_CHARS = 300
#: The summarizer reads at most this much of each turn: its work grows with the whole
#: text, and a summary of a 20 MB message needs no more than its start.
SUMMARY_TURN_CHARS = 20_000
CHANGE_EVENTS = [
    "session.compacted",
    "session.imported",
    "session.closed",
    "session.idle_pruned",
    "session.deleted",
    "session.agent_changed",
]

Progress = Callable[[int, int, str], None]


def _tty_notice(message: str) -> Callable[[], None]:
    """A callback printing ``message`` on stderr when it is a terminal (lock waits)."""

    def notice() -> None:
        if sys.stderr.isatty():
            print(message, file=sys.stderr, flush=True)

    return notice


_LOCK_NOTICE = "another memviewer process is writing the vector index; waiting for it to finish..."


def text_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _turn_query() -> Any:
    return select(
        T.c.num,
        T.c.id,
        T.c.session_id,
        T.c.episode_id,
        T.c.role,
        T.c.content,
        T.c.timestamp,
        T.c.archived,
        T.c.is_compaction_summary,
        S.c.scope,
        S.c.scope_id,
    ).select_from(T.join(S, S.c.id == T.c.session_id))


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
        self.index = parts.lance
        self.summarizer = parts.summarizer
        self._sync_lock = threading.RLock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._pending = 0
        self._thread: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._last_sync: float | None = None
        self._last_optimize = time.monotonic()
        self._rows_since_optimize = 0
        self._optimized_versions = 0  # table versions after the last optimize (0: none yet)
        self._last_error: str | None = None
        self._tail_checked = False
        self._last_state: dict[str, Any] | None = None  # what this process last saved
        self._next_verify = 0.0  # monotonic time of the next integrity check (0: the first pass)
        self.healed: dict[str, Any] = {}  # the last repair of an integrity check (status)

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
        if self._thread is None:
            owner = self.index.owner()
            if owner is not None:
                return self._wait_for_owner(owner, list(session_ids or []), progress)
        with self._sync_lock, self.index.write_lock(_tty_notice(_LOCK_NOTICE)):
            report = self._guarded_catch_up(list(session_ids or []), progress)
            self._maybe_optimize()  # many small syncs compact too (OPTIMIZE_AFTER_VERSIONS)
            return report

    def rebuild(self, progress: Progress | None = None) -> dict[str, Any]:
        """Embed everything again from SQLite into fresh tables, then swap them in.

        The model is loaded and a probe embedded first: if that fails, the working
        index is untouched. An interrupted rebuild leaves the old index in place.
        """
        from memviewer.index.embedder import ModelLoadError, probe_embedder

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
        if self._thread is None and (owner := self.index.owner()) is not None:
            raise MemviewerError(
                CONFLICT,
                f"a background indexer (pid {owner.get('pid', '?')}) owns the vector index",
                data={"hint": "stop the hub that serves this home, then run reindex again"},
            )
        with self._sync_lock, self.index.write_lock(_tty_notice(_LOCK_NOTICE)):
            live = self.index
            staged = live.staging()
            self.index = staged
            self._tail_checked = False
            try:
                report = self._guarded_catch_up([], progress)
            except BaseException:  # Ctrl-C, a full disk…: the old index stays as it was
                staged.close()
                live.discard_staging()
                raise
            finally:
                self.index = live
            live.swap_in(staged)
            self._tail_checked = True
            self._last_state = live.load_state()
            return report

    def start_background(self) -> None:
        if self._thread is not None or self.readonly:
            return
        if not self.index.claim_owner():
            log.warning(
                "another process's indexer already serves %s; both will take turns writing", self.index.folder
            )
        self._stop.clear()
        if self.bus is not None:
            self._unsubscribe = self.bus.on_any(self._on_event)
        self._thread = threading.Thread(target=self._run, name="memviewer-indexer", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 3.0) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._thread is not None:
            self._stop.set()
            self._wake.set()
            self._thread.join(timeout)
            self._thread = None
        self.index.release_owner()

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until every committed change is in the index (tests, benchmarks)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self._wake.is_set() and self._sync_lock.acquire(blocking=False):
                try:  # holding the lock: no catch-up is half done
                    state = self.index.load_state()
                    idle = (
                        not self._wake.is_set()
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
        from memviewer.index.lance import SUMMARIES, TURNS
        from memviewer.index.progress import eta_seconds

        state = self.index.load_state()
        with self.store.read() as conn:
            sql_turns = int(conn.execute(select(func.count()).select_from(T)).scalar() or 0)
            behind = int(
                conn.execute(
                    select(func.count()).select_from(T).where(T.c.num > int(state.get("turn_num", 0)))
                ).scalar()
                or 0
            )
        return {
            "indexed_turns": self.index.count(TURNS),
            "summaries": self.index.count(SUMMARIES),
            "sql_turns": sql_turns,
            "lag": behind,
            "turn_num": state.get("turn_num", 0),
            "event_seq": state.get("event_seq", 0),
            "last_sync": self._last_sync or state.get("last_sync"),
            "model": state.get("model"),
            "background": self._thread is not None and self._thread.is_alive(),
            "ann_index": self.index.has_vector_index(),
            "last_error": self._last_error,
            "healed": self.healed or None,  # the last integrity repair (memviewer.index.integrity)
            "rate_turns_s": state.get("rate_turns_s"),
            "eta_s": eta_seconds(behind, state.get("rate_turns_s")),
        }

    # -- background ----------------------------------------------------------------------
    def _on_event(self, _event: Any) -> None:
        """Runs in the writer's thread after commit: only signal, never block."""
        self._pending += 1
        self._wake.set()

    def _run(self) -> None:
        self._safe_catch_up()
        last_tick = time.monotonic()
        while not self._stop.is_set():
            if not self._wake.wait(timeout=POLL_S):
                if self._last_error is None and self._behind_sqlite():
                    self._safe_catch_up()  # another process (a CLI import) committed rows
                if time.monotonic() - last_tick < IDLE_TICK_S:
                    continue
                last_tick = time.monotonic()
                if not self.index.owns():  # a probe (doctor, a CLI) raced the claim at start:
                    self.index.claim_owner()  # take it now, so CLI imports leave indexing to us
                if self._last_error is not None:  # a failed pass (full disk…) is retried on
                    self._safe_catch_up()  # its own, not left until the next turn arrives
                elif time.monotonic() >= self._next_verify:  # the integrity check is due
                    self._safe_catch_up()
                self._maybe_optimize()
                continue
            deadline = time.monotonic() + BATCH_WAIT_S
            while self._pending < BATCH_TURNS and time.monotonic() < deadline and not self._stop.is_set():
                time.sleep(0.01)
            self._wake.clear()
            self._pending = 0
            if self._stop.is_set():
                break
            self._safe_catch_up()
            self._maybe_optimize()

    def _safe_catch_up(self) -> None:
        try:
            with self._sync_lock, self.index.write_lock():
                self._guarded_catch_up([], None)
            if self._last_error is not None:
                self.index.set_owner_note({"pid": os.getpid()})
            self._last_error = None
        except IndexerStopping as exc:  # nothing half-written: the watermark marks the last batch
            log.info("background indexer: %s", exc)
        except Exception as exc:  # keep the thread alive; the next event retries
            self._last_error = f"{type(exc).__name__}: {exc}"
            self.index.set_owner_note({"pid": os.getpid(), "error": self._last_error})
            log.exception("background indexing failed")

    def _behind_sqlite(self) -> bool:
        """Rows or events committed (by any process) that the watermark does not cover."""
        try:
            state = self.index.load_state()
            num, seq = self._sql_heads()
        except Exception:  # noqa: BLE001 - a poll must never kill the thread
            return False
        return num > int(state.get("turn_num", 0)) or seq > int(state.get("event_seq", 0))

    def _sql_heads(self) -> tuple[int, int]:
        """``MAX(turns.num)`` and ``MAX(events.seq)`` read from the database (both keys)."""
        from sqlalchemy import text

        with self.store.read() as conn:
            num = int(conn.execute(select(func.max(T.c.num))).scalar() or 0)
            seq = int(conn.execute(text("SELECT COALESCE(MAX(seq), 0) FROM events")).scalar() or 0)
        return num, seq

    def _wait_for_owner(
        self, owner: dict[str, Any], session_ids: list[str], progress: Progress | None
    ) -> dict[str, Any]:
        """Wait until another process's background indexer covers every committed row.

        Its watermark in ``state.json`` must reach the current heads; then taking the
        write lock once means the pass that got there (summaries included) is done.
        If that indexer stops, this process catches up itself.
        """
        started = time.monotonic()
        target_num, target_seq = self._sql_heads()
        first = int(self.index.load_state().get("turn_num", 0))
        pid = owner.get("pid", "?")
        _tty_notice(f"the hub (pid {pid}) indexes the new turns; waiting for it...")()
        last_key: tuple[int, int] | None = None
        last_move = time.monotonic()
        while True:
            owner_now = self.index.owner()
            if owner_now is None:  # the hub stopped: this process may write again
                return self.sync(session_ids, progress=progress)
            state = self.index.load_state()
            num, seq = int(state.get("turn_num", 0)), int(state.get("event_seq", 0))
            if num >= target_num and seq >= target_seq:
                with self.index.write_lock():
                    pass
                self.index.refresh()
                return {
                    "added_turns": 0,
                    "updated_turns": 0,
                    "summaries": 0,
                    "indexed_by": f"background indexer (pid {pid})",
                    "turn_num": num,
                    "seconds": round(time.monotonic() - started, 3),
                }
            if progress is not None and target_num > first:
                progress(max(0, min(num, target_num) - first), target_num - first, "turns")
            now = time.monotonic()
            if (num, seq) != last_key or self.index.write_busy():
                last_key, last_move = (num, seq), now
            error = owner_now.get("error")
            if error and now - last_move > OWNER_ERROR_GRACE_S:
                raise MemviewerError(
                    INTERNAL,
                    f"the sessions are stored, but the hub's indexer (pid {pid}) fails: {error}",
                    data={"hint": "fix the cause (see `memviewer doctor`); the hub retries on its own"},
                )
            if now - last_move > OWNER_STALL_S:
                raise MemviewerError(
                    INTERNAL,
                    f"the sessions are stored, but the hub's indexer (pid {pid}) has not "
                    f"indexed them in {OWNER_STALL_S:.0f} s",
                    data={"hint": "`memviewer doctor` shows the index lag; restarting the hub catches up"},
                )
            time.sleep(OWNER_WAIT_POLL_S)

    def _maybe_optimize(self, force: bool = False) -> None:
        if self._stop.is_set():  # a compaction cannot be interrupted: the next start does it
            return
        due = time.monotonic() - self._last_optimize > OPTIMIZE_EVERY_S
        if (
            not force
            and not (self._rows_since_optimize and due)
            and self._rows_since_optimize < OPTIMIZE_AFTER_ROWS
            and self._versions_since_optimize() < OPTIMIZE_AFTER_VERSIONS
        ):
            return
        try:
            with self._sync_lock, self.index.write_lock():
                self.index.optimize()
                self.index.build_ann(threshold=self.settings.ann_threshold)
        except Exception:
            log.exception("optimising the index failed")
        from memviewer.index.heap import release_free_memory

        release_free_memory()  # the compaction's buffers are free; give the pages back
        self._last_optimize = time.monotonic()
        self._rows_since_optimize = 0
        self._optimized_versions = self._table_versions()

    def _table_versions(self) -> int:
        try:
            return sum(self.index.versions().values())
        except Exception:  # noqa: BLE001 - a damaged table: the integrity check reports it
            return 0

    def _versions_since_optimize(self) -> int:
        """Versions both tables gained since this indexer last optimised them.

        Before the first optimise of a process that is every version since the tables were
        created, so a hub starting on a table others appended to compacts it once.
        """
        now = self._table_versions()
        if now < self._optimized_versions:  # the tables were rebuilt (fresh versions)
            self._optimized_versions = now
        return now - self._optimized_versions

    # -- the catch-up ------------------------------------------------------------------------
    def _embedder(self) -> Embedder:
        return self.parts.embedder

    def _guarded_catch_up(self, session_ids: list[str], progress: Progress | None) -> dict[str, Any]:
        """``_catch_up``; after a failure the next pass first drops rows above the watermark.

        A pass can fail between appending rows and saving the watermark (a full disk
        refuses the state file); appending them again would duplicate them.
        """
        try:
            return self._catch_up(session_ids, progress)
        except BaseException:
            self._tail_checked = False
            raise

    def _catch_up(self, session_ids: list[str], progress: Progress | None) -> dict[str, Any]:
        from memviewer.index.lance import SCHEMA_VERSION, IndexMismatchError

        started = time.monotonic()
        embedder = self._embedder()
        name, dim = embedder.name, int(embedder.dim)
        try:
            self.index.check_model(name, dim)
        except IndexMismatchError as exc:
            log.warning("%s: rebuilding the index", exc)
            self.index.drop()
        # Read under the write lock: another process may have advanced the watermark
        # (or rebuilt the tables) since this one last wrote.
        state = self.index.load_state()
        if state != self._last_state:
            self.index.reopen()
        self.index.ensure_tables(dim)
        state = state or {"turn_num": 0, "event_seq": 0}
        state.update(model=name, dim=dim, schema=SCHEMA_VERSION)
        store = self.store
        _num, last_seq = self._sql_heads()
        touched: set[str] = set(session_ids)
        forced: set[str] = set(session_ids)

        # 1. turns above the watermark
        with store.read() as conn:
            total_new = int(
                conn.execute(
                    select(func.count()).select_from(T).where(T.c.num > int(state["turn_num"]))
                ).scalar()
                or 0
            )
        if not self._tail_checked or state.get("appending"):
            # Rows above the watermark exist only if a pass (of any process) died between
            # writing them and saving the watermark: drop them, then append freely.
            above = f"num > {int(state['turn_num'])}"
            if self.index.count("turns", above):
                self.index.delete_where(above)
            self._tail_checked = True
        added = 0
        contextual = self.settings.contextual_embeddings
        contexts: dict[str, str] = {}
        healed: dict[str, Any] = {}
        if time.monotonic() >= self._next_verify:  # rows lost below the watermark heal here
            healed = self._verify(embedder, contexts)
        embed_started = time.monotonic()
        while True:
            with store.read() as conn:
                rows = [
                    dict(r)
                    for r in conn.execute(
                        _turn_query()
                        .where(T.c.num > int(state["turn_num"]))
                        .order_by(T.c.num)
                        .limit(READ_BATCH)
                    ).mappings()
                ]
            if not rows:
                break
            if not state.get("appending"):  # marks a pass that may leave rows above the mark
                state["appending"] = True
                self._save_state(state)
            touched.update(r["session_id"] for r in rows)
            if contextual:
                self._summarise(sorted({r["session_id"] for r in rows} - set(contexts)), forced, contexts)
            self.index.add_turns(self._turn_rows(rows, embedder, contexts))
            added += len(rows)
            state["turn_num"] = int(rows[-1]["num"])
            # what this pass achieves (reads, embedding, appends): the ETA of the lag
            state["rate_turns_s"] = round(added / max(time.monotonic() - embed_started, 1e-6), 1)
            self._save_state(state)
            if progress is not None:
                progress(added, total_new, "turns")

        if added >= OPTIMIZE_AFTER_ROWS:
            # fold the new rows into the scalar indexes before the per-session lookups below
            self._maybe_optimize(force=True)

        # 2. changes to turns that were already embedded
        updated = 0
        settled: set[str] = set()  # sessions already reconciled (or wholly new) in this pass
        deleted: set[str] = set()  # sessions deleted: nothing to summarise
        seq = int(state.get("event_seq", 0))
        while True:
            events = store.events_since(seq, 1000, CHANGE_EVENTS)
            if not events:
                break
            for ev in events:
                seq = ev.seq
                if ev.session_id is None:
                    continue
                touched.add(ev.session_id)
                if ev.kind == "session.compacted":
                    ids = [*ev.payload.get("archived_turn_ids", []), ev.payload.get("summary_turn_id")]
                    updated += self._reconcile(
                        ev.session_id, [i for i in ids if i], embedder, state["turn_num"], contexts
                    )
                elif ev.kind == "session.deleted":  # no rows in SQLite: its index rows go too
                    floor = ev.payload.get("max_num_after")
                    if isinstance(floor, int) and 0 <= floor < int(state["turn_num"]):
                        # numbers above it may be given again to new turns (SQLite reuses the
                        # highest): the watermark must not cover them, and rows this pass
                        # already appended above it are embedded again on the next, once
                        state["turn_num"] = floor
                        self.index.delete_where(f"num > {int(floor)}")
                    self._reconcile(ev.session_id, None, embedder, state["turn_num"], contexts)
                    self.index.delete_where(f"session_id = {_lit(ev.session_id)}", "session_summaries")
                    self.index.delete_where(f"session_id = {_lit(ev.session_id)}", "session_windows")
                    deleted.add(ev.session_id)
                    settled.add(ev.session_id)
                elif ev.kind == "session.agent_changed":  # its rows carry the scope: re-read them
                    forced.add(ev.session_id)
                    if ev.payload.get("scope_changed") and ev.session_id not in settled:
                        updated += self._reconcile(ev.session_id, None, embedder, state["turn_num"], contexts)
                        settled.add(ev.session_id)
                elif ev.kind == "session.imported":
                    forced.add(ev.session_id)
                    p = ev.payload
                    # A chunked import (``session.chunked_import``) also counts the turns it
                    # found unchanged: a continued import of a huge file re-reads no session.
                    unchanged = p.get("unchanged_turns", 0) if p.get("scope_changed") is False else 0
                    wholly_new = (
                        p.get("new_turns", 0) + unchanged == p.get("turns")
                        and not p.get("updated_turns")
                        and not p.get("removed_turns")
                    )
                    if ev.session_id not in settled and not wholly_new:
                        updated += self._reconcile(ev.session_id, None, embedder, state["turn_num"], contexts)
                    settled.add(ev.session_id)
                else:  # closed / pruned: a final summary
                    forced.add(ev.session_id)
            state["event_seq"] = seq
            self._save_state(state)
        touched -= deleted
        forced -= deleted
        state["event_seq"] = max(int(state.get("event_seq", 0)), last_seq)
        for sid in session_ids:
            if sid not in settled:
                updated += self._reconcile(sid, None, embedder, state["turn_num"], contexts)

        # 3. summaries of touched sessions; after an upgrade of the extractive summarizer,
        #    of every session once (the source hash then differs, so each is rewritten)
        from memviewer.index.summarizer import EXTRACTIVE_VERSION

        if state.get("summary_version") != EXTRACTIVE_VERSION:
            with store.read() as conn:
                every = [sid for (sid,) in conn.execute(select(T.c.session_id).distinct())]
            touched.update(every)
            forced.update(every)
        summarised = self._summarise(sorted(touched), forced, contexts, progress)
        state["summary_version"] = EXTRACTIVE_VERSION
        if summarised >= OPTIMIZE_AFTER_SUMMARIES:
            # BM25 over rows not yet in the full-text index is scored differently (and
            # searched flat): after a bulk import, index the new summaries right away.
            self.index.optimize(tables=("session_summaries",))
        state["last_sync"] = time.time()
        state["appending"] = False
        self._save_state(state)
        self._last_sync = state["last_sync"]
        self._rows_since_optimize += updated + (added if added < OPTIMIZE_AFTER_ROWS else 0)
        return {
            "added_turns": added,
            "updated_turns": updated,
            "summaries": summarised,
            "sessions": len(touched),
            "seconds": round(time.monotonic() - started, 3),
            **({"healed": healed} if any(healed.values()) else {}),
        }

    def _verify(self, embedder: Any, contexts: dict[str, str]) -> dict[str, Any]:
        """Re-embed what the index lost (``memviewer.index.integrity``): first pass, then each minute."""
        from memviewer.index import integrity

        self._next_verify = time.monotonic() + integrity.VERIFY_EVERY_S
        self.index.reopen()  # judge what is on disk, not this process's cached table versions
        contextual = bool(getattr(self.settings, "contextual_embeddings", False))

        def read(ids: Sequence[str]) -> list[dict[str, Any]]:
            with self.store.read() as conn:
                q = _turn_query().where(T.c.id.in_(list(ids))).order_by(T.c.num)
                return [dict(r) for r in conn.execute(q).mappings()]

        def embed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
            if contextual:  # the sessions' current summaries, as step 1 uses
                self._summarise(sorted({r["session_id"] for r in rows} - set(contexts)), set(), contexts)
            return self._turn_rows(rows, embedder, contexts)

        try:
            report = integrity.heal(
                self.index,
                self.store,
                read_turns=read,
                embed_rows=embed,
                summarise=lambda ids: self._summarise(ids, set(ids), contexts),
            )
        except Exception:  # a repair that fails must not stop new turns from being embedded
            log.exception("checking or repairing the vector index failed; `memviewer reindex` rebuilds it")
            return {}
        if any(report.values()):
            self.healed = {**report, "at": time.time()}
        return report

    def _save_state(self, state: dict[str, Any]) -> None:
        self.index.save_state(state)
        self._last_state = json.loads(json.dumps(state))  # as ``load_state`` will read it

    def _turn_rows(
        self, rows: list[dict[str, Any]], embedder: Any, contexts: dict[str, str]
    ) -> list[dict[str, Any]]:
        if not rows:
            return []
        texts = [self._embed_text(r, contexts) for r in rows]
        vectors: list[Any] = []
        for i in range(0, len(texts), EMBED_CHUNK):
            if self._stop.is_set():
                raise IndexerStopping(f"stopped with {len(texts) - i} of {len(texts)} turns of a batch left")
            vectors.extend(embedder.embed(texts[i : i + EMBED_CHUNK]))
        return [self._lance_row(r, v) for r, v in zip(rows, vectors, strict=True)]

    @staticmethod
    def _embed_text(row: dict[str, Any], contexts: dict[str, str]) -> str:
        context = contexts.get(row["session_id"])
        text = str(row["content"])
        return f"{context}\n\n{text}" if context else text

    @staticmethod
    def _lance_row(r: dict[str, Any], vector: Any) -> dict[str, Any]:
        return {
            "turn_id": r["id"],
            "num": int(r["num"]),
            "session_id": r["session_id"],
            "episode_id": r["episode_id"],
            "scope": r["scope"] or "",
            "scope_id": r["scope_id"] or "",
            "role": r["role"],
            "archived": bool(r["archived"]),
            "is_summary": bool(r["is_compaction_summary"]),
            "timestamp": float(r["timestamp"]),
            "text": str(r["content"]),
            "text_hash": text_hash(str(r["content"])),
            "vector": vector,
        }

    def _reconcile(
        self,
        session_id: str,
        turn_ids: list[str] | None,
        embedder: Any,
        watermark: int,
        contexts: dict[str, str],
    ) -> int:
        """Make LanceDB's rows for these turns (or the whole session) match SQLite.

        At most ``RECONCILE_PAGE`` turns are read (with their text) and re-embedded at a
        time, so a re-import that changed a session of a million turns costs the memory
        of one page, not of the session.
        """
        if turn_ids is None:
            return self._reconcile_session(session_id, embedder, watermark, contexts)
        changed = 0
        for i in range(0, len(turn_ids), RECONCILE_PAGE):
            page = turn_ids[i : i + RECONCILE_PAGE]
            with self.store.read() as conn:
                q = _turn_query().where(T.c.session_id == session_id, T.c.id.in_(page), T.c.num <= watermark)
                rows = [dict(r) for r in conn.execute(q).mappings()]
            changed += self._reconcile_rows(session_id, rows, embedder, contexts)
        return changed

    def _reconcile_session(
        self, session_id: str, embedder: Any, watermark: int, contexts: dict[str, str]
    ) -> int:
        """The whole session, in pages: first the index rows SQLite no longer has, then SQLite's turns.

        The index's ids of the session are streamed (``LanceIndex.id_batches``) and looked
        up in SQLite a chunk at a time; SQLite's turns are read ``RECONCILE_PAGE`` at a time
        by ``num`` (the session index keeps them in that order).
        """
        stale: list[str] = []
        for chunk in self.index.id_batches("turns", "turn_id", f"session_id = {_lit(session_id)}"):
            with self.store.read() as conn:
                known = set(
                    conn.execute(
                        select(T.c.id).where(
                            T.c.session_id == session_id, T.c.num <= watermark, T.c.id.in_(chunk)
                        )
                    ).scalars()
                )
            stale.extend(tid for tid in chunk if tid not in known)
        if stale:
            self.index.delete_turns(stale)
        changed = len(stale)
        after = 0
        while True:
            with self.store.read() as conn:
                q = (
                    _turn_query()
                    .where(T.c.session_id == session_id, T.c.num > after, T.c.num <= watermark)
                    .order_by(T.c.num)
                    .limit(RECONCILE_PAGE)
                )
                rows = [dict(r) for r in conn.execute(q).mappings()]
            if not rows:
                return changed
            after = int(rows[-1]["num"])
            changed += self._reconcile_rows(session_id, rows, embedder, contexts)

    def _reconcile_rows(
        self, session_id: str, rows: list[dict[str, Any]], embedder: Any, contexts: dict[str, str]
    ) -> int:
        """Bring the index rows of these SQLite turns (one page of one session) in step."""
        if not rows:
            return 0
        cols = [
            "turn_id",
            "scope",
            "scope_id",
            "role",
            "archived",
            "is_summary",
            "text_hash",
            "episode_id",
            "timestamp",
        ]
        ids = [r["id"] for r in rows]
        lance: dict[str, dict[str, Any]] = {}
        for i in range(0, len(ids), LOOKUP_CHUNK):
            where = f"session_id = {_lit(session_id)} AND " + _in("turn_id", ids[i : i + LOOKUP_CHUNK])
            lance.update((r["turn_id"], r) for r in self.index.rows("turns", where, cols))
        re_embed: list[dict[str, Any]] = []
        re_flag: list[dict[str, Any]] = []
        archive_on: list[str] = []
        archive_off: list[str] = []
        for row in rows:
            tid = row["id"]
            have = lance.get(tid)
            if have is None or have["text_hash"] != text_hash(str(row["content"])):
                re_embed.append(row)
                continue
            target = _lance_flags(row)
            diff = {k for k, v in target.items() if have.get(k) != v}
            if diff == {"archived"}:
                (archive_on if target["archived"] else archive_off).append(tid)
            elif diff:
                re_flag.append(row)
        if archive_on:
            self.index.set_archived(archive_on, True)
        if archive_off:
            self.index.set_archived(archive_off, False)
        if re_flag:
            vectors = self.index.vectors("turns", "turn_id", [r["id"] for r in re_flag])
            self.index.upsert_turns([self._lance_row(r, vectors[r["id"]]) for r in re_flag])
        if re_embed:
            self.index.upsert_turns(self._turn_rows(re_embed, embedder, contexts))
        return len(re_embed) + len(re_flag) + len(archive_on) + len(archive_off)

    def _summarise(
        self,
        session_ids: Iterable[str],
        forced: set[str],
        contexts: dict[str, str],
        progress: Progress | None = None,
    ) -> int:
        ids = list(session_ids)
        done = 0
        for i in range(0, len(ids), SUMMARY_CHUNK):
            done += self._summarise_chunk(ids[i : i + SUMMARY_CHUNK], forced, contexts)
            if progress is not None and len(ids) > SUMMARY_CHUNK:  # only when it takes a while
                progress(min(i + SUMMARY_CHUNK, len(ids)), len(ids), "summaries")
        return done

    def _summarise_chunk(self, ids: list[str], forced: set[str], contexts: dict[str, str]) -> int:
        from memviewer.index.lance import WINDOWS
        from memviewer.index.summarizer import needs_refresh, window_hash

        if not ids:
            return 0
        existing = {
            r["session_id"]: r
            for r in self.index.rows(
                "session_summaries",
                _in("session_id", ids),
                ["session_id", "turn_count", "source_hash", "summary", "scope", "scope_id"],
            )
        }
        out_rows: list[dict[str, Any]] = []
        texts: list[str] = []
        windows: list[tuple[str, int, str]] = []  # (session, start, text) of the chats among them
        with self.store.read() as conn:
            counts: dict[str, int] = dict(
                conn.execute(
                    select(T.c.session_id, func.count())
                    .where(T.c.session_id.in_(ids))
                    .group_by(T.c.session_id)
                ).all()
            )
            sessions = {
                r["id"]: dict(r)
                for r in conn.execute(
                    select(S.c.id, S.c.scope, S.c.scope_id, S.c.title).where(S.c.id.in_(ids))
                ).mappings()
            }
            for sid in ids:
                session = sessions.get(sid)
                if session is None:
                    continue
                prev = existing.get(sid)
                count = int(counts.get(sid, 0))
                scope_moved = prev is not None and (prev["scope"], prev["scope_id"]) != (
                    session["scope"],
                    session["scope_id"],
                )
                if not needs_refresh(
                    prev["turn_count"] if prev else None, count, force=sid in forced or scope_moved
                ):
                    if prev is not None:
                        contexts.setdefault(sid, prev["summary"][:CONTEXT_CHARS])
                    continue
                turns = [
                    dict(r)
                    for r in conn.execute(
                        select(
                            T.c.role,
                            func.substr(T.c.content, 1, SUMMARY_TURN_CHARS).label("content"),
                            T.c.timestamp,
                            T.c.is_compaction_summary,
                            T.c.meta,  # a turn's author (metadata.speaker) shapes chat summaries
                        )
                        .where(T.c.session_id == sid)
                        .order_by(T.c.idx)
                    ).mappings()
                ]
                if (
                    prev is not None
                    and not scope_moved
                    and prev["source_hash"] == self.summarizer.source_hash(turns)
                ):
                    contexts.setdefault(sid, prev["summary"][:CONTEXT_CHARS])
                    continue  # unchanged input: idempotent
                result = self.summarizer.summarize(turns, session.get("title") or "")
                contexts[sid] = result.summary[:CONTEXT_CHARS]
                texts.append(result.summary or session.get("title") or sid)
                windows += [(sid, i, text) for i, text in enumerate(result.windows)]
                out_rows.append(
                    {
                        "session_id": sid,
                        "scope": session["scope"] or "",
                        "scope_id": session["scope_id"] or "",
                        "summary": result.summary,
                        "search_text": result.search_text,
                        "turn_count": result.turn_count,
                        "source_hash": result.source_hash,
                        "method": result.method,
                        "updated": time.time(),
                    }
                )
        if out_rows:
            # a window whose text is unchanged keeps its vector: a growing chat embeds only
            # its new windows (they start at fixed offsets, so the earlier ones stay the same)
            kept = (
                self.index.vectors(WINDOWS, "session_id", [r["session_id"] for r in out_rows], by="text_hash")
                if windows
                else {}
            )
            hashes = [window_hash(w[2]) for w in windows]
            fresh = [i for i, h in enumerate(hashes) if h not in kept]
            vectors = self._embedder().embed(texts + [windows[i][2] for i in fresh])
            for row, vec in zip(out_rows, vectors[: len(out_rows)], strict=True):
                row["vector"] = vec
            new = dict(zip((hashes[i] for i in fresh), vectors[len(out_rows) :], strict=True))
            scopes = {r["session_id"]: (r["scope"], r["scope_id"]) for r in out_rows}
            self.index.replace_windows(
                list(scopes),
                [
                    {
                        "window_id": f"{sid}#{i}",
                        "session_id": sid,
                        "scope": scopes[sid][0],
                        "scope_id": scopes[sid][1],
                        "text_hash": h,
                        "vector": new[h] if h in new else kept[h],
                    }
                    for (sid, i, _text), h in zip(windows, hashes, strict=True)
                ],
            )
            self.index.upsert_summaries(out_rows)
        return len(out_rows)


def _lit(value: str) -> str:
    from memviewer.index.lance import sql_str

    return sql_str(value)


def _in(column: str, values: Sequence[str]) -> str:
    from memviewer.index.lance import in_filter

    return in_filter(column, values) if values else "false"


def _lance_flags(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "scope": row["scope"] or "",
        "scope_id": row["scope_id"] or "",
        "role": row["role"],
        "archived": bool(row["archived"]),
        "is_summary": bool(row["is_compaction_summary"]),
        "episode_id": row["episode_id"],
        "timestamp": float(row["timestamp"]),
    }


def index_status(settings: Settings, embedding: Callable[[], Embedding] | None = None) -> dict[str, Any]:
    """For ``memviewer doctor``: tables, model, row counts and lag, opened read-only.

    A lag within ``timing.CATCH_UP_GRACE_S`` (turns published a moment ago) is fine;
    past it the check fails and says who embeds the turns (``embedding()``, asked only
    then: ``memviewer.wire.embedding.who_embeds``), or that nothing does.
    """
    from memviewer.index.lance import SUMMARIES, TURNS, WINDOWS, LanceIndex
    from memviewer.index.progress import index_lag, waiting_line
    from memviewer.store.db import Store

    home = settings.home_path
    folder = paths.lance_dir(home)
    db = paths.db_path(home)
    sql_turns = behind = sql_sessions = 0
    # read_consistency 0: every read sees the newest table version, so a pass that has
    # just saved its watermark is never judged against a table view a second older
    index = LanceIndex(folder, readonly=True, read_consistency=0.0)
    state = index.load_state()
    lag: dict[str, Any] = {"lag": 0}
    if db.exists():
        store = Store.open(db, readonly=True)
        try:
            with store.engine.connect() as conn:
                sql_turns = int(conn.execute(select(func.count()).select_from(T)).scalar() or 0)
                lag = index_lag(home, conn)
                behind = int(lag["lag"])
                sql_sessions = int(
                    conn.execute(select(func.count(func.distinct(T.c.session_id)))).scalar() or 0
                )
        finally:
            store.close()
    if not index.exists:
        ok = sql_turns == 0
        detail = f"{folder}: no index yet ({plural(sql_turns, 'turn')} in SQLite)"
        if not ok:
            detail += "; run `memviewer reindex`"
        return {"ok": ok, "detail": detail}
    turns, summaries, windows = index.count(TURNS), index.count(SUMMARIES), index.count(WINDOWS)
    ann = "IVF_PQ" if index.has_vector_index() else "brute force"
    detail = (
        f"{folder}: {plural(turns, 'turn')}, {plural(summaries, 'session summary', 'session summaries')}, "
        f"{plural(windows, 'chat window')}, model "
        f"{state.get('model')} (dim {state.get('dim')}), vector search {ann}, "
        f"lag {plural(behind, 'turn')}"
    )
    if behind:
        eta = lag.get("eta_s")
        detail += f", ETA {eta:.0f} s" if eta is not None else ", ETA unknown"
    ok = behind == 0 or bool(lag.get("within_grace"))
    out: dict[str, Any] = {}
    if behind and ok:
        detail += f" (catching up: the oldest was stored {lag.get('waiting_s')} s ago)"
    elif behind:
        who = embedding() if embedding is not None else None
        if who is None:
            detail += " (a running hub catches up by itself; otherwise run `memviewer reindex`)"
        else:
            detail += f"; {waiting_line(lag, who)}"
            out.update(who.public())
    extra = _duplicates(index, TURNS, "turn_id", turns, sql_turns - behind)
    extra += _duplicates(index, SUMMARIES, "session_id", summaries, sql_sessions)
    if extra:
        ok = False
        detail += "; " + "; ".join(extra) + ": run `memviewer reindex`"
    health = _integrity(index, db)  # both ways, per table: memviewer.index.integrity
    if health is not None and not health.ok:
        ok = False
        detail += "; " + "; ".join(health.problems()) + f": {health.hint()}"
    index.close()
    out = {"ok": ok, "detail": detail, **out}
    if behind:
        out["lag"] = {k: lag.get(k) for k in ("lag", "eta_s", "waiting_s", "within_grace")}
    if health is not None:
        out["integrity"] = health.public()
    return out


def _integrity(index: Any, db: Any) -> Any:
    from memviewer.index.integrity import doctor_check
    from memviewer.store.db import Store

    if not db.exists():
        return None
    store = Store.open(db, readonly=True)
    try:
        return doctor_check(index, store, exact_limit=DISTINCT_CHECK_ROWS)
    finally:
        store.close()


#: Above this many rows ``doctor`` compares counts only instead of reading every id.
DISTINCT_CHECK_ROWS = 2_000_000


def _duplicates(index: Any, table: str, key: str, rows: int, expected: int) -> list[str]:
    """Problems of one table: more rows than SQLite has items, or an id indexed twice."""
    import pyarrow.compute as pc

    what = "turn" if key == "turn_id" else "session summary"
    if rows > DISTINCT_CHECK_ROWS:  # too many ids to read: counts only (stale rows count too)
        return [f"{rows - expected} more {what} rows than SQLite has"] if rows > expected else []
    if rows == 0:
        return []
    ids = index.table(table).search().select([key]).limit(None).to_arrow()[key]
    unique = int(pc.count_distinct(ids).as_py())
    return [f"{rows - unique} duplicated {what} rows"] if unique < rows else []


__all__ = ["Indexer", "index_status", "text_hash"]
