"""Engine set-up, write transactions and the gap-free event log.

One ``Store`` per process. Writes go through ``Store.write()``: one outer
transaction per call (``BEGIN IMMEDIATE`` on SQLite), nested calls become
savepoints, and the events a transaction appends get their ``seq`` from the
log's current maximum, read under the write lock, so the log has no gaps even
when a second process writes.
Listeners registered with ``on_commit`` see events only after they are durable.

Code outside ``memviewer.store`` names a connection's type as ``store.db.Connection`` and a
driver's failure as ``store.db.DriverError``, never importing SQLAlchemy itself
(``tests/test_sql_in_store.py``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection as Connection  # re-exported: the type other layers name
from sqlalchemy import Engine, create_engine, event, insert, select, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from memviewer.errors import INTERNAL, MemviewerError
from memviewer.events import EventRecord
from memviewer.store import migrations
from memviewer.store.tables import Event

log = logging.getLogger("memviewer.store")

EventListener = Callable[[list[EventRecord]], None]
#: A failure the database driver raised, wrapped by SQLAlchemy (the driver's own is ``.orig``).
DriverError = sa_exc.DBAPIError


# SQLite primary result codes that mean the storage failed, not the command:
# SQLITE_BUSY, LOCKED, NOMEM, READONLY, IOERR, CORRUPT, FULL, CANTOPEN, PROTOCOL, NOTADB.
_SQLITE_STORAGE_CODES = {
    5: "busy",
    6: "locked",
    7: "nomem",
    8: "readonly",
    10: "ioerr",
    11: "corrupt",
    13: "full",
    14: "cantopen",
    15: "protocol",
    26: "notadb",
}


def storage_failure(exc: BaseException) -> MemviewerError | None:
    """``exc`` as a retryable ``internal`` error when the store itself failed.

    A full disk, an I/O error, a lock held past the busy timeout or a read-only
    file is not the command's fault: the whole transaction is rolled back and the
    sender should keep its data and try again, unlike a bad command, which fails
    alone. None for anything else.
    """
    if isinstance(exc, MemviewerError):
        return exc if (exc.data or {}).get("reason") in ("storage_full", "storage_error") else None
    orig = getattr(exc, "orig", None) or exc  # SQLAlchemy wraps the driver's error
    code = getattr(orig, "sqlite_errorcode", None)
    if code is not None:
        name = _SQLITE_STORAGE_CODES.get(code & 0xFF)
        if name is None:
            return None
    elif isinstance(exc, sa_exc.OperationalError):  # another backend: connection, disk
        name = "operational"
    else:
        return None
    full = name == "full"
    what = "the disk (or the database size limit) is full" if full else f"the store failed ({name})"
    return MemviewerError(
        INTERNAL,
        f"{what}: {orig}; nothing of this write was stored, so it can be sent again",
        data={"reason": "storage_full" if full else "storage_error", "retry": True},
    )


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def url_label(url: str) -> str:
    """``url`` fit for a message (no password)."""
    return make_url(url).render_as_string(hide_password=True)


def _sqlite_pragmas(engine: Engine, readonly: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy (not pysqlite) decide when transactions begin, so
        # SAVEPOINT works; see the SQLAlchemy pysqlite notes.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA busy_timeout = 10000")
        if not readonly:
            cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = FULL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get("sqlite_immediate", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


@dataclass
class WriteTx:
    """The open write transaction: its connection and the events it appends."""

    conn: Connection
    next_seq: int
    events: list[EventRecord] = field(default_factory=list)

    def append_event(
        self,
        kind: str,
        session_id: str | None,
        episode_id: str | None,
        payload: dict[str, Any],
        ts: float | None = None,
    ) -> EventRecord:
        rec = EventRecord(
            seq=self.next_seq,
            kind=kind,
            ts=time.time() if ts is None else ts,
            session_id=session_id,
            episode_id=episode_id,
            payload=payload,
        )
        self.conn.execute(insert(Event.__table__).values(**rec.to_dict()))
        self.next_seq += 1
        self.events.append(rec)
        return rec


class Store:
    """Owns the engine. Thread-safe: one writer at a time, readers in parallel."""

    def __init__(self, url: str, *, readonly: bool = False, migrate: bool = True) -> None:
        self.url = url
        parsed = make_url(url)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        self.readonly = readonly
        kwargs: dict[str, Any] = {}
        if self.is_sqlite:
            db = parsed.database
            if db and db != ":memory:" and not readonly:
                Path(db).parent.mkdir(parents=True, exist_ok=True)
            if readonly and db and db != ":memory:":
                url = f"sqlite:///file:{db}?mode=ro&uri=true"
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 10}
        self.engine = create_engine(url, **kwargs)
        if self.is_sqlite:
            _sqlite_pragmas(self.engine, readonly)
        self._write_lock = threading.RLock()
        self._local = threading.local()
        self._listeners: list[EventListener] = []
        if migrate and not readonly:
            with self.engine.connect().execution_options(sqlite_immediate=True) as conn:
                with conn.begin():
                    migrations.migrate(conn)
                    if self.is_sqlite:
                        from memviewer.store import fts

                        fts.reconcile(conn)  # triggers this SQLite build can run
        self._last_seq = self._read_last_seq()

    @classmethod
    def open(cls, path: Path, **kwargs: Any) -> Store:
        return cls(sqlite_url(path), **kwargs)

    @property
    def sqlite_file(self) -> str | None:
        """The path of the SQLite file this store opens; None for another backend, an
        in-memory database or a ``file:`` URI (a reader cannot open those by path)."""
        if not self.is_sqlite:
            return None
        db = make_url(self.url).database
        return db if db and db != ":memory:" and not db.startswith("file:") else None

    def check_compatible(self) -> None:
        """``migrations.check_compatible`` on a connection of its own: raises
        ``migrations.NotAStoreError`` for another application's database and refuses a
        schema newer than this release knows."""
        with self.engine.connect() as conn:
            migrations.check_compatible(conn)

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` verdict: ``ok``, or what it found."""
        with self.engine.connect() as conn:
            return str(conn.execute(text("PRAGMA integrity_check")).scalar())

    # -- events -----------------------------------------------------------
    def _read_last_seq(self) -> int:
        with self.engine.connect() as conn:
            try:
                return int(conn.execute(text("SELECT COALESCE(MAX(seq), 0) FROM events")).scalar() or 0)
            except Exception:  # table missing in a read-only, never-migrated db
                return 0

    @property
    def last_seq(self) -> int:
        return self._last_seq

    def refresh_last_seq(self) -> int:
        """Re-read the log's end (another process may have written); never moves backwards,
        since a commit of this process can land between the read and the assignment."""
        self._last_seq = max(self._last_seq, self._read_last_seq())
        return self._last_seq

    def on_commit(self, listener: EventListener) -> Callable[[], None]:
        """Call ``listener(events)`` after every commit; returns the call that removes it
        (idempotent), so a hub that stops leaves no listener on a store that lives on."""
        self._listeners.append(listener)

        def off() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return off

    def events_since(
        self,
        from_seq: int,
        limit: int = 1000,
        kinds: list[str] | None = None,
        session_id: str | None = None,
    ) -> list[EventRecord]:
        """Events with ``seq > from_seq`` in order (the resume path)."""
        table = Event.__table__
        q = select(table).where(table.c.seq > from_seq)
        if kinds:
            q = q.where(table.c.kind.in_(kinds))
        if session_id:
            q = q.where(table.c.session_id == session_id)
        q = q.order_by(table.c.seq).limit(limit)
        with self.engine.connect() as conn:
            rows = conn.execute(q).mappings().all()
        return [EventRecord.from_dict(dict(r)) for r in rows]

    # -- transactions -----------------------------------------------------
    @contextlib.contextmanager
    def write(self) -> Iterator[WriteTx]:
        if self.readonly:
            raise MemviewerError(INTERNAL, "this store is open read-only")
        tx: WriteTx | None = getattr(self._local, "tx", None)
        if tx is not None:
            mark, seq_mark = len(tx.events), tx.next_seq
            sp = tx.conn.begin_nested()
            try:
                yield tx
            except BaseException as exc:
                del tx.events[mark:]
                tx.next_seq = seq_mark
                if storage_failure(exc) is None:  # else SQLite may have dropped the savepoint:
                    sp.rollback()  # the outer transaction rolls back as a whole
                raise
            else:
                sp.commit()
            return
        with self._write_lock:
            conn = self.engine.connect().execution_options(sqlite_immediate=True)
            try:
                try:
                    trans = conn.begin()  # BEGIN IMMEDIATE: waits up to the busy timeout
                    # Re-read under the write lock: another process (a CLI import while
                    # a hub runs) may have appended events since we last looked.
                    last = conn.execute(text("SELECT COALESCE(MAX(seq), 0) FROM events")).scalar()
                except Exception as exc:  # a lock held too long, a full or unreadable disk
                    failure = storage_failure(exc)
                    if failure is None:
                        raise
                    with contextlib.suppress(Exception):
                        conn.invalidate()
                    log.error("write not started: %s", failure.message)
                    raise failure from exc
                tx = WriteTx(conn=conn, next_seq=int(last or 0) + 1)
                self._local.tx = tx
                try:
                    yield tx
                    trans.commit()
                except BaseException as exc:
                    failure = storage_failure(exc)
                    if failure is None:
                        trans.rollback()
                        raise
                    # SQLite may already have rolled back; never let a failing
                    # ROLLBACK hide why, and do not pool a connection in that state.
                    with contextlib.suppress(Exception):
                        trans.rollback()
                    conn.invalidate()
                    log.error("write rolled back: %s", failure.message)
                    if failure is exc:
                        raise
                    raise failure from exc
                self._last_seq = tx.next_seq - 1
            finally:
                self._local.tx = None
                conn.close()
        if tx.events:
            for listener in list(self._listeners):
                try:
                    listener(tx.events)
                except Exception:  # a broken listener must not undo a commit
                    log.exception("on_commit listener failed")

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        """A read connection; inside a write transaction, that transaction's own."""
        tx: WriteTx | None = getattr(self._local, "tx", None)
        if tx is not None:
            yield tx.conn
            return
        with self.engine.connect() as conn:
            yield conn

    def schema_version(self) -> int:
        with self.engine.connect() as conn:
            try:
                return int(conn.execute(text("SELECT MAX(version) FROM schema_migrations")).scalar() or 0)
            except Exception:
                return 0

    def close(self) -> None:
        self.engine.dispose()
