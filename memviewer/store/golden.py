"""Golden sets: (query, expected turns) cases and the score history of ``eval golden``.

Two tables, created by migration 6: ``golden_cases`` (a query, its optional
scope and the turn ids recall should return) and ``golden_runs`` (each
evaluation with its parameters, model, time, averages and per-case scores).
They are the only things the recall debugger writes; memory itself is never
touched. Expected turn ids are kept as given: a turn deleted later is reported
by the evaluator, not removed from the case.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    Connection,
    CursorResult,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    delete,
    insert,
    select,
)

metadata = MetaData()

CASES = Table(
    "golden_cases",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("query", Text, nullable=False),
    Column("scope", String),
    Column("scope_id", String),
    Column("turn_ids", JSON, nullable=False),
    Column("created_at", Float, nullable=False),
)
RUNS = Table(
    "golden_runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("ts", Float, nullable=False, index=True),
    Column("model", String, nullable=False),
    Column("params", JSON, nullable=False),
    Column("cases", Integer, nullable=False),
    Column("metrics", JSON, nullable=False),
    Column("per_case", JSON, nullable=False),
)


def create(conn: Connection) -> None:
    """Migration 6 (the column set above is frozen: change it only with a new migration)."""
    metadata.create_all(conn)


def _case(row: Any) -> dict[str, Any]:
    return {
        "id": row["id"],
        "query": row["query"],
        "scope": row["scope"],
        "scope_id": row["scope_id"],
        "turn_ids": list(row["turn_ids"] or []),
        "created_at": row["created_at"],
    }


def _inserted_id(result: CursorResult[Any]) -> int:
    """The autoincrement id of the row ``result`` inserted."""
    key = result.inserted_primary_key
    if key is None:  # only for statements that are not a single-row insert
        raise RuntimeError("the insert reported no primary key")
    return int(key[0])


def add_case(
    conn: Connection, query: str, turn_ids: list[str], scope: str | None, scope_id: str | None
) -> dict[str, Any]:
    now = time.time()
    result = conn.execute(
        insert(CASES).values(query=query, scope=scope, scope_id=scope_id, turn_ids=turn_ids, created_at=now)
    )
    case = get_case(conn, _inserted_id(result))
    if case is None:  # inside the same transaction: cannot happen short of a broken database
        raise RuntimeError("the golden case just inserted cannot be read back")
    return case


def get_case(conn: Connection, case_id: int) -> dict[str, Any] | None:
    row = conn.execute(select(CASES).where(CASES.c.id == case_id)).mappings().first()
    return _case(row) if row is not None else None


def list_cases(conn: Connection) -> list[dict[str, Any]]:
    return [_case(r) for r in conn.execute(select(CASES).order_by(CASES.c.id)).mappings()]


def remove_case(conn: Connection, case_id: int) -> bool:
    return bool(conn.execute(delete(CASES).where(CASES.c.id == case_id)).rowcount)


def add_run(
    conn: Connection,
    *,
    model: str,
    params: dict[str, Any],
    cases: int,
    metrics: dict[str, Any],
    per_case: list[dict[str, Any]],
    ts: float | None = None,
) -> int:
    result = conn.execute(
        insert(RUNS).values(
            ts=time.time() if ts is None else ts,
            model=model,
            params=params,
            cases=cases,
            metrics=metrics,
            per_case=per_case,
        )
    )
    return _inserted_id(result)


def list_runs(conn: Connection, limit: int | None = None) -> list[dict[str, Any]]:
    """Runs, newest first."""
    q = select(RUNS).order_by(RUNS.c.ts.desc(), RUNS.c.id.desc())
    if limit is not None:
        q = q.limit(limit)
    return [dict(r) for r in conn.execute(q).mappings()]
