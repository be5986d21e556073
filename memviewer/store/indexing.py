"""The reads the vector indexer runs on SQLite (``memviewer.index``), in one place.

The indexer embeds turns by ``num`` (it only grows, so the watermark is one range scan),
re-reads the turns of a session when an event says they changed, and summarises whole
sessions. Every turn it embeds is read in one shape (``TURN_COLUMNS``: the turn with its
session's scope), so a turn reconciled or healed is embedded exactly as a new one.
Counts and sets of what the index should hold live in ``store/index_progress.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Select, func, select, text

from memviewer.store.tables import Session, Turn

T = Turn.__table__
S = Session.__table__

TurnRow = dict[str, Any]


def _turn_query() -> Select[Any]:
    """Turns in the indexer's row shape: the turn's fields and its session's scope."""
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


def _rows(conn: Connection, q: Select[Any]) -> list[TurnRow]:
    return [dict(r) for r in conn.execute(q).mappings()]


def turn_count(conn: Connection) -> int:
    """Every turn in SQLite (status, doctor)."""
    return int(conn.execute(select(func.count()).select_from(T)).scalar() or 0)


def sessions_with_turns_count(conn: Connection) -> int:
    """Sessions that have a turn: each should have one summary (doctor's duplicate check)."""
    return int(conn.execute(select(func.count(func.distinct(T.c.session_id)))).scalar() or 0)


def session_ids_with_turns(conn: Connection) -> list[str]:
    """Every session that has a turn (a new summarizer version rewrites all their summaries)."""
    return [sid for (sid,) in conn.execute(select(T.c.session_id).distinct())]


def newest_num_and_seq(conn: Connection) -> tuple[int, int]:
    """``MAX(turns.num)`` and ``MAX(events.seq)``: what a watermark must reach to cover every commit."""
    num = int(conn.execute(select(func.max(T.c.num))).scalar() or 0)
    seq = int(conn.execute(text("SELECT COALESCE(MAX(seq), 0) FROM events")).scalar() or 0)
    return num, seq


def turns_above(conn: Connection, num: int, limit: int) -> list[TurnRow]:
    """The first ``limit`` turns above the watermark ``num``, in ``num`` order (a read batch)."""
    return _rows(conn, _turn_query().where(T.c.num > int(num)).order_by(T.c.num).limit(limit))


def turns_by_id(conn: Connection, ids: Sequence[str]) -> list[TurnRow]:
    """These turns, in ``num`` order (the ones an integrity check found missing)."""
    return _rows(conn, _turn_query().where(T.c.id.in_(list(ids))).order_by(T.c.num))


def session_turns_by_id(
    conn: Connection, session_id: str, ids: Sequence[str], watermark: int
) -> list[TurnRow]:
    """These turns of one session, those up to the watermark (a compaction's archived turns)."""
    q = _turn_query().where(T.c.session_id == session_id, T.c.id.in_(list(ids)), T.c.num <= watermark)
    return _rows(conn, q)


def session_turns_page(
    conn: Connection, session_id: str, after: int, watermark: int, limit: int
) -> list[TurnRow]:
    """One page of a session's turns with ``after < num <= watermark``, in ``num`` order."""
    q = (
        _turn_query()
        .where(T.c.session_id == session_id, T.c.num > after, T.c.num <= watermark)
        .order_by(T.c.num)
        .limit(limit)
    )
    return _rows(conn, q)


def known_session_turn_ids(conn: Connection, session_id: str, watermark: int, ids: Sequence[str]) -> set[str]:
    """Which of ``ids`` are still turns of the session up to the watermark (the rest are stale)."""
    q = select(T.c.id).where(T.c.session_id == session_id, T.c.num <= watermark, T.c.id.in_(list(ids)))
    return set(conn.execute(q).scalars())


def turn_counts(conn: Connection, session_ids: Sequence[str]) -> dict[str, int]:
    """Turns per session, for these sessions (a session with none is left out)."""
    q = (
        select(T.c.session_id, func.count())
        .where(T.c.session_id.in_(list(session_ids)))
        .group_by(T.c.session_id)
    )
    return {str(sid): int(n) for sid, n in conn.execute(q).all()}


def session_heads(conn: Connection, session_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``id``, ``scope``, ``scope_id`` and ``title`` of these sessions, by id (missing ones left out)."""
    q = select(S.c.id, S.c.scope, S.c.scope_id, S.c.title).where(S.c.id.in_(list(session_ids)))
    return {r["id"]: dict(r) for r in conn.execute(q).mappings()}


def summary_input(conn: Connection, session_id: str, max_chars: int) -> list[dict[str, Any]]:
    """A session's turns as the summarizer reads them, in order, each cut to ``max_chars``.

    The summarizer's work grows with the whole text, and a summary of a 20 MB message needs
    no more than its start; ``meta`` carries a turn's author (``metadata.speaker``), which
    shapes a chat's summary and windows.
    """
    q = (
        select(
            T.c.role,
            func.substr(T.c.content, 1, max_chars).label("content"),
            T.c.timestamp,
            T.c.is_compaction_summary,
            T.c.meta,
        )
        .where(T.c.session_id == session_id)
        .order_by(T.c.idx)
    )
    return [dict(r) for r in conn.execute(q).mappings()]
