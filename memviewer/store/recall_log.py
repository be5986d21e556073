"""The recall log: every search and recall a front end ran, and every recall an agent
reported (``record_recall``), with what came back at that moment.

The log is a record for people debugging recall; recall itself never reads it.
Rows are keyed by ``num`` (insertion order, cheap pruning) and the caller-minted
``id`` (a replay of the same ``record_recall`` is a no-op). Retention is bounded
by count, age and total bytes (``_retain``), applied on every write, and counted.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import JSON, Column, Connection, and_, func, insert, select, text
from sqlmodel import Field

from memviewer.events import EventRecord
from memviewer.store.tables import _Table
from memviewer.timeutil import iso

if TYPE_CHECKING:
    from memviewer.store.db import WriteTx

KINDS = ("search", "recall")


class RecallRecord(_Table, table=True):
    __tablename__ = "recall_log"

    num: int | None = Field(default=None, primary_key=True)
    id: str = Field(unique=True, index=True)
    ts: float = Field(index=True)
    source: str = Field(index=True)  # cli | tui | hub | mcp | agent | otlp
    kind: str = "recall"  # search | recall
    session_id: str | None = Field(default=None, index=True)  # the caller's session, when known
    episode_id: str | None = None
    query: str = ""
    params: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    results: list[Any] | None = Field(default=None, sa_column=Column(JSON))
    diagnostics: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    bytes: int = 0  # the entry's encoded size (``memviewer.recall_log.bound``), for the size cap
    cut: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))  # what the bounds cut
    caller: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))  # who asked, as logged


R = RecallRecord.__table__


def get(conn: Connection, recall_id: str) -> dict[str, Any] | None:
    row = conn.execute(select(R).where(R.c.id == recall_id)).mappings().first()
    return dict(row) if row else None


def insert_record(conn: Connection, values: dict[str, Any]) -> None:
    conn.execute(insert(R).values(**values))


#: The log's counters (``recall_log_counters``): ``bytes`` kept now, ``entries_cut`` (cut to
#: the limits of ``memviewer.recall_log.bound``), and rows that retention removed by reason.
COUNTERS = ("bytes", "entries_cut", "evicted_count", "evicted_age", "evicted_bytes")


class _Db:
    """The statements of ``write_entry`` on either connection: SQLite's driver connection
    directly (a tenth of the CPU of SQLAlchemy, see ``write_entry``), or SQLAlchemy's
    (PostgreSQL). Statements use ``?`` placeholders."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        raw: Any = conn.connection.driver_connection if conn.dialect.name == "sqlite" else None
        self.raw: sqlite3.Connection | None = raw

    def run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if self.raw is not None:
            return self.raw.execute(sql, params).fetchall()
        names = iter(range(len(params)))
        named = re.sub(r"\?", lambda _m: f":p{next(names)}", sql)
        result = self.conn.execute(text(named), {f"p{i}": v for i, v in enumerate(params)})
        return [tuple(r) for r in result.fetchall()] if result.returns_rows else []

    def bump(self, counts: dict[str, int]) -> None:
        for name, n in counts.items():
            if n:
                self.run(
                    "INSERT INTO recall_log_counters (name, value) VALUES (?, ?) "
                    "ON CONFLICT (name) DO UPDATE SET value = recall_log_counters.value + excluded.value",
                    (name, n),
                )

    def drop_through(self, where: str, params: Sequence[Any]) -> tuple[int, int]:
        """Delete the rows ``where`` selects; ``(rows, bytes)`` gone."""
        sql = f"SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM recall_log WHERE {where}"
        n, size = self.run(sql, params)[0]
        if n:
            self.run(f"DELETE FROM recall_log WHERE {where}", params)
        return int(n), int(size)


def _retain(db: _Db, *, max_rows: int, max_age_s: float | None, max_bytes: int, now: float) -> None:
    """Retention after one insert, oldest first: beyond the newest ``max_rows``, older than
    ``max_age_s``, and while the log holds more than ``max_bytes`` (never the newest row).

    Costs what it removes, not the log's size: the count comes from SQLite's narrowest
    index, the oldest rows from the primary key's end, the byte total from the counters.
    (Skipping the newest ``max_rows`` with an ``OFFSET`` walked that many whole rows,
    results JSON and all: 2.7 ms for a full log of 5,000, more than the search it records.)"""
    gone = {"evicted_count": 0, "evicted_age": 0, "evicted_bytes": 0}
    freed = 0
    if max_rows > 0:
        n = db.run("SELECT COUNT(*) FROM recall_log")[0][0]
        if n > max_rows:
            edge = db.run("SELECT num FROM recall_log ORDER BY num LIMIT 1 OFFSET ?", (n - max_rows - 1,))
            if edge:
                rows, size = db.drop_through("num <= ?", (edge[0][0],))
                gone["evicted_count"], freed = rows, freed + size
    if max_age_s is not None and max_age_s > 0:
        rows, size = db.drop_through("ts < ?", (now - max_age_s,))
        gone["evicted_age"], freed = rows, freed + size
    if max_bytes > 0:
        kept = db.run("SELECT value FROM recall_log_counters WHERE name = 'bytes'") or [(0,)]
        total = int(kept[0][0]) - freed
        if total > max_bytes:
            newest = db.run("SELECT MAX(num) FROM recall_log")[0][0]
            over, edge_num, after = total - max_bytes, None, -1
            while over > 0:  # the oldest rows, a page at a time, until enough bytes are freed
                page = db.run(
                    "SELECT num, bytes FROM recall_log WHERE num > ? AND num < ? ORDER BY num LIMIT 500",
                    (after, newest),
                )
                for num, size in page:
                    over -= int(size)
                    edge_num = after = num
                    if over <= 0:
                        break
                if len(page) < 500:
                    break
            if edge_num is not None:
                rows, size = db.drop_through("num <= ?", (edge_num,))
                gone["evicted_bytes"], freed = rows, freed + size
    db.bump({**gone, "bytes": -freed})


_COLS = (
    "id",
    "ts",
    "source",
    "kind",
    "session_id",
    "episode_id",
    "query",
    "params",
    "results",
    "diagnostics",
    "bytes",
    "cut",
    "caller",
)
_JSON_COLS = frozenset({"params", "results", "diagnostics", "cut", "caller"})
_INSERT = f"INSERT INTO recall_log ({', '.join(_COLS)}) VALUES ({', '.join('?' * len(_COLS))})"


def write_entry(
    tx: WriteTx,
    values: dict[str, Any],
    *,
    max_rows: int,
    max_age_s: float | None,
    max_bytes: int = 0,
    now: float,
    event_kind: str,
    event_payload: dict[str, Any],
) -> bool:
    """One entry in the caller's write transaction: the row, its counters, retention
    (``_retain``) and its event, in that order. False (nothing written) when its id is
    logged already (a replay). ``values`` come from ``memviewer.recall_log.check_command``
    (``bytes`` and ``cut`` set there).

    On SQLite these are plain statements on the driver connection, as the turn fast path's
    (``store.fast_turns``): the same rows and the same JSON text (``json.dumps``, as the JSON
    columns write it), a tenth of the CPU. The hub's writer runs this once per logged search,
    on the interpreter the next search needs: built with SQLAlchemy, the statements
    cost about 2 ms of CPU, most of a rare-phrase search."""
    db = _Db(tx.conn)
    if db.run("SELECT 1 FROM recall_log WHERE id = ?", (values["id"],)):
        return False
    row = {**values, "bytes": int(values.get("bytes") or 0)}
    if db.raw is not None:
        db.run(_INSERT, [json.dumps(row.get(c)) if c in _JSON_COLS else row.get(c) for c in _COLS])
    else:
        insert_record(tx.conn, {c: row.get(c) for c in _COLS})
    db.bump({"bytes": row["bytes"], "entries_cut": 1 if row.get("cut") else 0})
    _retain(db, max_rows=max_rows, max_age_s=max_age_s, max_bytes=max_bytes, now=now)
    if db.raw is None:
        sid, eid = values["session_id"], values["episode_id"]
        tx.append_event(event_kind, sid, eid, event_payload, ts=values["ts"])
        return True
    rec = EventRecord(
        seq=tx.next_seq,
        kind=event_kind,
        ts=values["ts"],
        session_id=values["session_id"],
        episode_id=values["episode_id"],
        payload=event_payload,
    )
    payload = json.dumps(rec.payload)
    db.run(_INSERT_EVENT, (rec.seq, rec.kind, rec.ts, rec.session_id, rec.episode_id, payload))
    tx.next_seq += 1
    tx.events.append(rec)
    return True


def counters(conn: Connection) -> dict[str, int]:
    """The log's counters (``COUNTERS``, 0 when never bumped) and ``entries`` kept now."""
    found: dict[str, Any] = {
        str(name): value for name, value in conn.execute(text("SELECT name, value FROM recall_log_counters"))
    }
    out = {name: int(found.get(name, 0)) for name in COUNTERS}
    out["entries"] = int(conn.execute(select(func.count()).select_from(R)).scalar() or 0)
    return out


_INSERT_EVENT = (
    "INSERT INTO events (seq, kind, ts, session_id, episode_id, payload) VALUES (?, ?, ?, ?, ?, ?)"
)


def list_records(
    conn: Connection,
    *,
    source: str | None = None,
    session_id: str | None = None,
    kind: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> tuple[int, list[dict[str, Any]]]:
    """``(total matching, page)``, newest first."""
    conds: list[Any] = []
    if source:
        conds.append(R.c.source == source)
    if session_id:
        conds.append(R.c.session_id == session_id)
    if kind:
        conds.append(R.c.kind == kind)
    where = and_(*conds) if conds else None
    q = select(R)
    c = select(func.count()).select_from(R)
    if where is not None:
        q, c = q.where(where), c.where(where)
    q = q.order_by(R.c.ts.desc(), R.c.num.desc()).limit(limit).offset(offset)
    total = int(conn.execute(c).scalar() or 0)
    return total, [dict(r) for r in conn.execute(q).mappings().all()]


def record_public(row: dict[str, Any], *, full: bool = True) -> dict[str, Any]:
    """The JSON shape of one entry (``docs/cli.md``, ``## recalls``)."""
    results = row.get("results") or []
    out: dict[str, Any] = {
        "recall_id": row["id"],
        "ts": row["ts"],
        "at": iso(row["ts"]),
        "source": row["source"],
        "kind": row["kind"],
        "session_id": row["session_id"],
        "episode_id": row["episode_id"],
        "query": row["query"],
        "params": row.get("params") or {},
        "result_count": len(results),
        "bytes": int(row.get("bytes") or 0),
        "cut": row.get("cut"),
        "caller": row.get("caller"),
    }
    if full:
        out["results"] = results
        out["diagnostics"] = row.get("diagnostics") or {}
    return out


def in_window(
    conn: Connection, session_id: str, after: float | None, until: float, *, limit: int = 20
) -> list[dict[str, Any]]:
    """The entries of a (caller) session logged in ``(after, until]``, oldest first: the
    recalls an LLM call at ``until`` followed, when it names none."""
    q = select(R).where(R.c.session_id == session_id, R.c.ts <= until)
    if after is not None:
        q = q.where(R.c.ts > after)
    rows = conn.execute(q.order_by(R.c.ts.desc(), R.c.num.desc()).limit(limit)).mappings().all()
    return [dict(r) for r in reversed(rows)]
