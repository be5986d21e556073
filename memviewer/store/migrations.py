"""Schema versions and the migrations between them.

Each migration is a function run inside one transaction; ``schema_migrations``
records which ran. Version 1 is frozen here as plain SQLAlchemy tables (not the
live SQLModel classes) so a database created by an old release can always be
upgraded step by step. SQLite-only steps (FTS5) sit behind ``dialect`` checks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Connection,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    inspect,
    text,
)

from memviewer.errors import INTERNAL, MemviewerError
from memviewer.store import fts, pg_fts

log = logging.getLogger("memviewer.store")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    apply: Callable[[Connection], None]


def _v1_initial(conn: Connection) -> None:
    md = MetaData()
    Table(
        "sessions",
        md,
        Column("id", String, primary_key=True),
        Column("agent", String, nullable=False, index=True),
        Column("scope", String, nullable=False, index=True),
        Column("scope_id", String, nullable=False, index=True),
        Column("title", String, nullable=False),
        Column("started_at", Float, nullable=False, index=True),
        Column("last_seen_at", Float, nullable=False, index=True),
        Column("closed_at", Float),
        Column("status", String, nullable=False),
        Column("source", String),
        Column("lineage_id", String),
        Column("root_session_id", String),
        Column("thread_id", String),
        Column("parent_session_id", String),
        Column("meta", JSON),
    )
    Table(
        "episodes",
        md,
        Column("id", String, primary_key=True),
        Column("session_id", String, nullable=False, index=True),
        Column("status", String, nullable=False),
        Column("closed_by", String),
        Column("started_at", Float, nullable=False),
        Column("ended_at", Float),
        Column("intent_kind", String, nullable=False),
        Column("intent_confidence", Float, nullable=False),
        Column("intent_rule", String, nullable=False),
        Column("intent_source", String, nullable=False),
        Column("r_task", Float),
        Column("meta", JSON),
    )
    Table(
        "turns",
        md,
        Column("num", Integer, primary_key=True, autoincrement=True),
        Column("id", String, nullable=False, unique=True, index=True),
        Column("session_id", String, nullable=False, index=True),
        Column("episode_id", String, index=True),
        Column("idx", Integer, nullable=False),
        Column("role", String, nullable=False),
        Column("content", Text, nullable=False),
        Column("timestamp", Float, nullable=False),
        Column("archived", Boolean, nullable=False),
        Column("tool_calls", JSON),
        Column("tool_call_id", String),
        Column("meta", JSON),
    )
    Table(
        "events",
        md,
        Column("seq", Integer, primary_key=True, autoincrement=False),
        Column("kind", String, nullable=False, index=True),
        Column("ts", Float, nullable=False),
        Column("session_id", String, index=True),
        Column("episode_id", String),
        Column("payload", JSON),
    )
    md.create_all(conn)


def _v2_compaction(conn: Connection) -> None:
    """Per-session retention and flagged compaction summaries."""
    conn.execute(text("ALTER TABLE sessions ADD COLUMN retention VARCHAR NOT NULL DEFAULT 'compact'"))
    conn.execute(text("ALTER TABLE sessions ADD COLUMN active_window INTEGER NOT NULL DEFAULT 100"))
    conn.execute(text("ALTER TABLE turns ADD COLUMN is_compaction_summary BOOLEAN NOT NULL DEFAULT FALSE"))
    conn.execute(text("ALTER TABLE turns ADD COLUMN replaced_count INTEGER NOT NULL DEFAULT 0"))
    conn.execute(text("CREATE INDEX IF NOT EXISTS ix_turns_session_idx ON turns (session_id, idx)"))
    # Imported histories written by v1 with a summary-looking system message get flagged.
    rows = conn.execute(
        text("SELECT num, meta FROM turns WHERE role = 'system' AND meta IS NOT NULL")
    ).fetchall()
    import json

    for num, meta in rows:
        data = json.loads(meta) if isinstance(meta, str) else meta
        if isinstance(data, dict) and data.get("compaction") is True:
            conn.execute(
                text("UPDATE turns SET is_compaction_summary = TRUE, replaced_count = :n WHERE num = :num"),
                {"n": int(data.get("compacted_count") or 0), "num": num},
            )


def _v4_turn_lookup_indexes(conn: Connection) -> None:
    """The write path asks "active real turns of this session" on every turn."""
    conn.execute(
        text(
            "CREATE INDEX IF NOT EXISTS ix_turns_session_active "
            "ON turns (session_id, archived, is_compaction_summary)"
        )
    )


def _v6_golden(conn: Connection) -> None:
    """Golden sets and their evaluation history (``memviewer.store.golden``)."""
    from memviewer.store import golden

    golden.create(conn)


def _v7_annotations(conn: Connection) -> None:
    """Tags and notes on sessions and turns (``memviewer.store.annotations``)."""
    from memviewer.store import annotations

    annotations.create(conn)


def _v8_recall_log_bounds(conn: Connection) -> None:
    """What each recall log entry costs and who asked (``bytes``, ``cut``, ``caller``), and
    the log's counters (``memviewer.store.recall_log.COUNTERS``), frozen here as plain SQL;
    ``bytes`` of the entries already there is estimated from their stored text."""
    conn.execute(text("ALTER TABLE recall_log ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0"))
    conn.execute(text("ALTER TABLE recall_log ADD COLUMN cut JSON"))
    conn.execute(text("ALTER TABLE recall_log ADD COLUMN caller JSON"))
    conn.execute(
        text("CREATE TABLE recall_log_counters (name VARCHAR PRIMARY KEY, value BIGINT NOT NULL DEFAULT 0)")
    )
    parts = " + ".join(
        f"COALESCE(LENGTH(CAST({c} AS TEXT)), 0)" for c in ("query", "params", "results", "diagnostics")
    )
    conn.execute(text(f"UPDATE recall_log SET bytes = {parts}"))
    total = conn.execute(text("SELECT COALESCE(SUM(bytes), 0) FROM recall_log")).scalar()
    conn.execute(
        text("INSERT INTO recall_log_counters (name, value) VALUES ('bytes', :v)"), {"v": int(total or 0)}
    )


def _v9_llm_calls(conn: Connection) -> None:
    """LLM calls and their content-addressed messages (``memviewer.store.llm_calls``)."""
    from memviewer.store import llm_calls

    llm_calls.create(conn)


def _v10_api_tokens(conn: Connection) -> None:
    """The hub's hashed bearer tokens (``memviewer.store.api_tokens``)."""
    from memviewer.store import api_tokens

    api_tokens.create(conn)


def _v5_recall_log(conn: Connection) -> None:
    """The recall log (``memviewer.store.recall_log``), frozen here as plain SQLAlchemy."""
    md = MetaData()
    Table(
        "recall_log",
        md,
        Column("num", Integer, primary_key=True, autoincrement=True),
        Column("id", String, nullable=False, unique=True, index=True),
        Column("ts", Float, nullable=False, index=True),
        Column("source", String, nullable=False, index=True),
        Column("kind", String, nullable=False),
        Column("session_id", String, index=True),
        Column("episode_id", String),
        Column("query", Text, nullable=False),
        Column("params", JSON),
        Column("results", JSON),
        Column("diagnostics", JSON),
    )
    md.create_all(conn)


MIGRATIONS: list[Migration] = [
    Migration(1, "initial schema", _v1_initial),
    Migration(2, "compaction columns", _v2_compaction),
    Migration(fts.MIGRATION_VERSION, "fts5 turn index", fts.apply_migration),
    Migration(4, "turn lookup indexes", _v4_turn_lookup_indexes),
    Migration(5, "recall log", _v5_recall_log),
    Migration(6, "golden sets", _v6_golden),
    Migration(7, "tags and notes", _v7_annotations),
    Migration(8, "recall log bounds", _v8_recall_log_bounds),
    Migration(9, "llm calls", _v9_llm_calls),
    Migration(10, "api tokens", _v10_api_tokens),
    Migration(pg_fts.MIGRATION_VERSION, "postgres keyword index", pg_fts.apply_migration),
]

#: The PostgreSQL advisory lock ``migrate`` holds for its transaction ("memv" in ASCII): hubs
#: starting together on one database migrate one after the other, and each finds the versions
#: the first one applied recorded.
MIGRATION_LOCK = 0x6D656D76


def latest_version() -> int:
    return max(m.version for m in MIGRATIONS)


def _ensure_table(conn: Connection) -> None:
    conn.execute(
        text(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            "version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at FLOAT NOT NULL)"
        )
    )


def current_version(conn: Connection) -> int:
    _ensure_table(conn)
    value = conn.execute(text("SELECT MAX(version) FROM schema_migrations")).scalar()
    return int(value or 0)


class NotAStoreError(MemviewerError):
    """The database exists but is not a memviewer store; ``reason`` says why.

    The service adds the path: ``<db> is not a memviewer store (<reason>)``.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(INTERNAL, f"not a memviewer store ({reason})", data={"reason": "not_a_store"})
        self.reason = reason


def newer_schema_error(have: int) -> MemviewerError:
    return MemviewerError(
        INTERNAL,
        f"this store was written by a newer memviewer (schema {have} > {latest_version()})",
        data={
            "reason": "schema_newer",
            "hint": "upgrade memviewer to use this store; this version "
            "neither reads nor writes it, so nothing was changed",
        },
    )


def check_compatible(conn: Connection) -> int:
    """The store's schema version, after making sure this version may use it.

    Read-only (it creates nothing), so it also guards read-only opens. Raises
    ``NotAStoreError`` for a SQLite file that holds another application's
    tables and no ``schema_migrations``, and the ``schema_newer`` error for a
    store migrated by a later release: its tables may mean something this
    code does not know, so reading could mislead and writing could corrupt.
    """
    tables = set(inspect(conn).get_table_names())
    if "schema_migrations" not in tables:
        foreign = sorted(t for t in tables if not t.startswith("sqlite_"))
        # Only SQLite files are ours alone; a server database may hold other apps' tables.
        if foreign and conn.dialect.name == "sqlite":
            shown = ", ".join(foreign[:5]) + (", …" if len(foreign) > 5 else "")
            raise NotAStoreError(f"it holds other tables ({shown}) and no memviewer schema")
        return 0
    have = int(conn.execute(text("SELECT MAX(version) FROM schema_migrations")).scalar() or 0)
    if have > latest_version():
        raise newer_schema_error(have)
    return have


def migrate(conn: Connection, target: int | None = None) -> list[int]:
    """Apply pending migrations up to ``target``; return the versions applied.

    On PostgreSQL the caller's transaction first takes ``MIGRATION_LOCK``
    (``pg_advisory_xact_lock``, released at its commit or rollback): several processes
    opening one database at once wait for each other instead of creating the same tables.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK})
    check_compatible(conn)
    _ensure_table(conn)
    current_version(conn)
    # Every version not yet recorded, not only those above the highest: versions are added
    # by parallel branches and may land in any order.
    done = {int(v) for (v,) in conn.execute(text("SELECT version FROM schema_migrations"))}
    applied: list[int] = []
    for m in sorted(MIGRATIONS, key=lambda m: m.version):
        if m.version in done or (target is not None and m.version > target):
            continue
        log.info("applying migration %d (%s)", m.version, m.name)
        m.apply(conn)
        conn.execute(
            text("INSERT INTO schema_migrations (version, name, applied_at) VALUES (:v, :n, :t)"),
            {"v": m.version, "n": m.name, "t": time.time()},
        )
        applied.append(m.version)
    return applied
