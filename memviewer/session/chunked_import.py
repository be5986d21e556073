"""Import one session history in chunks, one transaction each (``import_session_chunks``).

``SessionManager.import_session`` takes the whole turn list and writes it in one
transaction: a 200 MB PraisonAI file needed 2.7 GB. Here turns arrive in chunks (the
caller has checked the whole file first, see ``praisonai.chunked``) and each chunk is
compared with the store by turn id and committed on its own, so memory stays at one chunk
plus a 64-bit hash per turn id (to find, at the end, the stored turns the file no longer
holds), and a hub writing to the same store is never held up for a whole file.

The rules are those of ``import_session`` (idempotent by turn id, the file is
authoritative, origins, ``replace``, no live turns silently removed), with what chunking
adds:

* **Interrupted (Ctrl-C, a crash, a full disk).** The chunks committed so far stay: the
  session exists with the file's first turns, in order and whole, and its first
  ``session.imported`` event (``partial: true``, written with the first chunk that changed
  anything) records the origin. Turns the file no longer holds are removed only by the
  last transaction, so an interrupted re-import of an edited file may show old and new
  turns together until it is run again.
* **Re-run.** Running the same import again continues it: committed turns compare equal
  and are skipped, the rest are inserted, and the last transaction removes what the file
  no longer holds and writes the final ``session.imported`` event (``partial`` absent).
  Nothing is duplicated, since every turn is keyed by its id.
* **Refusals come first.** A session from another origin is refused (``conflict``) at the
  first chunk that would change it, before anything is written (chunks that change
  nothing write nothing); live turns published since the last import are refused at the
  start unless ``replace``.
* Turns carry no episodes (``episode_id`` must be null): PraisonAI files have none.
  Episodes the session had are removed at the end, as ``import_session`` does.
* ``keep_missing`` (the folder watcher): stored turns the file no longer holds are kept and
  marked archived by the last transaction (``kept_turns``), nothing is removed. The file's
  turns are numbered on from its first turn's stored position (or after the last stored
  turn when that one is new), so turns dropped from the window's head stay first; a turn
  kept from the middle of the file may share its position with the file's next turn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from memviewer.errors import CONFLICT, INVALID_ARGUMENT, MemviewerError
from memviewer.jsonvalues import check_value
from memviewer.logctx import log_context
from memviewer.session.import_plan import write_session_row
from memviewer.session.importcheck import (
    check_session,
    check_turn,
    is_foreign,
    live_turns_since_import,
    live_turns_would_go,
    prior_origin,
    session_exists,
    stored_turn,
)
from memviewer.store import import_pages, repos
from memviewer.timeutil import now

if TYPE_CHECKING:
    from memviewer.store.db import Store, WriteTx

SessionRow = Callable[[dict[str, Any], float], dict[str, Any]]
"""Builds the ``sessions`` row an import writes (``SessionManager.import_row``: it fills the
home's retention defaults), passed in so this module does not depend on the manager."""

#: Stored turn ids read per query when looking for turns the file no longer holds.
ID_PAGE = 5000
_COMPARED = (
    "session_id",
    "episode_id",
    "idx",
    "role",
    "content",
    "timestamp",
    "archived",
    "is_compaction_summary",
    "replaced_count",
    "tool_calls",
    "tool_call_id",
    "meta",
)


class _Run:
    """One chunked import: what the first transaction found, and the counts so far."""

    def __init__(
        self,
        session_row: SessionRow,
        session: dict[str, Any],
        origin: str | None,
        replace: bool,
        keep_missing: bool = False,
    ):
        self.origin, self.replace, self.keep_missing = origin, replace, keep_missing
        self.t = now()
        self.sid: str = session["id"]
        self.row = session_row(session, self.t)
        self.begun = False
        self.existing: dict[str, Any] | None = None
        self.prior: str | None = None
        self.foreign = False
        self.session_changes: dict[str, Any] = {}
        self.started = False  # the session row and the partial event are written
        self.kept: set[int] = set()  # hash(turn id) of every turn the file holds
        self.pos = 0
        self.offset: int | None = None  # positions start here (``keep_missing``: see the module doc)
        self.turns = self.new = self.updated = self.removed = self.archived = self.kept_count = 0
        self.chunks = 0

    # -- the first transaction's checks -------------------------------------------
    def begin(self, tx: WriteTx) -> None:
        conn = tx.conn
        self.existing = repos.get_session(conn, self.sid)
        existing = self.existing
        if existing is not None:
            self.prior = prior_origin(conn, self.sid)
            self.session_changes = {k: v for k, v in self.row.items() if k != "id" and existing[k] != v}
        prior = self.prior
        self.foreign = is_foreign(prior, self.origin)
        if self.foreign and not self.replace and self.session_changes:
            raise session_exists(self.sid, prior)
        if existing is not None and not self.replace and not self.foreign and not self.keep_missing:
            live = live_turns_since_import(conn, self.sid)
            if live:  # the file is the record, but these turns were never in it
                raise live_turns_would_go(self.sid, live)
        self.begun = True

    def start(self, tx: WriteTx) -> None:
        """Before the first change: the session row, and the event that records the origin."""
        if self.started:
            return
        if self.foreign and not self.replace:
            raise session_exists(self.sid, self.prior)
        write_session_row(tx, self.row, self.existing, self.session_changes, self.t)
        tx.append_event("session.imported", self.sid, None, self.payload(partial=True), ts=self.t)
        self.started = True

    def payload(self, *, partial: bool = False) -> dict[str, Any]:
        scope_changed = any(k in self.session_changes for k in ("scope", "scope_id"))
        body: dict[str, Any] = {
            "turns": 0 if partial else self.turns,
            "new_turns": 0 if partial else self.new,
            "updated_turns": 0 if partial else self.updated,
            "removed_turns": 0 if partial else self.removed,
            "kept_turns": 0 if partial else self.kept_count,
            "unchanged_turns": 0 if partial else self.turns - self.new - self.updated,
            "archived_turns": 0 if partial else self.archived,
            "scope_changed": scope_changed,
            "source": self.row["source"],
            "origin": self.origin,
            "replaced": self.prior if self.foreign else None,
            "chunks": self.chunks,
        }
        if partial:
            body["partial"] = True
        return body

    # -- one chunk ---------------------------------------------------------------
    def chunk(self, tx: WriteTx, turns: list[dict[str, Any]]) -> None:
        conn = tx.conn
        ids: set[str] = set()
        for i, turn in enumerate(turns):
            check_turn(self.pos + i, turn)
            if turn.get("episode_id") is not None:
                raise MemviewerError(
                    INVALID_ARGUMENT, f"turn {turn['id']}: a chunked import takes turns without episodes"
                )
            if turn["id"] in ids:
                raise MemviewerError(INVALID_ARGUMENT, f"turn id {turn['id']!r} appears twice")
            ids.add(turn["id"])
        reason = check_value(turns)
        if reason:
            raise MemviewerError(INVALID_ARGUMENT, f"session {self.sid!r} {reason}")
        have = repos.get_turns(conn, [x["id"] for x in turns])
        if self.offset is None:
            self.offset = 0
            if self.keep_missing and self.existing is not None:
                first = have.get(turns[0]["id"])
                if first is not None and first["session_id"] == self.sid:
                    self.offset = int(first["idx"])
                else:
                    self.offset = repos.next_index(conn, self.sid)
        new_rows: list[dict[str, Any]] = []
        updates: dict[str, dict[str, Any]] = {}
        for i, turn in enumerate(turns):
            values = stored_turn(turn, self.sid, None, self.offset + self.pos + i)
            old = have.get(turn["id"])
            if old is None:
                new_rows.append({"id": turn["id"], **values})
            elif old["session_id"] != self.sid:
                raise MemviewerError(CONFLICT, f"turn {turn['id']} belongs to session {old['session_id']}")
            elif any(old[k] != values[k] for k in _COMPARED):
                updates[turn["id"]] = values
        if new_rows or updates or (self.existing is None) or self.session_changes:
            self.start(tx)
        for tid, values in updates.items():
            repos.update_turn(conn, tid, **values)
        repos.insert_turns(conn, new_rows)
        self.kept.update(hash(x["id"]) for x in turns)
        self.pos += len(turns)
        self.turns += len(turns)
        self.new += len(new_rows)
        self.updated += len(updates)
        self.archived += sum(1 for x in turns if x.get("archived"))
        self.chunks += 1

    # -- the last transaction ------------------------------------------------------
    def finish(self, tx: WriteTx) -> dict[str, Any]:
        conn = tx.conn
        removed_eps: list[str] = []
        if self.existing is not None:
            after = -1
            while True:
                page = import_pages.turn_ids_page(conn, self.sid, after, ID_PAGE)
                if not page:
                    break
                after = page[-1][0]
                gone = [tid for _num, tid in page if hash(tid) not in self.kept]
                if gone and self.keep_missing:  # out of PraisonAI's window: kept, as archived
                    if import_pages.archive_turns(conn, gone):
                        self.start(tx)
                    self.kept_count += len(gone)
                elif gone:
                    self.start(tx)  # refuses a foreign session (nothing written yet)
                    import_pages.delete_turns(conn, gone)
                    self.removed += len(gone)
            removed_eps = [e["id"] for e in repos.session_episodes(conn, self.sid)]
            if removed_eps and not self.keep_missing:
                self.start(tx)
                import_pages.delete_episodes(conn, removed_eps)
        result = {
            "session_id": self.sid,
            "created": self.existing is None,
            "turns": self.turns,
            "new_turns": self.new,
            "updated_turns": self.updated,
            "removed_turns": self.removed,
            "kept_turns": self.kept_count,
            "archived_turns": self.archived,
            "chunks": self.chunks,
        }
        if self.foreign and not self.started:
            return result  # an identical copy from elsewhere: nothing to do, origin kept
        if self.existing is None or self.session_changes:
            self.start(tx)  # an empty file still creates its session
        tx.append_event("session.imported", self.sid, None, self.payload(), ts=self.t)
        return result


class ChunkedImport:
    """One chunked import driven a chunk at a time by its caller: ``add`` per chunk, then
    ``finish``, each its own transaction (the rules of ``import_chunks``).

    For a caller whose chunks come from elsewhere, such as the hub's folder watcher: it
    reads the file on a worker thread and hands each chunk to the writer thread as its
    own job, so publishes interleave with a big file instead of waiting for all of it.
    Calls must not overlap (one thread at a time, in order)."""

    def __init__(
        self,
        store: Store,
        session_row: SessionRow,
        session: dict[str, Any],
        *,
        origin: str | None = None,
        replace: bool = False,
        keep_missing: bool = False,
    ) -> None:
        check_session(session)
        reason = check_value(session)
        if reason:
            raise MemviewerError(INVALID_ARGUMENT, f"session {session['id']!r} {reason}")
        self.store = store
        self._run = _Run(session_row, session, origin, replace, keep_missing)

    @property
    def session_id(self) -> str:
        return self._run.sid

    @property
    def chunks(self) -> int:
        """Chunks stored so far."""
        return self._run.chunks

    def add(self, turns: list[dict[str, Any]]) -> None:
        """Compare one chunk with the store and commit what differs (one transaction)."""
        if not turns:
            return
        run = self._run
        with log_context(session_id=run.sid), self.store.write() as tx:
            if not run.begun:
                run.begin(tx)
            run.chunk(tx, turns)

    def finish(self) -> dict[str, Any]:
        """The last transaction: removes what the file no longer holds; the result."""
        run = self._run
        with log_context(session_id=run.sid), self.store.write() as tx:
            if not run.begun:
                run.begin(tx)
            return run.finish(tx)


def import_chunks(
    store: Store,
    session_row: SessionRow,
    session: dict[str, Any],
    chunks: Iterable[list[dict[str, Any]]],
    *,
    origin: str | None = None,
    replace: bool = False,
) -> dict[str, Any]:
    """Store ``session`` and its turns (projection order, in chunks); see the module doc."""
    job = ChunkedImport(store, session_row, session, origin=origin, replace=replace)
    for turns in chunks:
        job.add(turns)
    return job.finish()
