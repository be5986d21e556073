"""The recall log: every search and recall a front end ran, and every recall an agent
reported (``record_recall``), with what came back at that moment.

The log is a record for people debugging recall; recall itself never reads it.
Rows are keyed by ``num`` (insertion order, cheap pruning) and the caller-minted
``id`` (a replay of the same ``record_recall`` is a no-op). Retention is bounded
by count and age (``prune``), applied on every write.
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Any

from sqlalchemy import JSON, Column, Connection, and_, delete, func, insert, select
from sqlmodel import Field

from memviewer.store.events import EventRecord
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


R = RecallRecord.__table__


def get(conn: Connection, recall_id: str) -> dict[str, Any] | None:
    row = conn.execute(select(R).where(R.c.id == recall_id)).mappings().first()
    return dict(row) if row else None


def insert_record(conn: Connection, values: dict[str, Any]) -> None:
    conn.execute(insert(R).values(**values))


def prune(conn: Connection, *, max_rows: int, max_age_s: float | None, now: float) -> int:
    """Drop what retention no longer keeps: rows beyond the newest ``max_rows`` (by insertion)
    and rows older than ``max_age_s``. Returns how many went.

    Runs on every write, so it must not cost in proportion to the log: the rows beyond the
    newest ``max_rows`` are the oldest ``count - max_rows``, found from the old end. (Skipping
    the newest ``max_rows`` with an ``OFFSET`` walked that many whole rows, results JSON and
    all: 2.7 ms for a full log of 5,000, more than the search the entry records.) SQLite
    counts the rows on its narrowest index, a few pages."""
    gone = 0
    if max_rows > 0:
        n = int(conn.execute(select(func.count()).select_from(R)).scalar() or 0)
        if n > max_rows:
            edge = conn.execute(select(R.c.num).order_by(R.c.num).offset(n - max_rows - 1).limit(1)).scalar()
            if edge is not None:
                gone += conn.execute(delete(R).where(R.c.num <= edge)).rowcount or 0
    if max_age_s is not None and max_age_s > 0:
        gone += conn.execute(delete(R).where(R.c.ts < now - max_age_s)).rowcount or 0
    return gone


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
)
_JSON_COLS = frozenset({"params", "results", "diagnostics"})
_INSERT = f"INSERT INTO recall_log ({', '.join(_COLS)}) VALUES ({', '.join('?' * len(_COLS))})"
_INSERT_EVENT = (
    "INSERT INTO events (seq, kind, ts, session_id, episode_id, payload) VALUES (?, ?, ?, ?, ?, ?)"
)


def write_entry(
    tx: WriteTx,
    values: dict[str, Any],
    *,
    max_rows: int,
    max_age_s: float | None,
    now: float,
    event_kind: str,
    event_payload: dict[str, Any],
) -> bool:
    """One entry in the caller's write transaction: the row, retention (``prune``) and its
    event, in that order. False (nothing written) when its id is logged already (a replay).

    On SQLite these are plain statements on the driver connection, as the turn fast path's
    (``store.fast_turns``): the same rows and the same JSON text (``json.dumps``, as the JSON
    columns write it), a tenth of the CPU. The hub's writer runs this once per logged search,
    on the interpreter the next search needs: built with SQLAlchemy, the five statements
    cost about 2 ms of CPU, most of a rare-phrase search."""
    if tx.conn.dialect.name != "sqlite":
        if get(tx.conn, values["id"]) is not None:
            return False
        insert_record(tx.conn, values)
        prune(tx.conn, max_rows=max_rows, max_age_s=max_age_s, now=now)
        tx.append_event(
            event_kind, values["session_id"], values["episode_id"], event_payload, ts=values["ts"]
        )
        return True
    raw: sqlite3.Connection = tx.conn.connection.driver_connection  # type: ignore[assignment]
    if raw.execute("SELECT 1 FROM recall_log WHERE id = ?", (values["id"],)).fetchone() is not None:
        return False
    raw.execute(_INSERT, [json.dumps(values[c]) if c in _JSON_COLS else values[c] for c in _COLS])
    if max_rows > 0:
        n = raw.execute("SELECT COUNT(*) FROM recall_log").fetchone()[0]
        if n > max_rows:  # the oldest n - max_rows go (see ``prune``)
            edge = raw.execute(
                "SELECT num FROM recall_log ORDER BY num LIMIT 1 OFFSET ?", (n - max_rows - 1,)
            ).fetchone()
            if edge is not None:
                raw.execute("DELETE FROM recall_log WHERE num <= ?", (edge[0],))
    if max_age_s is not None and max_age_s > 0:
        raw.execute("DELETE FROM recall_log WHERE ts < ?", (now - max_age_s,))
    rec = EventRecord(
        seq=tx.next_seq,
        kind=event_kind,
        ts=values["ts"],
        session_id=values["session_id"],
        episode_id=values["episode_id"],
        payload=event_payload,
    )
    raw.execute(
        _INSERT_EVENT, (rec.seq, rec.kind, rec.ts, rec.session_id, rec.episode_id, json.dumps(rec.payload))
    )
    tx.next_seq += 1
    tx.events.append(rec)
    return True


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
