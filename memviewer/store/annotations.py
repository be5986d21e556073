"""Tags and notes on sessions and turns: the user's own labels, kept in the home.

Two SQLModel tables, created by migration 7: ``annotation_tags`` (one row per target and
tag) and ``annotation_notes`` (at most one note per target). A target is a session or a
turn, named by its public id; every row also carries the session it belongs to, so
deleting a session (``repos.delete_session``) deletes its annotations in the same
transaction. Annotations are not memory: recall never reads them and writing them
appends no event. Checking values (lower-cased tags, note length) is
``memviewer.annotations``' job; this module only holds the SQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, and_, delete, func, insert, or_, select, update
from sqlmodel import Field

from memviewer.store.tables import Session, Turn, _Table

S = Session.__table__
T = Turn.__table__


class AnnotationTag(_Table, table=True):
    __tablename__ = "annotation_tags"

    target_id: str = Field(primary_key=True)
    tag: str = Field(primary_key=True, index=True)
    target_kind: str  # session | turn
    session_id: str = Field(index=True)
    created_at: float


class AnnotationNote(_Table, table=True):
    __tablename__ = "annotation_notes"

    target_id: str = Field(primary_key=True)
    target_kind: str  # session | turn
    session_id: str = Field(index=True)
    text: str
    created_at: float
    updated_at: float


TAGS = AnnotationTag.__table__
NOTES = AnnotationNote.__table__
_CHUNK = 500


def create(conn: Connection) -> None:
    """Migration 7 (these columns are frozen: change them only with a new migration)."""
    TAGS.create(conn, checkfirst=True)
    NOTES.create(conn, checkfirst=True)


def find_target(conn: Connection, target_id: str) -> tuple[str, str, int | None] | None:
    """``(kind, session id, turn index)`` of a session or turn id; None when neither exists."""
    if conn.execute(select(S.c.id).where(S.c.id == target_id)).first() is not None:
        return "session", target_id, None
    row = conn.execute(select(T.c.session_id, T.c.idx).where(T.c.id == target_id)).first()
    if row is not None:
        return "turn", str(row[0]), int(row[1])
    return None


def add_tags(
    conn: Connection, kind: str, target_id: str, session_id: str, tags: Sequence[str], now: float
) -> list[str]:
    """Add ``tags`` (already checked); returns those that were not there yet."""
    have = {r[0] for r in conn.execute(select(TAGS.c.tag).where(TAGS.c.target_id == target_id))}
    added = [t for t in dict.fromkeys(tags) if t not in have]
    for tag in added:
        conn.execute(
            insert(TAGS).values(
                target_id=target_id, tag=tag, target_kind=kind, session_id=session_id, created_at=now
            )
        )
    return added


def remove_tags(conn: Connection, target_id: str, tags: Sequence[str]) -> list[str]:
    """Remove ``tags`` from a target; returns those it had."""
    removed = []
    for tag in dict.fromkeys(tags):
        if conn.execute(delete(TAGS).where(TAGS.c.target_id == target_id, TAGS.c.tag == tag)).rowcount:
            removed.append(tag)
    return removed


def set_note(conn: Connection, kind: str, target_id: str, session_id: str, text: str, now: float) -> None:
    done = conn.execute(
        update(NOTES).where(NOTES.c.target_id == target_id).values(text=text, updated_at=now)
    ).rowcount
    if not done:
        conn.execute(
            insert(NOTES).values(
                target_id=target_id,
                target_kind=kind,
                session_id=session_id,
                text=text,
                created_at=now,
                updated_at=now,
            )
        )


def remove_note(conn: Connection, target_id: str) -> bool:
    return bool(conn.execute(delete(NOTES).where(NOTES.c.target_id == target_id)).rowcount)


def delete_for_session(conn: Connection, session_id: str) -> int:
    """Drop a session's annotations and its turns' (the session is being deleted)."""
    n = conn.execute(delete(TAGS).where(TAGS.c.session_id == session_id)).rowcount or 0
    return int(n) + int(conn.execute(delete(NOTES).where(NOTES.c.session_id == session_id)).rowcount or 0)


def delete_orphans(conn: Connection, session_id: str) -> int:
    """Drop annotations of this session's turns that no longer exist (a re-import removed them)."""
    gone = 0
    live = select(T.c.id).where(T.c.session_id == session_id)
    for table in (TAGS, NOTES):
        q = delete(table).where(
            table.c.session_id == session_id, table.c.target_kind == "turn", table.c.target_id.not_in(live)
        )
        gone += int(conn.execute(q).rowcount or 0)
    return gone


def _empty() -> dict[str, Any]:
    return {"tags": [], "note": None}


def of_targets(conn: Connection, target_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{target id: {"tags": [...], "note": str | None}}`` for the targets that have any."""
    ids = list(dict.fromkeys(target_ids))
    out: dict[str, dict[str, Any]] = {}
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        q = select(TAGS.c.target_id, TAGS.c.tag).where(TAGS.c.target_id.in_(chunk))
        for tid, tag in conn.execute(q.order_by(TAGS.c.target_id, TAGS.c.tag)):
            out.setdefault(tid, _empty())["tags"].append(tag)
        for tid, text in conn.execute(
            select(NOTES.c.target_id, NOTES.c.text).where(NOTES.c.target_id.in_(chunk))
        ):
            out.setdefault(tid, _empty())["note"] = text
    return out


def of_session(conn: Connection, session_id: str) -> dict[str, dict[str, Any]]:
    """Every annotation of a session and of its turns, by target id."""
    out: dict[str, dict[str, Any]] = {}
    q = select(TAGS.c.target_id, TAGS.c.tag).where(TAGS.c.session_id == session_id)
    for tid, tag in conn.execute(q.order_by(TAGS.c.target_id, TAGS.c.tag)):
        out.setdefault(tid, _empty())["tags"].append(tag)
    for tid, text in conn.execute(
        select(NOTES.c.target_id, NOTES.c.text).where(NOTES.c.session_id == session_id)
    ):
        out.setdefault(tid, _empty())["note"] = text
    return out


def session_summary(conn: Connection, session_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """For the sessions list: ``{sid: {"tags": session's own tags, "note": bool,
    "annotated_turns": n}}`` for the sessions that carry any annotation."""
    out: dict[str, dict[str, Any]] = {}

    def entry(sid: str) -> dict[str, Any]:
        return out.setdefault(sid, {"tags": [], "note": False, "annotated_turns": set()})

    ids = list(session_ids)
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        q = select(TAGS.c.session_id, TAGS.c.target_kind, TAGS.c.target_id, TAGS.c.tag).where(
            TAGS.c.session_id.in_(chunk)
        )
        for sid, kind, tid, tag in conn.execute(q.order_by(TAGS.c.tag)):
            if kind == "session":
                entry(sid)["tags"].append(tag)
            else:
                entry(sid)["annotated_turns"].add(tid)
        q2 = select(NOTES.c.session_id, NOTES.c.target_kind, NOTES.c.target_id).where(
            NOTES.c.session_id.in_(chunk)
        )
        for sid, kind, tid in conn.execute(q2):
            if kind == "session":
                entry(sid)["note"] = True
            else:
                entry(sid)["annotated_turns"].add(tid)
    for value in out.values():
        value["annotated_turns"] = len(value["annotated_turns"])
    return out


def listing(
    conn: Connection, *, tag: str | None = None, session_id: str | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """Annotated targets ``{target_id, target_kind, session_id, tags, note, updated_at}``,
    most recently changed first; ``tag`` keeps the targets carrying it."""
    targets: dict[str, dict[str, Any]] = {}

    def entry(tid: str, kind: str, sid: str, ts: float) -> dict[str, Any]:
        e = targets.setdefault(
            tid,
            {
                "target_id": tid,
                "target_kind": kind,
                "session_id": sid,
                "tags": [],
                "note": None,
                "updated_at": ts,
            },
        )
        e["updated_at"] = max(e["updated_at"], ts)
        return e

    tq = select(TAGS)
    nq = select(NOTES)
    if session_id is not None:
        tq = tq.where(TAGS.c.session_id == session_id)
        nq = nq.where(NOTES.c.session_id == session_id)
    if tag is not None:
        carrying = select(TAGS.c.target_id).where(TAGS.c.tag == tag)
        tq = tq.where(TAGS.c.target_id.in_(carrying))
        nq = nq.where(NOTES.c.target_id.in_(carrying))
    for r in conn.execute(tq.order_by(TAGS.c.tag)).mappings():
        entry(r["target_id"], r["target_kind"], r["session_id"], r["created_at"])["tags"].append(r["tag"])
    for r in conn.execute(nq).mappings():
        entry(r["target_id"], r["target_kind"], r["session_id"], r["updated_at"])["note"] = r["text"]
    rows = sorted(targets.values(), key=lambda e: (-e["updated_at"], e["target_id"]))
    return rows if limit is None else rows[:limit]


def targets_with_tags(conn: Connection, tags: Sequence[str]) -> list[dict[str, Any]]:
    """Targets carrying every one of ``tags``: ``{target_id, target_kind, session_id}``."""
    if not tags:
        return []
    q = (
        select(TAGS.c.target_id, TAGS.c.target_kind, TAGS.c.session_id)
        .where(TAGS.c.tag.in_(list(dict.fromkeys(tags))))
        .group_by(TAGS.c.target_id, TAGS.c.target_kind, TAGS.c.session_id)
        .having(func.count() == len(set(tags)))
    )
    return [dict(r) for r in conn.execute(q).mappings()]


def notes_matching(conn: Connection, words: Sequence[str], limit: int) -> list[dict[str, Any]]:
    """Notes holding every word (case-insensitive substring), newest first."""
    conds = [func.lower(NOTES.c.text).contains(w.lower(), autoescape=True) for w in words if w]
    if not conds:
        return []
    q = select(NOTES).where(and_(*conds)).order_by(NOTES.c.updated_at.desc()).limit(limit)
    return [dict(r) for r in conn.execute(q).mappings()]


def tags_matching(conn: Connection, words: Sequence[str], limit: int) -> list[dict[str, Any]]:
    """Targets with a tag equal to one of ``words`` (tags are lower case)."""
    wanted = [w.lower() for w in words if w]
    if not wanted:
        return []
    q = (
        select(TAGS.c.target_id, TAGS.c.target_kind, TAGS.c.session_id, TAGS.c.tag)
        .where(or_(*[TAGS.c.tag == w for w in wanted]))
        .order_by(TAGS.c.created_at.desc())
        .limit(limit)
    )
    return [dict(r) for r in conn.execute(q).mappings()]
