"""Row-level reads and writes for sessions, episodes and turns.

Plain functions over a ``Connection`` using SQLAlchemy Core on the SQLModel
tables: the hot path (hundreds of turns per batch) stays cheap, and the SQL is
portable to PostgreSQL. Rows come back as dicts with public field names.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, and_, delete, func, insert, or_, select, update

from memviewer.store.tables import Episode, Session, Turn
from memviewer.timeutil import iso

S = Session.__table__
E = Episode.__table__
T = Turn.__table__


# -- sessions --------------------------------------------------------------
def get_session(conn: Connection, session_id: str) -> dict[str, Any] | None:
    row = conn.execute(select(S).where(S.c.id == session_id)).mappings().first()
    return dict(row) if row else None


def insert_session(conn: Connection, values: dict[str, Any]) -> None:
    conn.execute(insert(S).values(**values))


def update_session(conn: Connection, session_id: str, **values: Any) -> None:
    conn.execute(update(S).where(S.c.id == session_id).values(**values))


def session_filters(
    scope: str | None = None, scope_id: str | None = None, text_filter: str | None = None
) -> list[Any]:
    conds: list[Any] = []
    if scope:
        conds.append(S.c.scope == scope)
    if scope_id:
        conds.append(S.c.scope_id == scope_id)
    if text_filter:
        # A substring match: % and _ in what the user typed are literal, not LIKE wildcards.
        escaped = text_filter.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        like = f"%{escaped}%"
        conds.append(
            or_(
                func.lower(S.c.title).like(like, escape="\\"),
                func.lower(S.c.agent).like(like, escape="\\"),
                func.lower(S.c.id).like(like, escape="\\"),
                func.lower(S.c.scope_id).like(like, escape="\\"),
            )
        )
    return conds


def _turn_count(archived: bool) -> Any:
    return (
        select(func.count())
        .where(and_(T.c.session_id == S.c.id, T.c.archived.is_(archived)))
        .scalar_subquery()
    )


# Text sorts ignore case (people read "alpha" next to "Alpha"); counts are correlated
# subqueries on the (session_id, ...) indexes, computed only for the page's ordering.
SORT_COLUMNS = {
    "last_seen": S.c.last_seen_at,
    "started": S.c.started_at,
    "title": func.lower(func.coalesce(S.c.title, "")),
    "agent": func.lower(func.coalesce(S.c.agent, "")),
    "scope": func.lower(func.coalesce(S.c.scope_id, "")),
    "status": S.c.status,
    "episodes": select(func.count()).where(E.c.session_id == S.c.id).scalar_subquery(),
    "active": _turn_count(False),
    "archived": _turn_count(True),
}


def list_sessions(
    conn: Connection,
    *,
    scope: str | None = None,
    scope_id: str | None = None,
    text_filter: str | None = None,
    sort: str = "last_seen",
    descending: bool = True,
    limit: int | None = None,
    offset: int = 0,
) -> list[dict[str, Any]]:
    col = SORT_COLUMNS.get(sort, S.c.last_seen_at)
    q = select(S)
    conds = session_filters(scope, scope_id, text_filter)
    if conds:
        q = q.where(and_(*conds))
    q = q.order_by(col.desc() if descending else col.asc(), S.c.id.desc())
    if limit is not None:
        q = q.limit(limit).offset(offset)
    return [dict(r) for r in conn.execute(q).mappings().all()]


def count_sessions(
    conn: Connection,
    scope: str | None = None,
    scope_id: str | None = None,
    text_filter: str | None = None,
) -> int:
    q = select(func.count()).select_from(S)
    conds = session_filters(scope, scope_id, text_filter)
    if conds:
        q = q.where(and_(*conds))
    return int(conn.execute(q).scalar() or 0)


def existing_session_ids(conn: Connection, ids: Sequence[str]) -> set[str]:
    """Which of ``ids`` name a stored session (500 per statement)."""
    found: set[str] = set()
    for i in range(0, len(ids), 500):
        chunk = list(ids[i : i + 500])
        found.update(r[0] for r in conn.execute(select(S.c.id).where(S.c.id.in_(chunk))))
    return found


def session_keys_after(
    conn: Connection, after: tuple[float, str] | None, limit: int
) -> list[tuple[float, str]]:
    """``(started_at, id)`` of the next ``limit`` sessions after the key ``after`` (None: from
    the oldest), oldest first: a keyset page, no OFFSET."""
    q = select(S.c.started_at, S.c.id).order_by(S.c.started_at, S.c.id).limit(limit)
    if after is not None:
        q = q.where(or_(S.c.started_at > after[0], and_(S.c.started_at == after[0], S.c.id > after[1])))
    return [(float(a), str(b)) for a, b in conn.execute(q)]


def session_counts(conn: Connection, session_ids: Sequence[str]) -> dict[str, dict[str, int]]:
    """Episode / active / archived turn counts for a page of sessions."""
    out = {sid: {"episodes": 0, "active_turns": 0, "archived_turns": 0} for sid in session_ids}
    if not session_ids:
        return out
    ids = list(session_ids)
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        q = (
            select(T.c.session_id, T.c.archived, func.count())
            .where(T.c.session_id.in_(chunk))
            .group_by(T.c.session_id, T.c.archived)
        )
        for sid, archived, n in conn.execute(q):
            out[sid]["archived_turns" if archived else "active_turns"] = int(n)
        q2 = select(E.c.session_id, func.count()).where(E.c.session_id.in_(chunk)).group_by(E.c.session_id)
        for sid, n in conn.execute(q2):
            out[sid]["episodes"] = int(n)
    return out


def delete_session(conn: Connection, session_id: str) -> dict[str, Any]:
    """Remove a session with its episodes and turns (the FTS5 triggers drop the keyword
    rows); returns the removed turn ids, which the vector index drops from the event."""
    turn_ids = [r[0] for r in conn.execute(select(T.c.id).where(T.c.session_id == session_id))]
    episodes = conn.execute(delete(E).where(E.c.session_id == session_id)).rowcount
    conn.execute(delete(T).where(T.c.session_id == session_id))
    conn.execute(delete(S).where(S.c.id == session_id))
    from memviewer.store import annotations  # the user's tags and notes go with it

    annotations.delete_for_session(conn, session_id)
    from memviewer.store import llm_calls  # what the model was sent in it goes too

    llm_calls.delete_for_session(conn, session_id)
    # SQLite gives a new turn max(num) + 1: after deleting the highest-numbered turns, new
    # turns reuse numbers the vector index's watermark already covers. The indexer lowers its
    # watermark to this (``Indexer``, ``session.deleted``), so they are embedded.
    max_after = int(conn.execute(select(func.max(T.c.num))).scalar() or 0)
    return {
        "turn_ids": turn_ids,
        "turns": len(turn_ids),
        "episodes": int(episodes or 0),
        "max_num_after": max_after,
    }


def sessions_by_id_or_meta_key(conn: Connection, ids: Sequence[str], meta_key: str) -> list[dict[str, Any]]:
    """Sessions whose id is one of ``ids`` or whose ``meta`` has ``meta_key`` (``id``,
    ``agent``, ``title``, ``meta``), oldest first: what ``memviewer demo --remove`` looks at
    (the caller decides on the values; this only narrows the rows)."""
    marked = S.c.meta[meta_key].as_string().is_not(None)
    cond = or_(S.c.id.in_(list(ids)), marked) if ids else marked
    q = select(S.c.id, S.c.agent, S.c.title, S.c.meta).where(cond).order_by(S.c.started_at, S.c.id)
    return [dict(r) for r in conn.execute(q).mappings()]


def open_session_ids(conn: Connection, idle_before: float) -> list[str]:
    q = select(S.c.id).where(and_(S.c.status == "open", S.c.last_seen_at < idle_before))
    return [r[0] for r in conn.execute(q)]


# -- episodes --------------------------------------------------------------
def get_episode(conn: Connection, episode_id: str) -> dict[str, Any] | None:
    row = conn.execute(select(E).where(E.c.id == episode_id)).mappings().first()
    return dict(row) if row else None


def insert_episode(conn: Connection, values: dict[str, Any]) -> None:
    conn.execute(insert(E).values(**values))


def new_episode_row(
    episode_id: str, session_id: str, started_at: float, intent: dict[str, Any], meta: dict[str, Any] | None
) -> dict[str, Any]:
    """The row of a freshly started episode (``start_episode`` and the batch fast path)."""
    return {
        "id": episode_id,
        "session_id": session_id,
        "status": "open",
        "closed_by": None,
        "started_at": started_at,
        "ended_at": None,
        "intent_kind": intent["kind"],
        "intent_confidence": intent["confidence"],
        "intent_rule": intent["rule_id"],
        "intent_source": intent["source"],
        "r_task": None,
        "meta": meta,
    }


def update_episode(conn: Connection, episode_id: str, **values: Any) -> None:
    conn.execute(update(E).where(E.c.id == episode_id).values(**values))


def session_episodes(conn: Connection, session_id: str) -> list[dict[str, Any]]:
    q = select(E).where(E.c.session_id == session_id).order_by(E.c.started_at, E.c.id)
    return [dict(r) for r in conn.execute(q).mappings().all()]


def open_episode_ids(conn: Connection, session_id: str | None = None) -> list[str]:
    q = select(E.c.id).where(E.c.status == "open")
    if session_id is not None:
        q = q.where(E.c.session_id == session_id)
    return [r[0] for r in conn.execute(q.order_by(E.c.started_at))]


# -- turns -----------------------------------------------------------------
def get_turn(conn: Connection, turn_id: str) -> dict[str, Any] | None:
    row = conn.execute(select(T).where(T.c.id == turn_id)).mappings().first()
    return dict(row) if row else None


def get_turns(conn: Connection, turn_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    ids = list(turn_ids)
    out: dict[str, dict[str, Any]] = {}
    for i in range(0, len(ids), 500):
        q = select(T).where(T.c.id.in_(ids[i : i + 500]))
        for r in conn.execute(q).mappings():
            out[r["id"]] = dict(r)
    return out


def insert_turn(conn: Connection, values: dict[str, Any]) -> None:
    conn.execute(insert(T).values(**values))


def new_session_row(session_id: str, started_at: float, **columns: Any) -> dict[str, Any]:
    """A full ``sessions`` row: ``columns`` over the defaults of a closed, unlinked session
    (bulk writers such as the paging tests and the TUI benchmark fill only what varies)."""
    row: dict[str, Any] = {
        "id": session_id,
        "agent": "",
        "scope": "agent",
        "scope_id": "",
        "title": "",
        "started_at": started_at,
        "last_seen_at": started_at,
        "closed_at": None,
        "status": "closed",
        "source": None,
        "lineage_id": None,
        "root_session_id": None,
        "thread_id": None,
        "parent_session_id": None,
        "retention": "compact",
        "active_window": 100,
        "meta": None,
    }
    unknown = set(columns) - set(row)
    if unknown:
        raise ValueError(f"not session columns: {sorted(unknown)}")
    row.update(columns)
    return row


def new_turn_row(
    turn_id: str,
    session_id: str,
    episode_id: str | None,
    idx: int,
    role: str,
    content: str,
    timestamp: float,
    *,
    tool_calls: list[Any] | None = None,
    tool_call_id: str | None = None,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The row of a freshly added (active, non-summary) turn."""
    return {
        "id": turn_id,
        "session_id": session_id,
        "episode_id": episode_id,
        "idx": idx,
        "role": role,
        "content": content,
        "timestamp": timestamp,
        "archived": False,
        "is_compaction_summary": False,
        "replaced_count": 0,
        "tool_calls": tool_calls,
        "tool_call_id": tool_call_id,
        "meta": meta,
    }


def update_turn(conn: Connection, turn_id: str, **values: Any) -> None:
    conn.execute(update(T).where(T.c.id == turn_id).values(**values))


def insert_turns(conn: Connection, rows: list[dict[str, Any]]) -> None:
    if rows:
        conn.execute(insert(T), rows)


def next_index(conn: Connection, session_id: str) -> int:
    value = conn.execute(select(func.max(T.c.idx)).where(T.c.session_id == session_id)).scalar()
    return 0 if value is None else int(value) + 1


def session_turns(
    conn: Connection,
    session_id: str,
    *,
    archived: bool | None = None,
    start: int | None = None,
    end: int | None = None,
    limit: int | None = None,
    newest_first: bool = False,
) -> list[dict[str, Any]]:
    q = select(T).where(T.c.session_id == session_id)
    if archived is not None:
        q = q.where(T.c.archived == archived)
    if start is not None:
        q = q.where(T.c.idx >= start)
    if end is not None:
        q = q.where(T.c.idx <= end)
    q = q.order_by(T.c.idx.desc() if newest_first else T.c.idx.asc())
    if limit is not None:
        q = q.limit(limit)
    return [dict(r) for r in conn.execute(q).mappings().all()]


def active_real_turns(conn: Connection, session_id: str) -> int:
    q = (
        select(func.count())
        .select_from(T)
        .where(
            and_(
                T.c.session_id == session_id,
                T.c.archived.is_(False),
                T.c.is_compaction_summary.is_(False),
            )
        )
    )
    return int(conn.execute(q).scalar() or 0)


def turn_public(row: dict[str, Any]) -> dict[str, Any]:
    """The public shape of a turn (CLI/JSON/protocol)."""
    return {
        "turn_id": row["id"],
        "session_id": row["session_id"],
        "episode_id": row["episode_id"],
        "index": row["idx"],
        "role": row["role"],
        "content": row["content"],
        "timestamp": iso(row["timestamp"]),
        "archived": bool(row["archived"]),
        "is_compaction_summary": bool(row["is_compaction_summary"]),
        "replaced_count": int(row["replaced_count"] or 0),
        "tool_calls": row["tool_calls"],
        "tool_call_id": row["tool_call_id"],
        "metadata": row["meta"] if row["meta"] is not None else {},
    }


def episode_public(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "episode_id": row["id"],
        "session_id": row["session_id"],
        "status": row["status"],
        "closed_by": row["closed_by"],
        "started_at": iso(row["started_at"]),
        "ended_at": iso(row["ended_at"]),
        "intent": {
            "kind": row["intent_kind"],
            "confidence": row["intent_confidence"],
            "rule_id": row["intent_rule"],
            "source": row["intent_source"],
        },
        "r_task": row["r_task"],
        "meta": row["meta"] or {},
    }


LINEAGE_KEYS = ("lineage_id", "root_session_id", "thread_id")


def session_public(row: dict[str, Any], counts: dict[str, int] | None = None) -> dict[str, Any]:
    out = {
        "session_id": row["id"],
        "agent": row["agent"],
        "scope": row["scope"],
        "scope_id": row["scope_id"],
        "title": row["title"],
        "status": row["status"],
        "source": row["source"],
        "started_at": iso(row["started_at"]),
        "last_seen_at": iso(row["last_seen_at"]),
        "closed_at": iso(row["closed_at"]),
        "retention": row["retention"],
        "active_window": row["active_window"],
        "lineage_id": row["lineage_id"],
        "root_session_id": row["root_session_id"],
        "thread_id": row["thread_id"],
        "parent_session_id": row["parent_session_id"],
        "meta": row["meta"] or {},
    }
    if counts is not None:
        out.update(counts)
    return out


def turn_meta_fields(
    conn: Connection, turn_ids: Sequence[str], keys: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """``{turn id: {key: value}}`` of the given top-level metadata keys, for turns that have any
    (recall reads the author's name this way without loading whole rows)."""
    out: dict[str, dict[str, Any]] = {}
    ids = list(turn_ids)
    cols = [func.json_extract(T.c.meta, f"$.{k}").label(k) for k in keys]
    for i in range(0, len(ids), 500):
        q = select(T.c.id, *cols).where(T.c.id.in_(ids[i : i + 500]), T.c.meta.is_not(None))
        for row in conn.execute(q):
            values = {k: v for k, v in zip(keys, row[1:], strict=True) if v is not None}
            if values:
                out[row[0]] = values
    return out


def turn_positions(conn: Connection, turn_ids: Sequence[str]) -> dict[str, tuple[str, int]]:
    """``{turn id: (session id, idx)}``: where each turn sits, for scoring it with its neighbours."""
    out: dict[str, tuple[str, int]] = {}
    ids = list(turn_ids)
    for i in range(0, len(ids), 500):
        q = select(T.c.id, T.c.session_id, T.c.idx).where(T.c.id.in_(ids[i : i + 500]))
        for tid, sid, idx in conn.execute(q):
            out[tid] = (sid, int(idx))
    return out
