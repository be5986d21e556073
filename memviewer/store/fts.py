"""The FTS5 keyword index over every turn, kept in step by SQLite triggers.

Migration 3 creates two contentless FTS5 tables keyed by ``turns.num`` (the
stable integer key), fills them from the existing turns, and installs triggers
on ``turns`` so an insert, a content update or a delete changes the index in
the same transaction: a turn is searchable the moment its write commits, and
neither the store nor the session manager knows the index exists.

Why two tables (measured in ``docs/benchmarks.md``):

* ``turns_fts`` — ``porter unicode61 remove_diacritics 2``: word-level BM25
  with stemming ("migrate" finds "migration") for every script that separates
  words with spaces. Trigram BM25 on English is both noisier ("api" matches
  "capital") and slower (each word is a phrase of several very common trigrams).
* ``turns_fts_cjk`` — ``trigram``: substring search for scripts written without
  spaces (Chinese, Japanese, Thai, …), where unicode61 would index a whole
  sentence as one token. Only turns containing such characters are indexed, so
  the table stays small on mostly-English data. Text is stored with two
  trailing spaces, so every occurrence of a one- or two-character term is the
  prefix of some indexed trigram; ``turns_fts_cjk_vocab`` (fts5vocab) turns
  such a short term into the exact set of trigrams that contain it.

Contentless tables (``content=''``) avoid a second copy of the text; the
triggers pass the old text to FTS5's ``delete`` command, which is exactly what
was indexed. On a database without FTS5 (PostgreSQL, an SQLite build without
it) or with ``MEMVIEWER_FORCE_NO_FTS=1`` the migration does nothing and keyword
search falls back to a substring scan. ``ensure()`` installs the index later
on a writable store where it is missing (e.g. the flag was dropped).
"""

from __future__ import annotations

import functools
import logging
import os
import sqlite3
from collections.abc import Mapping
from typing import Any, NamedTuple

from sqlalchemy import Connection

log = logging.getLogger("memviewer.store")

WORD_TABLE = "turns_fts"
CJK_TABLE = "turns_fts_cjk"
CJK_VOCAB = "turns_fts_cjk_vocab"
WORD_TOKENIZER = "porter unicode61 remove_diacritics 2"
FORCE_ENV = "MEMVIEWER_FORCE_NO_FTS"
PAD = "  "  # see the module docstring: short CJK terms become trigram prefixes

# Scripts written without spaces between words (plus Hangul, whose words carry
# attached particles): kana, CJK ideographs (+ extension A, compatibility and
# the supplementary planes), Hangul syllables, half-width katakana, Thai, Lao,
# Myanmar and Khmer. Both SQLite GLOB and the Python query parser use it.
NO_SPACE_RANGES = (
    ("\u3040", "\u30ff"),
    ("\u3400", "\u4dbf"),
    ("\u4e00", "\u9fff"),
    ("\uac00", "\ud7af"),
    ("\uf900", "\ufaff"),
    ("\uff66", "\uff9f"),
    ("\u0e00", "\u0eff"),
    ("\u1000", "\u109f"),
    ("\u1780", "\u17ff"),
    ("\U00020000", "\U0002ebef"),
)
NO_SPACE_CLASS = "".join(f"{a}-{b}" for a, b in NO_SPACE_RANGES)
NO_SPACE_GLOB = f"*[{NO_SPACE_CLASS}]*"

_TRIGGERS = {
    "turns_fts_ai": f"""
        CREATE TRIGGER turns_fts_ai AFTER INSERT ON turns BEGIN
          INSERT INTO {WORD_TABLE}(rowid, content) VALUES (new.num, new.content);
        END""",
    "turns_fts_ad": f"""
        CREATE TRIGGER turns_fts_ad AFTER DELETE ON turns BEGIN
          INSERT INTO {WORD_TABLE}({WORD_TABLE}, rowid, content) VALUES ('delete', old.num, old.content);
        END""",
    "turns_fts_au": f"""
        CREATE TRIGGER turns_fts_au AFTER UPDATE OF content, num ON turns BEGIN
          INSERT INTO {WORD_TABLE}({WORD_TABLE}, rowid, content) VALUES ('delete', old.num, old.content);
          INSERT INTO {WORD_TABLE}(rowid, content) VALUES (new.num, new.content);
        END""",
}
_CJK_TRIGGERS = {
    "turns_fts_cjk_ai": f"""
        CREATE TRIGGER turns_fts_cjk_ai AFTER INSERT ON turns
        WHEN new.content GLOB '{NO_SPACE_GLOB}' BEGIN
          INSERT INTO {CJK_TABLE}(rowid, content) VALUES (new.num, new.content || '{PAD}');
        END""",
    "turns_fts_cjk_ad": f"""
        CREATE TRIGGER turns_fts_cjk_ad AFTER DELETE ON turns
        WHEN old.content GLOB '{NO_SPACE_GLOB}' BEGIN
          INSERT INTO {CJK_TABLE}({CJK_TABLE}, rowid, content)
            VALUES ('delete', old.num, old.content || '{PAD}');
        END""",
    "turns_fts_cjk_aud": f"""
        CREATE TRIGGER turns_fts_cjk_aud AFTER UPDATE OF content, num ON turns
        WHEN old.content GLOB '{NO_SPACE_GLOB}' BEGIN
          INSERT INTO {CJK_TABLE}({CJK_TABLE}, rowid, content)
            VALUES ('delete', old.num, old.content || '{PAD}');
        END""",
    "turns_fts_cjk_aui": f"""
        CREATE TRIGGER turns_fts_cjk_aui AFTER UPDATE OF content, num ON turns
        WHEN new.content GLOB '{NO_SPACE_GLOB}' BEGIN
          INSERT INTO {CJK_TABLE}(rowid, content) VALUES (new.num, new.content || '{PAD}');
        END""",
}


def forced_off(env: Mapping[str, str] | None = None) -> bool:
    """True when ``MEMVIEWER_FORCE_NO_FTS`` asks for the substring-scan path."""
    value = (os.environ if env is None else env).get(FORCE_ENV, "")
    return value.strip().lower() in ("1", "true", "yes", "on")


@functools.cache
def sqlite_support() -> dict[str, Any]:
    """What this process's SQLite offers: ``{"fts5", "trigram", "version"}`` (probed once)."""
    out: dict[str, Any] = {"version": sqlite3.sqlite_version, "fts5": False, "trigram": False}
    probe = sqlite3.connect(":memory:")
    try:
        try:
            probe.execute("CREATE VIRTUAL TABLE p USING fts5(x)")
            out["fts5"] = True
            probe.execute("CREATE VIRTUAL TABLE q USING fts5(x, tokenize='trigram')")
            out["trigram"] = True
        except sqlite3.Error:
            pass
    finally:
        probe.close()
    return out


def _is_sqlite(conn: Connection) -> bool:
    return conn.dialect.name == "sqlite"


def installed(conn: Connection) -> dict[str, bool]:
    """Which index tables exist in this database: ``{"word": bool, "cjk": bool}``."""
    if not _is_sqlite(conn):
        return {"word": False, "cjk": False}
    names = {
        r[0]
        for r in conn.exec_driver_sql(
            "SELECT name FROM sqlite_master WHERE name IN (?, ?, ?)",
            (WORD_TABLE, CJK_TABLE, CJK_VOCAB),
        )
    }
    return {"word": WORD_TABLE in names, "cjk": CJK_TABLE in names and CJK_VOCAB in names}


def install(conn: Connection) -> dict[str, bool]:
    """Create the tables and triggers that are missing and backfill them.

    Runs inside the caller's transaction; returns what is installed afterwards.
    """
    if not _is_sqlite(conn):
        return {"word": False, "cjk": False}
    support = sqlite_support()
    have = installed(conn)
    if not support["fts5"]:
        log.warning("SQLite %s has no FTS5: keyword search uses a substring scan", support["version"])
        return have
    if not have["word"]:
        conn.exec_driver_sql(
            f"CREATE VIRTUAL TABLE {WORD_TABLE} USING fts5(content, content='', tokenize='{WORD_TOKENIZER}')"
        )
        _refill_word(conn)
        _attach(conn, _TRIGGERS)
    if not have["cjk"] and support["trigram"]:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {CJK_TABLE}")
        conn.exec_driver_sql(
            f"CREATE VIRTUAL TABLE {CJK_TABLE} USING fts5(content, content='', tokenize='trigram')"
        )
        conn.exec_driver_sql(f"CREATE VIRTUAL TABLE {CJK_VOCAB} USING fts5vocab({CJK_TABLE}, 'row')")
        _refill_cjk(conn)
        _attach(conn, _CJK_TRIGGERS)
    elif not support["trigram"]:
        log.warning(
            "SQLite %s has no trigram tokenizer: CJK search uses a substring scan", support["version"]
        )
    return installed(conn)


def usable(conn: Connection) -> dict[str, bool]:
    """The installed tables this SQLite build can query (a database written by a build
    with FTS5 may be opened by one without it)."""
    have, support = installed(conn), sqlite_support()
    return {"word": have["word"] and support["fts5"], "cjk": have["cjk"] and support["trigram"]}


def reconcile(conn: Connection) -> None:
    """Keep the FTS triggers in step with what this SQLite build can run.

    Opened writable by a build without FTS5 (or without the trigram tokenizer),
    the triggers would make every turn insert fail with "no such module", so
    they are dropped and keyword search scans. The next writable open by a
    build that has the module puts the triggers back and re-indexes every turn,
    so turns written in between are found again. Runs in the caller's write
    transaction (the store's open), before anything else writes.
    """
    if not _is_sqlite(conn):
        return
    support, have = sqlite_support(), installed(conn)
    triggers = {r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    for part, runnable, ddl in (
        ("word", support["fts5"], _TRIGGERS),
        ("cjk", support["trigram"], _CJK_TRIGGERS),
    ):
        if not have[part]:
            continue
        present = set(ddl) & triggers
        if not runnable and present:
            for name in present:
                conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")
            log.warning(
                "SQLite %s cannot run the %s keyword index: its triggers are detached and "
                "keyword search scans until a SQLite with FTS5 opens this database",
                support["version"],
                part,
            )
        elif runnable and present != set(ddl):
            _attach(conn, ddl)
            (_refill_word if part == "word" else _refill_cjk)(conn)
            log.info("re-attached the %s keyword index and re-indexed every turn", part)


def _attach(conn: Connection, triggers: Mapping[str, str]) -> None:
    for name, ddl in triggers.items():
        conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")
        conn.exec_driver_sql(ddl)


def _refill_word(conn: Connection) -> None:
    conn.exec_driver_sql(f"INSERT INTO {WORD_TABLE}({WORD_TABLE}) VALUES ('delete-all')")
    conn.exec_driver_sql(f"INSERT INTO {WORD_TABLE}(rowid, content) SELECT num, content FROM turns")
    conn.exec_driver_sql(f"INSERT INTO {WORD_TABLE}({WORD_TABLE}) VALUES ('optimize')")


def _refill_cjk(conn: Connection) -> None:
    conn.exec_driver_sql(f"INSERT INTO {CJK_TABLE}({CJK_TABLE}) VALUES ('delete-all')")
    conn.exec_driver_sql(
        f"INSERT INTO {CJK_TABLE}(rowid, content) SELECT num, content || '{PAD}' FROM turns "
        f"WHERE content GLOB '{NO_SPACE_GLOB}'"
    )


def rebuild(conn: Connection) -> None:
    """Re-index every turn (repair after a crash of a foreign writer, or a tokenizer change)."""
    have = usable(conn)
    if have["word"]:
        _refill_word(conn)
    if have["cjk"]:
        _refill_cjk(conn)


def counts(conn: Connection) -> dict[str, int]:
    """Rows in each index and in ``turns`` (the doctor compares them)."""
    have = installed(conn)
    out = {"turns": int(conn.exec_driver_sql("SELECT COUNT(*) FROM turns").scalar() or 0)}
    if have["word"]:
        out["word"] = int(conn.exec_driver_sql(f"SELECT COUNT(*) FROM {WORD_TABLE}_docsize").scalar() or 0)
    if have["cjk"]:
        out["cjk"] = int(conn.exec_driver_sql(f"SELECT COUNT(*) FROM {CJK_TABLE}_docsize").scalar() or 0)
    return out


#: Pages of merged index one ``merge_step`` writes at most per table (FTS5 finishes the
#: merge it is in, so a step can write more): tens of milliseconds on the writer thread.
MERGE_PAGES = 500


def segment_count(conn: Connection) -> int:
    """How many segments (b-trees) the installed indexes hold, summed.

    FTS5 looks every query term up in every segment. Turns written in many transactions
    (an import in batches, a live agent) leave tens of them; FTS5's own automerge keeps
    the count bounded, not low. At 23 segments a rare-phrase ``MATCH … ORDER BY rank``
    took 0.91 ms on the 2,000-session benchmark home, 0.23 ms once merged into one.
    """
    have = installed(conn)
    n = 0
    for table, on in ((WORD_TABLE, have["word"]), (CJK_TABLE, have["cjk"])):
        if on:
            n += int(conn.exec_driver_sql(f"SELECT COUNT(DISTINCT segid) FROM {table}_idx").scalar() or 0)
    return n


class MergeStep(NamedTuple):
    """What one ``merge_step`` did: the segments before and after, and whether FTS5 merged
    anything (a step inside one large merge can leave the count as it was)."""

    before: int
    after: int
    worked: bool


def merge_step(conn: Connection, pages: int = MERGE_PAGES, above: int = 1) -> MergeStep:
    """When the indexes hold more than ``above`` segments in all: one bounded merge of each
    index with more than one (FTS5's ``merge`` command with a negative budget: any segments
    may merge, the smallest first). The search results do not change, only how many
    b-trees a lookup visits. Runs in the caller's write transaction."""
    before = segment_count(conn)
    if before <= max(above, 1):
        return MergeStep(before, before, False)
    raw: Any = conn.connection.driver_connection  # sqlite3: its total_changes counts the merge's writes
    worked = False
    have = installed(conn)
    for table, on in ((WORD_TABLE, have["word"]), (CJK_TABLE, have["cjk"])):
        if not on:
            continue
        if int(conn.exec_driver_sql(f"SELECT COUNT(DISTINCT segid) FROM {table}_idx").scalar() or 0) > 1:
            changes = raw.total_changes
            conn.exec_driver_sql(f"INSERT INTO {table}({table}, rank) VALUES ('merge', ?)", (-int(pages),))
            worked = worked or raw.total_changes - changes > 1  # the command itself counts one
    return MergeStep(before, segment_count(conn), worked)


#: The schema version that creates the index (listed in ``memviewer.store.migrations``).
MIGRATION_VERSION = 3


def apply_migration(conn: Connection) -> None:
    """Migration 3: the FTS5 turn index (SQLite with FTS5 only; other stores scan)."""
    # Automated-session demotion reads count/min/max(timestamp) per candidate
    # session; this index answers that without touching the turn rows.
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_turns_session_ts ON turns (session_id, timestamp)")
    if not _is_sqlite(conn):
        log.info("migration 3: %s has no FTS5; keyword search will scan", conn.dialect.name)
        return
    if forced_off():
        log.info("migration 3: %s is set; FTS index not created", FORCE_ENV)
        return
    install(conn)


def ensure(store: Any) -> dict[str, bool]:
    """Install the index on a writable SQLite store where it is missing.

    Covers a database migrated while ``MEMVIEWER_FORCE_NO_FTS`` was set, or on a
    SQLite build without FTS5. Read-only stores are left alone. (A writable store
    is always migrated to the latest schema when it opens.)
    """
    if not store.is_sqlite or forced_off():
        return {"word": False, "cjk": False}
    with store.read() as conn:
        have = installed(conn)
    support = sqlite_support()
    missing = (not have["word"] and support["fts5"]) or (not have["cjk"] and support["trigram"])
    if not missing or store.readonly:
        return {"word": have["word"] and support["fts5"], "cjk": have["cjk"] and support["trigram"]}
    log.info("installing the keyword index (backfilling existing turns)")
    with store.write() as tx:
        return install(tx.conn)


def reindex(store: Any) -> dict[str, int]:
    """Rebuild the keyword index of a writable store from its turns (for ``memviewer reindex``)."""
    if not store.is_sqlite or forced_off():
        return {}
    ensure(store)
    with store.write() as tx:
        rebuild(tx.conn)
        return counts(tx.conn)
