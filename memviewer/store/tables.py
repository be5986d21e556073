"""SQLModel tables (shapes in docs/cli.md and docs/architecture.md, "The store").

Times are epoch seconds (REAL) so they sort and compare the same on SQLite and
PostgreSQL; JSON columns keep caller metadata verbatim. ``Turn.num`` is a
stable integer key for index tables (FTS rowids); ``Turn.id`` is the public id.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import JSON, Column, Table
from sqlmodel import Field, SQLModel


class _Table(SQLModel):
    """Base of every table model: says that SQLModel's metaclass gives each a ``__table__``
    (the SQLAlchemy Core table the store's SQL is written against), for the type checker."""

    __table__: ClassVar[Table]


class Session(_Table, table=True):
    __tablename__ = "sessions"

    id: str = Field(primary_key=True)
    agent: str = Field(default="", index=True)
    scope: str = Field(default="agent", index=True)
    scope_id: str = Field(default="", index=True)
    title: str = ""
    started_at: float = Field(index=True)
    last_seen_at: float = Field(index=True)
    closed_at: float | None = None
    status: str = "open"  # open | closed | pruned
    source: str | None = None
    lineage_id: str | None = None
    root_session_id: str | None = None
    thread_id: str | None = None
    parent_session_id: str | None = None
    retention: str = "compact"  # compact | keep_all
    active_window: int = 100
    meta: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))


class Episode(_Table, table=True):
    __tablename__ = "episodes"

    id: str = Field(primary_key=True)
    session_id: str = Field(index=True)
    status: str = "open"  # open | closed
    closed_by: str | None = None  # finalized | abandoned
    started_at: float
    ended_at: float | None = None
    intent_kind: str = "unknown"
    intent_confidence: float = 0.0
    intent_rule: str = "none"
    intent_source: str = "heuristic"
    r_task: float | None = None
    meta: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))


class Turn(_Table, table=True):
    __tablename__ = "turns"

    num: int | None = Field(default=None, primary_key=True)
    id: str = Field(unique=True, index=True)
    session_id: str = Field(index=True)
    episode_id: str | None = Field(default=None, index=True)
    idx: int  # position in the session's archived+active projection
    role: str
    content: str = ""
    timestamp: float
    archived: bool = False
    is_compaction_summary: bool = False
    replaced_count: int = 0
    tool_calls: list[Any] | None = Field(default=None, sa_column=Column(JSON))
    tool_call_id: str | None = None
    meta: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))


class Event(_Table, table=True):
    __tablename__ = "events"

    seq: int = Field(primary_key=True)
    kind: str = Field(index=True)
    ts: float
    session_id: str | None = Field(default=None, index=True)
    episode_id: str | None = None
    payload: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))


TABLES = (Session, Episode, Turn, Event)


class ApiToken(_Table, table=True):
    """A bearer token for the hub's TCP listener (migration 10): only the sha256 of its
    secret is kept, so the store (or a backup of it) never holds a usable token."""

    __tablename__ = "api_tokens"

    name: str = Field(primary_key=True)
    scope: str  # publish | read | admin
    secret_sha256: str
    created_at: float
    last_used_at: float | None = None
    revoked_at: float | None = None
