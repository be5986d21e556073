"""The queries of an import: a chunked import's (``session.chunked_import``) page of a
session's turn ids, the removals of what a re-imported file no longer holds (both import
paths), and where a session's stored history came from (``session.importcheck``: its last
``session.imported`` event, and the turns published live since)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.engine import Connection

from memviewer.store.repos import E, T
from memviewer.store.tables import Event

EV = Event.__table__


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


def last_import_payload(conn: Connection, session_id: str) -> tuple[bool, Any]:
    """``(imported, payload)``: whether ``session_id`` was ever imported, and the payload of
    its newest ``session.imported`` event (None when it was never imported)."""
    row = conn.execute(
        select(EV.c.payload)
        .where(EV.c.session_id == session_id, EV.c.kind == "session.imported")
        .order_by(EV.c.seq.desc())
        .limit(1)
    ).first()
    return (False, None) if row is None else (True, row[0])


def turns_added_since_import(conn: Connection, session_id: str) -> int:
    """``episode.turn_added`` events of ``session_id`` after its newest ``session.imported``
    event; 0 when it was never imported."""
    last = conn.execute(
        select(func.max(EV.c.seq)).where(EV.c.session_id == session_id, EV.c.kind == "session.imported")
    ).scalar()
    if last is None:
        return 0
    return int(
        conn.execute(
            select(func.count())
            .select_from(EV)
            .where(EV.c.session_id == session_id, EV.c.kind == "episode.turn_added", EV.c.seq > last)
        ).scalar()
        or 0
    )
