"""The keyword index on PostgreSQL: a generated ``tsvector`` column with a GIN index, and
pg_trgm for scripts written without spaces (the SQLite side is ``memviewer.store.fts``).

Migration 11 adds to ``turns``:

* ``content_tsv`` — ``to_tsvector('memviewer_english', left(content, TSV_CHARS))``, a
  *generated* column: PostgreSQL computes it in the statement that writes the turn, so a
  turn is searchable the moment its transaction commits on every write path (the store's
  SQLAlchemy writes; the raw ``sqlite3`` fast paths never run here), as FTS5's triggers make
  it on SQLite. ``memviewer_english`` is ``english`` with its Snowball stemmer but without the
  stop-word list: FTS5's ``porter unicode61`` keeps every word ("the who" finds turns), and
  ``fts_query.parse`` already drops stop words from a query that has other words. A
  ``tsvector`` holds at most 1 MB, so only the first ``TSV_CHARS`` characters of a turn are
  word-indexed (a turn longer than that is rare and still found by its start).
* ``ix_turns_content_tsv`` — GIN over ``content_tsv``; queries are built with
  ``phraseto_tsquery`` per unit (a word is a one-word phrase) joined with ``||``/``&&``, and
  ranked with ``ts_rank_cd`` (normalisation 1: divided by 1 + log(length), as BM25 damps long
  turns).
* ``ix_turns_content_trgm`` — a pg_trgm GIN (``gin_trgm_ops``) over the turns that contain
  an unspaced script (the same partial rule as SQLite's ``turns_fts_cjk``), answering
  ``ILIKE '%run%'`` substring queries. Without the extension (``CREATE EXTENSION`` refused:
  no rights) the same query runs unindexed; ``status`` says so, and the answers are the same.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from memviewer.store.fts import NO_SPACE_RANGES

if TYPE_CHECKING:
    from memviewer.store.keyword_candidates import Filters, KeywordDb

log = logging.getLogger("memviewer.store")

MIGRATION_VERSION = 11
CONFIG = "memviewer_english"
DICTIONARY = "memviewer_english_stem"
TSV_COLUMN = "content_tsv"
WORD_INDEX = "ix_turns_content_tsv"
TRGM_INDEX = "ix_turns_content_trgm"
TSV_CHARS = 100_000
RANK_NORMALIZATION = 1  # ts_rank_cd: rank / (1 + log(document length))
#: A PostgreSQL regular expression matching text with an unspaced script (the characters
#: themselves, no escapes: the same ranges as ``fts.NO_SPACE_RANGES``).
NO_SPACE_REGEX = "[" + "".join(f"{a}-{b}" for a, b in NO_SPACE_RANGES) + "]"
_NO_SPACE_SQL = f"content ~ '{NO_SPACE_REGEX}'"
_SESSION_COLS = (
    "id, title, agent, started_at, last_seen_at, source, lineage_id, root_session_id, thread_id, meta"
)


def _is_pg(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


def apply_migration(conn: Connection) -> None:
    """Migration 11: the tsvector column, its GIN index and the trigram index (PostgreSQL
    only; a no-op on SQLite, whose index is FTS5's)."""
    if not _is_pg(conn):
        return
    here = "(SELECT oid FROM pg_namespace WHERE nspname = current_schema())"
    if not conn.exec_driver_sql(
        f"SELECT 1 FROM pg_ts_dict WHERE dictname = '{DICTIONARY}' AND dictnamespace = {here}"
    ).first():
        conn.exec_driver_sql(
            f"CREATE TEXT SEARCH DICTIONARY {DICTIONARY} (TEMPLATE = snowball, LANGUAGE = english)"
        )
    if not conn.exec_driver_sql(
        f"SELECT 1 FROM pg_ts_config WHERE cfgname = '{CONFIG}' AND cfgnamespace = {here}"
    ).first():
        conn.exec_driver_sql(f"CREATE TEXT SEARCH CONFIGURATION {CONFIG} (COPY = pg_catalog.english)")
        conn.exec_driver_sql(
            f"ALTER TEXT SEARCH CONFIGURATION {CONFIG} ALTER MAPPING FOR "
            f"asciiword, asciihword, hword_asciipart, word, hword, hword_part WITH {DICTIONARY}"
        )
    conn.exec_driver_sql(
        f"ALTER TABLE turns ADD COLUMN IF NOT EXISTS {TSV_COLUMN} tsvector GENERATED ALWAYS AS "
        f"(to_tsvector('{CONFIG}'::regconfig, left(content, {TSV_CHARS}))) STORED"
    )
    conn.exec_driver_sql(f"CREATE INDEX IF NOT EXISTS {WORD_INDEX} ON turns USING gin ({TSV_COLUMN})")
    install_trigram(conn)


def install_trigram(conn: Connection) -> bool:
    """``CREATE EXTENSION pg_trgm`` and the partial trigram index, in a savepoint: a role
    without the right to create extensions keeps the unindexed substring query."""
    try:
        with conn.begin_nested():
            conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            conn.exec_driver_sql(
                f"CREATE INDEX IF NOT EXISTS {TRGM_INDEX} ON turns USING gin (content gin_trgm_ops) "
                f"WHERE {_NO_SPACE_SQL}"
            )
    except Exception as exc:  # insufficient privilege, extension not installed, …
        log.warning("pg_trgm unavailable (%s): CJK keyword search scans without an index", exc)
        return False
    return True


def installed(conn: Connection) -> dict[str, bool]:
    """``{"word": tsvector column present, "cjk": trigram index present}``."""
    if not _is_pg(conn):
        return {"word": False, "cjk": False}
    col = conn.exec_driver_sql(
        "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
        f"AND table_name = 'turns' AND column_name = '{TSV_COLUMN}'"
    ).first()
    trgm = conn.exec_driver_sql(
        f"SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND indexname = '{TRGM_INDEX}'"
    ).first()
    return {"word": col is not None, "cjk": trgm is not None}


def status(conn: Connection) -> dict[str, Any]:
    """For ``memviewer doctor`` on a PostgreSQL store: what indexes keyword search."""
    have = installed(conn)
    turns = int(conn.exec_driver_sql("SELECT COUNT(*) FROM turns").scalar() or 0)
    if not have["word"]:
        return {"ok": False, "detail": f"{turns} turns; no tsvector column: migration 11 has not run"}
    cjk = "pg_trgm index" if have["cjk"] else "no pg_trgm (CREATE EXTENSION refused?): CJK scans unindexed"
    return {"ok": True, "detail": f"{turns} turns; tsvector ({CONFIG}) + GIN; {cjk}"}


def escape_like(text: str) -> str:
    """``text`` as a literal inside an ``ILIKE`` pattern (backslash is PostgreSQL's escape)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# -- statements (run through ``KeywordDb``: ``?`` placeholders) ------------------------------
def _tsquery(n: int, op: str = "||") -> str:
    return f" {op} ".join([f"phraseto_tsquery('{CONFIG}', ?)"] * n)


def _filters(filters: Filters) -> tuple[str, str, list[Any]]:
    """(join, AND-ed conditions, params) restricting ``turns ft``."""
    join, where, params = "", list[str](), list[Any]()
    if filters.session_id:
        where.append("ft.session_id = ?")
        params.append(filters.session_id)
    if filters.scope or filters.scope_id:
        join = " JOIN sessions fs ON fs.id = ft.session_id"
        if filters.scope:
            where.append("fs.scope = ?")
            params.append(filters.scope)
        if filters.scope_id:
            where.append("fs.scope_id = ?")
            params.append(filters.scope_id)
    return join, "".join(f" AND {w}" for w in where), params


def unit_counts(db: KeywordDb, units: Sequence[str], cap: int) -> list[int]:
    """For each unit (a word or phrase), how many turns match it, counted up to ``cap``."""
    if not units:
        return []
    probe = (
        f"(SELECT count(*) FROM (SELECT 1 FROM turns WHERE {TSV_COLUMN} @@ "
        f"phraseto_tsquery('{CONFIG}', ?) LIMIT {int(cap)}) AS c)"
    )
    return [int(n) for n in db.all("SELECT " + ", ".join([probe] * len(units)), list(units))[0]]


def ranked_rows(
    db: KeywordDb,
    any_of: Sequence[str],
    need: Sequence[str],
    need_all: bool,
    filters: Filters,
    window: int,
    keep: int,
) -> list[Any]:
    """The best ``keep`` turns by ``ts_rank_cd`` among the ``window`` most recently stored
    turns matching any unit of ``any_of`` (and, when ``need`` is given, one of ``need``, or
    every one of them with ``need_all``).

    Rows: ``(num, rank, idx, is_compaction_summary, content, *SESSION_COLS)``; the rank is
    taken against ``any_of`` (every unit counts, as in FTS5's BM25 over the OR query)."""
    join, where, params = _filters(filters)
    cond = f"ft.{TSV_COLUMN} @@ q.q"
    need_sql = ""
    if need:
        need_sql = f" AND ft.{TSV_COLUMN} @@ ({_tsquery(len(need), '&&' if need_all else '||')})"
    sql = (
        f"WITH q AS (SELECT ({_tsquery(len(any_of))}) AS q) "
        f"SELECT r.num, r.rk, t.idx, t.is_compaction_summary, t.content, "
        f"{', '.join('s.' + c.strip() for c in _SESSION_COLS.split(','))} FROM ("
        f"SELECT w.num, ts_rank_cd(w.tsv, q.q, {RANK_NORMALIZATION}) AS rk FROM ("
        f"SELECT ft.num, ft.{TSV_COLUMN} AS tsv FROM turns ft{join}, q WHERE {cond}{need_sql}{where} "
        "ORDER BY ft.num DESC LIMIT ?) AS w, q ORDER BY rk DESC, w.num DESC LIMIT ?"
        ") AS r JOIN turns t ON t.num = r.num JOIN sessions s ON s.id = t.session_id"
    )
    return db.all(sql, [*any_of, *need, *params, window, keep])


def substring_rows(db: KeywordDb, runs: Sequence[str], filters: Filters, max_rows: int) -> list[Any]:
    """Turns containing any of ``runs`` (unspaced-script text, case-insensitive), newest
    first, through the partial trigram index when pg_trgm is there. Rows: ``(num, content,
    idx, is_compaction_summary, *SESSION_COLS)``."""
    if not runs:
        return []
    join, where, params = _filters(filters)
    likes = " OR ".join(["ft.content ILIKE ?"] * len(runs))
    sql = (
        f"SELECT ft.num, ft.content, ft.idx, ft.is_compaction_summary, "
        f"{', '.join('s.' + c.strip() for c in _SESSION_COLS.split(','))} FROM turns ft{join} "
        f"JOIN sessions s ON s.id = ft.session_id WHERE ft.{_NO_SPACE_SQL} AND ({likes}){where} "
        "ORDER BY ft.num DESC LIMIT ?"
    )
    return db.all(sql, [*(f"%{escape_like(r)}%" for r in runs), *params, max_rows])


def analyze(conn: Connection) -> None:
    """Fresh planner statistics for the tables keyword search reads (after a bulk import,
    before autovacuum gets to them: the GIN plans depend on them)."""
    if _is_pg(conn):
        conn.exec_driver_sql("ANALYZE turns")
        conn.exec_driver_sql("ANALYZE sessions")
