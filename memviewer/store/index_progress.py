"""Reads behind "how far behind is the vector index, and does it hold what it should"
(import, doctor, stats, recall, ``memviewer.index.integrity``).

The vector index's watermark is the largest ``turns.num`` it embedded (``num`` only
grows), so the lag is one range count on the primary key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, func, select, tuple_

from memviewer.store.tables import Session, Turn

T = Turn.__table__
S = Session.__table__


def turns_after(conn: Connection, num: int) -> int:
    """How many turns have ``num`` above ``num`` (not embedded yet)."""
    return int(conn.execute(select(func.count()).select_from(T).where(T.c.num > int(num))).scalar() or 0)


def oldest_after(conn: Connection, num: int) -> float | None:
    """The timestamp of the first turn above the watermark ``num`` (the one waiting longest),
    or None when none waits. A turn's ``timestamp`` is its command's time (the publisher's
    stamp, or an imported message's own), the nearest the store keeps to when it was stored."""
    q = select(T.c.timestamp).where(T.c.num > int(num)).order_by(T.c.num).limit(1)
    ts = conn.execute(q).scalar()
    return float(ts) if ts is not None else None


def active_since(conn: Connection, ids: Sequence[str], since: float) -> set[str]:
    """Which of the sessions ``ids`` were last active (``last_seen_at``) at ``since`` or later."""
    out: set[str] = set()
    ids = list(ids)
    for i in range(0, len(ids), 500):
        q = select(S.c.id).where(S.c.id.in_(ids[i : i + 500]), S.c.last_seen_at >= float(since))
        out.update(r for (r,) in conn.execute(q))
    return out


def active_with_turns_through(conn: Connection, num: int, since: float) -> int:
    """Sessions with a turn up to the watermark ``num`` that were last active at ``since``
    or later (the quick integrity check's count of summaries that may still be in flight)."""
    q = (
        select(func.count(func.distinct(T.c.session_id)))
        .select_from(T.join(S, S.c.id == T.c.session_id))
        .where(T.c.num <= int(num), S.c.last_seen_at >= float(since))
    )
    return int(conn.execute(q).scalar() or 0)


def turns_at(conn: Connection, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], dict[str, Any]]:
    """The turns at (session_id, idx), with their ``num``; missing keys are left out."""
    if not keys:
        return {}
    rows = conn.execute(select(T).where(tuple_(T.c.session_id, T.c.idx).in_(list(keys)))).mappings()
    return {(r["session_id"], int(r["idx"])): dict(r) for r in rows}


# -- what the vector index should hold (memviewer.index.integrity) ---------------------------


def turns_through(conn: Connection, num: int) -> int:
    """How many turns have ``num`` up to ``num``: the rows an index with that watermark holds."""
    return int(conn.execute(select(func.count()).select_from(T).where(T.c.num <= int(num))).scalar() or 0)


def turn_ids_through(conn: Connection, num: int) -> set[str]:
    """The ids of the turns up to the watermark ``num`` (the exact integrity check)."""
    return {r for (r,) in conn.execute(select(T.c.id).where(T.c.num <= int(num)))}


def sessions_with_turns_through(conn: Connection, num: int) -> int:
    """Sessions with a turn up to the watermark: each has a summary once its pass finished."""
    q = select(func.count(func.distinct(T.c.session_id))).where(T.c.num <= int(num))
    return int(conn.execute(q).scalar() or 0)


def session_ids_with_turns_through(conn: Connection, num: int) -> set[str]:
    return {r for (r,) in conn.execute(select(T.c.session_id).where(T.c.num <= int(num)).distinct())}


def session_count(conn: Connection) -> int:
    """Every session row (a summary of a session with no turn left is not foreign)."""
    return int(conn.execute(select(func.count()).select_from(S)).scalar() or 0)


def session_ids(conn: Connection) -> set[str]:
    return {r for (r,) in conn.execute(select(S.c.id))}


#: Events after which SQLite holds fewer turns or sessions than the index until the indexer
#: has applied them (a deleted session, a re-import that removed turns).
REMOVING_EVENTS = ("session.deleted", "session.imported")


def heads(conn: Connection) -> tuple[int, int]:
    """``MAX(turns.num)`` and the last event that may remove rows (``REMOVING_EVENTS``).

    Other events (a recall logged, a turn added) never make the index hold more than
    SQLite, so they do not unsettle the "ahead" comparison.
    """
    from memviewer.store.tables import Event

    E = Event.__table__
    num = int(conn.execute(select(func.max(T.c.num))).scalar() or 0)
    seq = int(conn.execute(select(func.max(E.c.seq)).where(E.c.kind.in_(REMOVING_EVENTS))).scalar() or 0)
    return num, seq
