"""The queries of a chunked import (``session.chunked_import``): a session's turn ids a
page at a time, and the removals of what a re-imported file no longer holds."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, or_, select, update
from sqlalchemy.engine import Connection

from memviewer.store.repos import E, T


def turn_ids_page(conn: Connection, session_id: str, after_num: int, limit: int) -> list[tuple[int, str]]:
    """``(num, id)`` of the session's turns with ``num > after_num``, oldest first."""
    q = (
        select(T.c.num, T.c.id)
        .where(T.c.session_id == session_id, T.c.num > after_num)
        .order_by(T.c.num)
        .limit(limit)
    )
    return [(int(num), str(tid)) for num, tid in conn.execute(q)]


def delete_turns(conn: Connection, turn_ids: Sequence[str]) -> None:
    for i in range(0, len(turn_ids), 500):
        conn.execute(delete(T).where(T.c.id.in_(turn_ids[i : i + 500])))


def delete_episodes(conn: Connection, episode_ids: Sequence[str]) -> None:
    for i in range(0, len(episode_ids), 500):
        conn.execute(delete(E).where(E.c.id.in_(episode_ids[i : i + 500])))


def archive_turns(conn: Connection, turn_ids: Sequence[str]) -> int:
    """Mark turns archived (a watched file no longer holds them; they are kept): the rows
    that changed."""
    changed = 0
    for i in range(0, len(turn_ids), 500):
        q = (
            update(T)
            .where(
                T.c.id.in_(turn_ids[i : i + 500]),
                or_(T.c.archived.is_(False), T.c.is_compaction_summary.is_(True)),
            )
            .values(archived=True, is_compaction_summary=False)
        )
        changed += conn.execute(q).rowcount or 0
    return changed
