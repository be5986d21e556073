"""LLM calls: what each chat request sent the model and what came back (migration 9).

Two tables. ``llm_calls`` holds one row per call (session, episode, time, model, token
usage, latency, the recall ids it followed) with its input and output as lists of message
hashes; ``llm_messages`` holds each distinct message once, keyed by the sha256 (128 bits)
of its canonical JSON. Consecutive calls of one conversation re-send the same history, so a call
costs one row plus ~70 bytes per message it repeats, not the history again.

Input that is not a list of messages is kept verbatim in ``raw_input`` / ``raw_output``
with a problem named in ``problems``: nothing a sender sent is dropped.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    Connection,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    delete,
    func,
    insert,
    select,
)

metadata = MetaData()

CALLS = Table(
    "llm_calls",
    metadata,
    Column("num", Integer, primary_key=True, autoincrement=True),
    Column("id", String, nullable=False, unique=True, index=True),
    Column("session_id", String, index=True),
    Column("episode_id", String),
    Column("ts", Float, nullable=False, index=True),
    Column("source", String, nullable=False),
    Column("model", String),
    Column("provider", String),
    Column("input_tokens", Integer),
    Column("output_tokens", Integer),
    Column("latency_ms", Float),
    Column("context_window", Integer),
    Column("recall_ids", JSON),
    Column("in_prompt", JSON),  # ids the sender says it put in the prompt (turns, documents)
    Column("input", JSON),  # message hashes, in order
    Column("output", JSON),
    Column("raw_input", Text),  # as received, when it was not a list of messages
    Column("raw_output", Text),
    Column("problems", JSON),
    Column("meta", JSON),
)
MESSAGES = Table(
    "llm_messages",
    metadata,
    Column("hash", String, primary_key=True),
    Column("role", String, nullable=False),
    Column("body", Text, nullable=False),  # the message's canonical JSON
)

_CALL_COLS = tuple(c.name for c in CALLS.columns if c.name != "num")


def create(conn: Connection) -> None:
    """Migration 9 (the column set above is frozen: change it only with a new migration)."""
    metadata.create_all(conn)


def canonical(message: Any) -> str:
    return json.dumps(message, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)


def message_hash(body: str) -> str:
    """The first 128 bits of sha256 in hex: collision-safe for any store, and the hash list a
    call keeps costs half what the whole digest would (it is most of a call's row)."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:32]


def _message_rows(messages: Iterable[Any]) -> tuple[list[str], dict[str, tuple[str, str, str]]]:
    """Each message's hash in order, and each distinct message once as ``(hash, role, body)``."""
    hashes: list[str] = []
    rows: dict[str, tuple[str, str, str]] = {}
    for m in messages:
        body = canonical(m)
        h = message_hash(body)
        hashes.append(h)
        if h not in rows:
            role = m.get("role") if isinstance(m, dict) else None
            rows[h] = (h, str(role or ""), body)
    return hashes, rows


def _store_messages(conn: Connection, messages: Iterable[Any]) -> list[str]:
    """Each message once (content-addressed); returns their hashes in order."""
    hashes, distinct = _message_rows(messages)
    rows = {h: {"hash": h, "role": role, "body": body} for h, role, body in distinct.values()}
    if rows:
        have: set[str] = set()
        keys = list(rows)
        for i in range(0, len(keys), 500):
            have.update(
                r[0]
                for r in conn.execute(select(MESSAGES.c.hash).where(MESSAGES.c.hash.in_(keys[i : i + 500])))
            )
        fresh = [v for k, v in rows.items() if k not in have]
        if fresh:
            conn.execute(insert(MESSAGES), fresh)
    return hashes


def get(conn: Connection, call_id: str) -> dict[str, Any] | None:
    row = conn.execute(select(CALLS).where(CALLS.c.id == call_id)).mappings().first()
    return dict(row) if row else None


def write(conn: Connection, values: dict[str, Any]) -> bool:
    """One call; ``values["input"]`` / ``["output"]`` are message lists (or None). False when
    the id is stored already (a replay: nothing written)."""
    if conn.execute(select(CALLS.c.num).where(CALLS.c.id == values["id"])).first() is not None:
        return False
    row = {c: values.get(c) for c in _CALL_COLS}
    for side in ("input", "output"):
        msgs = values.get(side)
        row[side] = _store_messages(conn, msgs) if isinstance(msgs, list) else None
    conn.execute(insert(CALLS).values(**row))
    return True


_JSON_COLS = frozenset(c.name for c in CALLS.columns if isinstance(c.type, JSON))
_INSERT_RAW = f"INSERT INTO llm_calls ({', '.join(_CALL_COLS)}) VALUES ({', '.join('?' for _ in _CALL_COLS)})"


def _raw_messages(raw: sqlite3.Connection, messages: Iterable[Any]) -> list[str]:
    """``_store_messages`` in prepared statements (the SQLite batch fast path)."""
    hashes, rows = _message_rows(messages)
    keys = list(rows)
    for i in range(0, len(keys), 500):
        chunk = keys[i : i + 500]
        marks = ", ".join("?" for _ in chunk)
        for (h,) in raw.execute(f"SELECT hash FROM llm_messages WHERE hash IN ({marks})", chunk):
            rows.pop(h, None)
    if rows:
        raw.executemany("INSERT INTO llm_messages (hash, role, body) VALUES (?, ?, ?)", list(rows.values()))
    return hashes


def write_raw(raw: sqlite3.Connection, values: dict[str, Any]) -> bool:
    """``write`` on SQLite's driver connection: the same rows (JSON columns as SQLAlchemy's
    ``JSON`` writes them), without building SQLAlchemy statements (the OTLP writer's hot path)."""
    if raw.execute("SELECT 1 FROM llm_calls WHERE id = ?", (values["id"],)).fetchone() is not None:
        return False
    row = {c: values.get(c) for c in _CALL_COLS}
    for side in ("input", "output"):
        msgs = values.get(side)
        row[side] = _raw_messages(raw, msgs) if isinstance(msgs, list) else None
    raw.execute(_INSERT_RAW, [json.dumps(row[c]) if c in _JSON_COLS else row[c] for c in _CALL_COLS])
    return True


def messages(conn: Connection, hashes: Iterable[str]) -> dict[str, Any]:
    """``{hash: message}`` for the hashes given (the parsed canonical JSON)."""
    keys = list(dict.fromkeys(hashes))
    out: dict[str, Any] = {}
    for i in range(0, len(keys), 500):
        q = select(MESSAGES.c.hash, MESSAGES.c.body).where(MESSAGES.c.hash.in_(keys[i : i + 500]))
        for h, body in conn.execute(q):
            out[h] = json.loads(body)
    return out


def expand(conn: Connection, row: dict[str, Any]) -> dict[str, Any]:
    """The row with ``input`` / ``output`` as message lists again."""
    out = dict(row)
    hashes = [*(row.get("input") or []), *(row.get("output") or [])]
    found = messages(conn, hashes)
    for side in ("input", "output"):
        if row.get(side) is not None:
            out[side] = [found.get(h) for h in row[side]]
            out[side + "_hashes"] = list(row[side])
    return out


def list_calls(
    conn: Connection, *, session_id: str | None = None, limit: int = 100, offset: int = 0
) -> tuple[int, list[dict[str, Any]]]:
    """``(total, page)`` in call order (time, then arrival)."""
    q = select(CALLS).order_by(CALLS.c.ts, CALLS.c.num)
    c = select(func.count()).select_from(CALLS)
    if session_id is not None:
        q, c = q.where(CALLS.c.session_id == session_id), c.where(CALLS.c.session_id == session_id)
    total = int(conn.execute(c).scalar() or 0)
    return total, [dict(r) for r in conn.execute(q.limit(limit).offset(offset)).mappings()]


def session_calls(conn: Connection, session_id: str) -> list[dict[str, Any]]:
    q = select(CALLS).where(CALLS.c.session_id == session_id).order_by(CALLS.c.ts, CALLS.c.num)
    return [dict(r) for r in conn.execute(q).mappings()]


def previous(conn: Connection, row: dict[str, Any]) -> dict[str, Any] | None:
    """The call before ``row`` in its session (None for the first, or without a session)."""
    if row.get("session_id") is None:
        return None
    q = (
        select(CALLS)
        .where(CALLS.c.session_id == row["session_id"], CALLS.c.num != row["num"])
        .where((CALLS.c.ts < row["ts"]) | ((CALLS.c.ts == row["ts"]) & (CALLS.c.num < row["num"])))
        .order_by(CALLS.c.ts.desc(), CALLS.c.num.desc())
        .limit(1)
    )
    found = conn.execute(q).mappings().first()
    return dict(found) if found else None


def counts(conn: Connection) -> dict[str, int]:
    calls = int(conn.execute(select(func.count()).select_from(CALLS)).scalar() or 0)
    msgs = int(conn.execute(select(func.count()).select_from(MESSAGES)).scalar() or 0)
    no_session = int(
        conn.execute(select(func.count()).select_from(CALLS).where(CALLS.c.session_id.is_(None))).scalar()
        or 0
    )
    return {"calls": calls, "messages": msgs, "without_session": no_session}


def delete_for_session(conn: Connection, session_id: str) -> int:
    """Drop a session's calls, and the messages no other call refers to."""
    rows = session_calls(conn, session_id)
    if not rows:
        return 0
    conn.execute(delete(CALLS).where(CALLS.c.session_id == session_id))
    _drop_unreferenced(conn, {h for r in rows for side in ("input", "output") for h in (r.get(side) or [])})
    return len(rows)


def _drop_unreferenced(conn: Connection, hashes: set[str]) -> None:
    for h in hashes:
        used = conn.execute(
            select(CALLS.c.num)
            .where(CALLS.c.input.cast(Text).contains(h) | CALLS.c.output.cast(Text).contains(h))
            .limit(1)
        ).first()
        if used is None:
            conn.execute(delete(MESSAGES).where(MESSAGES.c.hash == h))
