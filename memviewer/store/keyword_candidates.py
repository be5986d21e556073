"""The SQL of keyword search (``memviewer.recall.keyword``): candidate turns, windows, bookends.

Every statement keyword search runs lives here, as typed functions over ``KeywordDb``: plain
SQL on the hot path, over a per-thread read-only ``sqlite3`` connection (``open_read_only``)
or a SQLAlchemy connection (PostgreSQL, an in-memory store). The scoring and the contract
(docs/cli.md, "search") stay in ``memviewer.recall.keyword``; this module only reads rows.

Rows come back as tuples in the column orders named below (``SESSION_COLS``, ``MSG_COLS``),
so the caller builds one dict per session, not one per row.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import Connection, or_, select

from memviewer.store import fts
from memviewer.store.tables import Session, Turn

S = Session.__table__
T = Turn.__table__

#: The session columns every candidate row carries, in this order.
SESSION_COLS = (
    "id",
    "title",
    "agent",
    "started_at",
    "last_seen_at",
    "source",
    "lineage_id",
    "root_session_id",
    "thread_id",
    "meta",
)
_S_SELECT = ", ".join(f"s.{c}" for c in SESSION_COLS)


def session_dict(row: Sequence[Any], at: int = 0) -> dict[str, Any]:
    """``dict(zip(SESSION_COLS, row[at:]))``, as a dict display: a search builds one per
    candidate session (30 for a rare phrase), and ``dict(zip(…))`` of a slice costs twice as
    much (``tests/test_keyword_candidates_rows.py`` keeps the two equal)."""
    return {
        "id": row[at],
        "title": row[at + 1],
        "agent": row[at + 2],
        "started_at": row[at + 3],
        "last_seen_at": row[at + 4],
        "source": row[at + 5],
        "lineage_id": row[at + 6],
        "root_session_id": row[at + 7],
        "thread_id": row[at + 8],
        "meta": row[at + 9],
    }


#: The message columns of windows and bookends, in this order.
MSG_COLS = "idx, role, content, timestamp, archived"
#: Parts of the compound hits statement (``hit_rows``).
WINDOW, OPENING, CLOSING, FIRST_USER = range(4)
CONVERSATIONAL_SQL = "role IN ('user', 'assistant')"


class KeywordDb:
    """One read snapshot's statements, over a raw ``sqlite3`` connection or a SQLAlchemy one
    (``exec_driver_sql`` with the driver's parameter style)."""

    def __init__(self, conn: Connection | None = None, raw: sqlite3.Connection | None = None) -> None:
        self.conn = conn
        self.raw = raw
        self.style = conn.dialect.paramstyle if conn is not None else "qmark"
        # The word index's ``%_data`` blocks read in this snapshot (``_index_version``), by
        # id, so ``word_index_averages`` need not read row 1 again.
        self.data_blocks: dict[int, Any] = {}

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        if self.raw is not None:
            return self.raw.execute(sql, tuple(params)).fetchall()
        assert self.conn is not None
        if self.style in ("format", "pyformat"):
            sql = sql.replace("?", "%s")
        elif self.style != "qmark":
            count = iter(range(1, len(params) + 1))
            sql = re.sub(r"\?", lambda _m: f":{next(count)}", sql)
        return list(self.conn.exec_driver_sql(sql, tuple(params)))


#: A raw read-only connection of ``open_read_only`` (keyword search keeps one per thread).
RawConnection = sqlite3.Connection


def open_read_only(path: str) -> sqlite3.Connection:
    """A read-only autocommit connection to a SQLite file (WAL: never blocks the writer)."""
    raw = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
    raw.execute("PRAGMA busy_timeout = 10000")
    return raw


def begin(raw: sqlite3.Connection) -> None:
    raw.execute("BEGIN")


def end(raw: sqlite3.Connection) -> None:
    raw.execute("ROLLBACK")


def _marks(n: int) -> str:
    return ",".join("?" * n)


class Filters(NamedTuple):
    scope: str | None = None
    scope_id: str | None = None
    session_id: str | None = None

    @property
    def any(self) -> bool:
        return bool(self.scope or self.scope_id or self.session_id)


# -- scroll -------------------------------------------------------------------------
def session_exists(db: KeywordDb, session_id: str) -> bool:
    return bool(db.all("SELECT 1 FROM sessions WHERE id = ?", (session_id,)))


def max_index(db: KeywordDb, session_id: str) -> int | None:
    top = db.all("SELECT MAX(idx) FROM turns WHERE session_id = ?", (session_id,))[0][0]
    return None if top is None else int(top)


def window_rows(db: KeywordDb, session_id: str, lo: int, hi: int) -> list[Any]:
    """``MSG_COLS`` of the turns with ``lo ≤ idx ≤ hi``, in order."""
    return db.all(
        f"SELECT {MSG_COLS} FROM turns WHERE session_id = ? AND idx BETWEEN ? AND ? ORDER BY idx",
        (session_id, lo, hi),
    )


def first_user_row(db: KeywordDb, session_id: str) -> list[Any]:
    """``MSG_COLS`` of the session's first user message (an empty list when it has none)."""
    return db.all(
        f"SELECT {MSG_COLS} FROM turns WHERE session_id = ? AND role = 'user' ORDER BY idx LIMIT 1",
        (session_id,),
    )


# -- annotations ----------------------------------------------------------------------
def annotations_present(db: KeywordDb) -> bool:
    """Whether any tag or note exists (search skips matching them otherwise).

    Only answered on a raw SQLite connection (a few microseconds); elsewhere it says
    True and the annotation matching decides. A store without the tables has none.
    """
    if db.raw is None:
        return True
    try:
        row = db.all(
            "SELECT EXISTS (SELECT 1 FROM annotation_tags) OR EXISTS (SELECT 1 FROM annotation_notes)"
        )
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return False
        raise
    return bool(row[0][0])


# -- candidates ---------------------------------------------------------------------
def unit_match_counts(db: KeywordDb, literals: Sequence[str], cap: int) -> list[int]:
    """For each FTS5 string, how many turns match it, counted up to ``cap`` (one statement)."""
    if not literals:
        return []
    table = fts.WORD_TABLE
    probe = f"(SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {table} MATCH ? LIMIT {int(cap)}))"
    return [int(n) for n in db.all("SELECT " + ", ".join([probe] * len(literals)), literals)[0]]


def _index_version(db: KeywordDb) -> tuple[Any, ...] | None:
    """The word index's structure and averages records (``%_data`` rows 10 and 1): FTS5
    rewrites the structure with every write that reaches the index (each commit flushes a
    new segment; a merge rewrites them), the averages with every row added or removed."""
    try:
        rows = db.all(f"SELECT id, block FROM {fts.WORD_TABLE}_data WHERE id IN (1, 10) ORDER BY id")
    except sqlite3.Error:
        return None
    db.data_blocks.update((int(i), b) for i, b in rows)
    return tuple(bytes(b) if b is not None else None for _, b in rows) if len(rows) == 2 else None


class MatchCounts:
    """``unit_match_counts`` kept between searches while the word index is unchanged.

    A common word costs its capped count every search (the walk of ``cap`` postings,
    ~0.2 ms a word at 2,001 on the 2k benchmark home); the same words come back query after
    query. Kept per index version (``_index_version``, read in the search's own snapshot),
    so a count is never older than the snapshot it answers; only on a raw read-only
    connection (a SQLAlchemy one may sit inside a write transaction whose pending rows FTS5
    has not flushed). Safe across threads: a thread holding an older version fills that
    version's dict, never the current one's."""

    MAX_TERMS = 10_000

    def __init__(self) -> None:
        self._state: tuple[tuple[Any, ...] | None, dict[tuple[str, int], int]] = (None, {})

    def get(self, db: KeywordDb, literals: Sequence[str], cap: int) -> list[int]:
        version = _index_version(db) if db.raw is not None and literals else None
        if version is None:
            return unit_match_counts(db, literals, cap)
        state = self._state
        if state[0] != version or len(state[1]) > self.MAX_TERMS:
            state = (version, {})
            self._state = state
        known = state[1]
        missing = [lit for lit in dict.fromkeys(literals) if (lit, cap) not in known]
        if missing:
            for lit, n in zip(missing, unit_match_counts(db, missing, cap), strict=True):
                known[(lit, cap)] = n
        return [known[(lit, cap)] for lit in literals]


def cjk_expansions(db: KeywordDb, prefix: str, limit: int) -> list[str]:
    """The indexed trigrams that start with ``prefix`` (a one- or two-character term), most
    frequent first."""
    rows = db.all(
        f"SELECT term FROM {fts.CJK_VOCAB} WHERE term >= ? AND term < ? ORDER BY doc DESC LIMIT ?",
        (prefix, prefix + "\U0010ffff", limit),
    )
    return [r[0] for r in rows]


def _filter_sql(table: str, filters: Filters) -> tuple[str, list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    join = ""
    if filters.any:
        join = f" JOIN turns ft ON ft.num = {table}.rowid"
        if filters.session_id:
            where.append("ft.session_id = ?")
            params.append(filters.session_id)
        if filters.scope or filters.scope_id:
            join += " JOIN sessions fs ON fs.id = ft.session_id"
            if filters.scope:
                where.append("fs.scope = ?")
                params.append(filters.scope)
            if filters.scope_id:
                where.append("fs.scope_id = ?")
                params.append(filters.scope_id)
    return join, where, params


def ranked_rows(db: KeywordDb, table: str, match: str, filters: Filters, window: int, keep: int) -> list[Any]:
    """The best ``keep`` turns by BM25 among the ``window`` most recently stored matches.

    Rows: ``(num, bm25, idx, is_compaction_summary, content, *SESSION_COLS)``; BM25 is
    FTS5's (negative, lower is better). BM25 ranks inside a LIMITed subquery, so only
    the kept turns are joined; a filter's joins run inside it (they must, to keep the
    LIMIT meaningful). Raises the driver's error on a query FTS5 cannot parse.
    """
    join, where, params = _filter_sql(table, filters)
    where = [f"{table} MATCH ?", *where]
    sql = (
        f"SELECT r.num, r.bm, t.idx, t.is_compaction_summary, t.content, {_S_SELECT} FROM ("
        f"SELECT * FROM (SELECT {table}.rowid AS num, bm25({table}) AS bm FROM {table}{join} "
        f"WHERE {' AND '.join(where)} ORDER BY {table}.rowid DESC LIMIT ?) ORDER BY bm LIMIT ?"
        ") r JOIN turns t ON t.num = r.num JOIN sessions s ON s.id = t.session_id"
    )
    return db.all(sql, [match, *params, window, keep])


def newest_rows(db: KeywordDb, match: str, filters: Filters, window: int) -> list[Any]:
    """The ``window`` most recently stored turns matching ``match`` on the word index, unranked.

    Rows: ``(num, idx, is_compaction_summary, content, *SESSION_COLS)``, newest first. No
    BM25: FTS5 would first count every phrase's documents over the whole index (a walk of
    each common word's postings) and then score each row, which is what a query made only
    of common words cannot afford (see ``memviewer.recall.keyword``, "common words").
    """
    table = fts.WORD_TABLE
    join, where, params = _filter_sql(table, filters)
    where = [f"{table} MATCH ?", *where]
    sql = (
        f"SELECT r.num, t.idx, t.is_compaction_summary, t.content, {_S_SELECT} FROM ("
        f"SELECT {table}.rowid AS num FROM {table}{join} WHERE {' AND '.join(where)} "
        f"ORDER BY {table}.rowid DESC LIMIT ?) r JOIN turns t ON t.num = r.num "
        "JOIN sessions s ON s.id = t.session_id ORDER BY r.num DESC"
    )
    return db.all(sql, [match, *params, window])


def newest_turns(db: KeywordDb, match: str, filters: Filters, window: int) -> list[Any]:
    """``newest_rows`` without the session columns: ``(num, idx, is_compaction_summary,
    content, session_id)``, newest first. The caller reads each distinct session once
    (``session_rows``): the 100 turns of a common-word window come from a few tens of
    sessions, and the join cost ~0.25 ms a search on the 2k benchmark home."""
    table = fts.WORD_TABLE
    join, where, params = _filter_sql(table, filters)
    where = [f"{table} MATCH ?", *where]
    sql = (
        "SELECT r.num, t.idx, t.is_compaction_summary, t.content, t.session_id FROM ("
        f"SELECT {table}.rowid AS num FROM {table}{join} WHERE {' AND '.join(where)} "
        f"ORDER BY {table}.rowid DESC LIMIT ?) r JOIN turns t ON t.num = r.num ORDER BY r.num DESC"
    )
    return db.all(sql, [match, *params, window])


def session_rows(db: KeywordDb, ids: Sequence[str]) -> dict[str, tuple[Any, ...]]:
    """``SESSION_COLS`` of each session in ``ids``, by id."""
    if not ids:
        return {}
    return {
        r[0]: tuple(r)
        for r in db.all(
            f"SELECT {', '.join(SESSION_COLS)} FROM sessions WHERE id IN ({_marks(len(ids))})", ids
        )
    }


def _varint(blob: bytes, i: int) -> tuple[int, int]:
    """SQLite's variable-length integer (FTS5 records use it): value and the next offset."""
    value = 0
    for _ in range(8):
        c = blob[i]
        i += 1
        value = (value << 7) | (c & 0x7F)
        if not c & 0x80:
            return value, i
    return (value << 8) | blob[i], i + 1


def word_index_averages(db: KeywordDb) -> tuple[int, float] | None:
    """(turns indexed, average tokens per turn) of the word index, as FTS5's ``bm25()`` sees
    them: FTS5 keeps both in its "averages" record (``%_data`` row 1: the row count, then
    the token total of each column, as varints). None when the record cannot be read."""
    try:
        if 1 in db.data_blocks:  # read in this snapshot already (``_index_version``)
            rows = [(db.data_blocks[1],)]
        else:
            rows = db.all(f"SELECT block FROM {fts.WORD_TABLE}_data WHERE id = 1")
        blob = bytes(rows[0][0]) if rows and rows[0][0] else b""
        if not blob:
            return None
        n, i = _varint(blob, 0)
        tokens, _ = _varint(blob, i)
    except (IndexError, TypeError, sqlite3.Error):
        return None
    return (n, tokens / n) if n > 0 else None


def scan_rows(conn: Connection, needles: Sequence[str], filters: Filters, max_rows: int) -> list[Any]:
    """The no-FTS path: turns whose text contains any needle (case-insensitive, portable SQL),
    newest first. Rows: ``(num, content, idx, is_compaction_summary, *SESSION_COLS)``."""
    cols = [getattr(S.c, c) for c in SESSION_COLS]
    q = (
        select(T.c.num, T.c.content, T.c.idx, T.c.is_compaction_summary, *cols)
        .join(S, S.c.id == T.c.session_id)
        .where(or_(*(T.c.content.icontains(n, autoescape=True) for n in needles)))
    )
    if filters.session_id:
        q = q.where(T.c.session_id == filters.session_id)
    if filters.scope:
        q = q.where(S.c.scope == filters.scope)
    if filters.scope_id:
        q = q.where(S.c.scope_id == filters.scope_id)
    q = q.order_by(T.c.num.desc()).limit(max_rows)
    return list(conn.execute(q))


# -- ranking and hits -----------------------------------------------------------------
def rate_stats(db: KeywordDb, ids: Sequence[str]) -> dict[str, tuple[int, float, float]]:
    """Per session: (turns, first timestamp, last timestamp), from the (session, timestamp) index."""
    if not ids:
        return {}
    # One scalar subquery per aggregate, each a search of the index: on SQLite half the cost
    # of ``… WHERE session_id IN (…) GROUP BY session_id`` (0.09 against 0.19 ms for 10
    # sessions of 40 turns). A session without turns gives (0, None, None), as a missing one.
    sql = (
        "SELECT s.id, (SELECT COUNT(*) FROM turns WHERE session_id = s.id), "
        "(SELECT MIN(timestamp) FROM turns WHERE session_id = s.id), "
        "(SELECT MAX(timestamp) FROM turns WHERE session_id = s.id) "
        f"FROM sessions s WHERE s.id IN ({_marks(len(ids))})"
    )
    return {sid: (int(n), lo, hi) for sid, n, lo, hi in db.all(sql, ids)}


def hit_rows(db: KeywordDb, picks: Sequence[tuple[str, int, bool]], window: int, bookend: int) -> list[Any]:
    """Windows, bookends and first user messages of every hit, in one compound statement.

    ``picks``: (session id, anchor index, needs the first user message) per hit. Rows:
    ``(pick number, part, *MSG_COLS)`` with part one of ``WINDOW``, ``OPENING``, ``CLOSING``,
    ``FIRST_USER``, in no particular order; the bookends are the first and last ``bookend``
    conversational turns.
    """
    parts: list[str] = []
    params: list[Any] = []
    for k, (sid, anchor, first_user) in enumerate(picks):
        parts.append(
            f"SELECT {k}, {WINDOW}, {MSG_COLS} FROM turns WHERE session_id = ? AND idx BETWEEN ? AND ?"
        )
        params += [sid, anchor - window, anchor + window]
        for part, order in ((OPENING, "ASC"), (CLOSING, "DESC")):
            parts.append(
                f"SELECT * FROM (SELECT {k}, {part}, {MSG_COLS} FROM turns "
                f"WHERE session_id = ? AND {CONVERSATIONAL_SQL} ORDER BY idx {order} "
                f"LIMIT {int(bookend)}) AS b{len(parts)}"
            )
            params.append(sid)
        if first_user:
            parts.append(
                f"SELECT * FROM (SELECT {k}, {FIRST_USER}, {MSG_COLS} FROM turns "
                f"WHERE session_id = ? AND role = 'user' ORDER BY idx LIMIT 1) AS f{len(parts)}"
            )
            params.append(sid)
    if not parts:
        return []
    return db.all(" UNION ALL ".join(parts), params)
