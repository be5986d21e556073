"""The two date-window statements of hierarchical recall (``memviewer.recall.hierarchical``).

A query that names a date ("what did we decide last Tuesday") gives Stage 1 the sessions
that have a turn inside the window, and each candidate session a closeness to it. Both read
the (session, timestamp) index only.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, and_, case, exists, func, select

from memviewer.store.tables import Session, Turn


def sessions_in(
    conn: Connection,
    start: float,
    end: float,
    *,
    horizon: float,
    scope: str | None,
    scope_id: str | None,
    limit: int,
) -> list[str]:
    """Ids of sessions of the scope with a turn in [start, end], those ending nearest it first.

    Only sessions whose last turn is at most ``horizon`` seconds after ``end`` are walked. The
    session span only narrows the search (indexed); the turn decides, because a long-lived
    session overlaps every window without being about any of them.
    """
    s, t = Session.__table__.c, Turn.__table__.c
    # Walk last_seen_at upwards from the window's start: the first sessions met are the
    # ones around it. The scope tests go through coalesce() so that a planner without
    # statistics does not pick the (unselective) scope index and sort the whole scope.
    q = (
        select(s.id)
        .where(
            s.last_seen_at.between(start, end + horizon),
            s.started_at <= end,
            exists().where(and_(t.session_id == s.id, t.timestamp >= start, t.timestamp <= end)),
        )
        .order_by(s.last_seen_at.asc())
        .limit(limit)
    )
    if scope:
        q = q.where(func.coalesce(s.scope, "") == scope)
    if scope_id:
        q = q.where(func.coalesce(s.scope_id, "") == scope_id)
    return [r[0] for r in conn.execute(q)]


def turn_time_bounds(
    conn: Connection, ids: Sequence[str], start: float, end: float, lo: float, hi: float
) -> list[tuple[str, int, float | None, float | None]]:
    """Per session among ``ids``, over its turns stamped in [lo, hi]: (session id, turns inside
    [start, end], latest timestamp before ``start``, earliest after ``end``)."""
    if not ids:
        return []
    t = Turn.__table__.c
    ts = t.timestamp
    q = (
        select(
            t.session_id,
            func.sum(case((ts.between(start, end), 1), else_=0)),
            func.max(case((ts < start, ts), else_=None)),
            func.min(case((ts > end, ts), else_=None)),
        )
        .where(t.session_id.in_(ids), ts.between(lo, hi))
        .group_by(t.session_id)
    )
    return [(str(sid), int(inside or 0), before, after) for sid, inside, before, after in conn.execute(q)]
