"""Cross-session keyword search: discovery, scroll and browse (contract: docs/cli.md, "search").

Discovery runs one BM25 query per index (``memviewer.store.fts``) for the best
``CANDIDATE_TURNS`` turns, archived and active alike, then reads only the
matched sessions (three statements in all, on a per-thread read-only SQLite
connection, see ``_reader``). Words found in more than ``COMMON_DF`` turns
only rank turns that also hold a rarer word of the query (``_word_match``),
which keeps questions full of common words fast. A query that would still
match more than ``RANKED_MAX`` turns (or holds only common words) is not ranked
by FTS5 at all: the newest ``COMMON_TURNS`` matching turns, those holding every
word first, are scored in Python with BM25's formula (``_common_candidates``), so
its cost is bounded by that window instead of by how many turns match. The SQL
lives in ``memviewer.store.keyword_candidates``. How a session is scored:

1. turn score = ``-bm25`` (positive; higher is better) × the share of the
   query's units the turn contains (``ParsedQuery.coverage``, Lucene's "coord"),
   so one rare word cannot outrank a turn that holds the whole question. A
   compaction summary counts half (``SUMMARY_WEIGHT``): it repeats archived
   turns, which should anchor the hit themselves.
2. session score = best turn + ½ second + ¼ third (``SESSION_DECAY``): a session
   that keeps coming back to the topic beats one passing mention, and length
   alone does not win. The best turn is the anchor.
3. automated sessions are multiplied by ``AUTOMATED_DEMOTION`` (0.25): source
   (column, ``meta.source`` or ``meta.metadata.source``) in
   ``AUTOMATED_SOURCES``, ``automated: true`` in the metadata, or more than 60
   turns per hour over a span of at least 4 turns.
4. lineage dedup: sessions sharing ``lineage_id`` / ``root_session_id`` /
   ``thread_id`` (never ``parent_session_id``: siblings forked from one parent
   are different conversations) collapse to their best hit.
5. ties go to the most recently seen session.

Demotion only lowers a score, so step 3 runs on candidates in score order and
stops once ``limit`` hits are certain (see ``_rank``). Without FTS5 the same
pipeline runs on a substring scan (``LIKE``) scored like the reference store:
+1 per unit found in a turn, +2 when the whole query occurs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memviewer import params
from memviewer.errors import INVALID_ARGUMENT, SESSION_NOT_FOUND, MemviewerError
from memviewer.present.snippets import make_snippet
from memviewer.recall import fts_query, keyword_pg
from memviewer.recall.fts_query import ParsedQuery, Unit
from memviewer.store import fts, pg_fts, repos
from memviewer.store import keyword_candidates as kc
from memviewer.store.db import Connection
from memviewer.store.keyword_candidates import Filters as _Filters
from memviewer.store.keyword_candidates import KeywordDb as _Db
from memviewer.timeutil import iso

if TYPE_CHECKING:
    from memviewer.config import Settings
    from memviewer.store.db import Store

log = logging.getLogger("memviewer.recall")

BOOKEND_SIZE = 2
AUTOMATED_DEMOTION = 0.25
AUTOMATED_RATE_THRESHOLD = 60.0  # turns per hour
AUTOMATED_MIN_TURNS = 4
AUTOMATED_SOURCES = frozenset({"scheduled", "automated", "cron", "system", "batch"})
LINEAGE_KEYS = ("lineage_id", "root_session_id", "thread_id")
CANDIDATE_TURNS = 400
SESSION_DECAY = (1.0, 0.5, 0.25)
SUMMARY_WEIGHT = 0.5
MAX_EXPANSIONS = 512
COMMON_DF = 2000  # a word unit in more turns than this only ranks turns that have a rarer one
BROAD_WINDOW = 20_000  # at most this many (newest) matching turns are ranked by BM25
COMMON_WINDOW = 1_000  # ... and this many when every word is common and ``broad_bm25`` is set
COMMON_TURNS = 100  # the newest turns a query with too many matches scores (_common_candidates)
RANKED_MAX = 400  # at most this many matching turns (by the unit counts) are ranked by FTS5's BM25
BM25_K1, BM25_B = 1.2, 0.75  # FTS5's bm25() defaults, for the common-word scorer
FALLBACK_MAX_ROWS = 20_000
MAX_LIMIT = params.MAX_SEARCH_LIMIT
MAX_WINDOW = params.MAX_SEARCH_WINDOW
_INT = re.compile(r"[+-]?\d+")


def _error(mode: str, message: str, hint: str, code: str = INVALID_ARGUMENT) -> dict[str, Any]:
    return {"success": False, "mode": mode, "error": message, "hint": hint, "code": code}


def _int_arg(name: str, value: Any, lo: int, hi: int) -> int:
    return params.int_param(name, value, None, lo, hi, hint=f"pass --{name} N with {lo} ≤ N ≤ {hi}")


def _meta_value(row: dict[str, Any], key: str) -> Any:
    """A key from the session's metadata, or from the original metadata an importer kept."""
    meta = row.get("meta") or {}
    if not isinstance(meta, dict):
        return None
    value = meta.get(key)
    if value in (None, "") and isinstance(meta.get("metadata"), dict):
        value = meta["metadata"].get(key)
    return value


def lineage_key(row: dict[str, Any]) -> str | None:
    for key in LINEAGE_KEYS:
        value = row.get(key) or _meta_value(row, key)
        if value:
            return str(value)
    return None


def tagged_automated(row: dict[str, Any]) -> bool:
    source = str(row.get("source") or _meta_value(row, "source") or "").strip().lower()
    return source in AUTOMATED_SOURCES or _meta_value(row, "automated") is True


def rate_automated(n: int, first: float | None, last: float | None) -> bool:
    if n < AUTOMATED_MIN_TURNS or first is None or last is None:
        return False
    span_hours = (last - first) / 3600.0
    return span_hours > 0 and n / span_hours > AUTOMATED_RATE_THRESHOLD


class KeywordSearch:
    """BM25 session search over archived and active turns (see the module docstring)."""

    def __init__(self, store: Store, *, use_fts: bool | None = None, broad_bm25: bool = False) -> None:
        """``broad_bm25`` ranks queries with too many matches the way search did before the
        windowed scorer (``_common_candidates``): FTS5 BM25 over every match, or over the
        newest ``COMMON_WINDOW`` when every word is common. Kept for
        ``bench/bench_search_hub.py``'s side-by-side comparison, not for front ends."""
        self.store = store
        self._use_fts = use_fts
        self._broad_bm25 = broad_bm25
        self._tables: dict[str, bool] | None = None
        self._pg: bool | None = None
        self._counts = kc.MatchCounts()  # per-word match counts while the index is unchanged
        self._local = threading.local()
        self._raw: list[kc.RawConnection] = []
        self._raw_lock = threading.Lock()
        self._db_path = store.sqlite_file

    def close(self) -> None:
        """Close the per-thread read connections (the store itself belongs to the caller)."""
        with self._raw_lock:
            for conn in self._raw:
                conn.close()
            self._raw.clear()

    @contextlib.contextmanager
    def _reader(self) -> Iterator[_Db]:
        """One read snapshot for a whole search.

        On a SQLite file this is a per-thread, read-only ``sqlite3`` connection
        kept open between searches (WAL: it sees every committed write and never
        blocks the writer); SQLAlchemy's pool and statement layer cost more than
        the search itself. Elsewhere it is ``store.read()``.
        """
        if self._db_path is None:
            with self.store.read() as conn:
                yield _Db(conn)
            return
        raw = self._thread_conn(self._db_path)
        kc.begin(raw)
        try:
            yield _Db(raw=raw)
        finally:
            kc.end(raw)

    def _thread_conn(self, path: str) -> kc.RawConnection:
        """This thread's read-only connection to the SQLite file (opened once)."""
        raw = getattr(self._local, "conn", None)
        if raw is None:
            raw = kc.open_read_only(path)
            self._local.conn = raw
            with self._raw_lock:
                self._raw.append(raw)
        return raw

    def annotated(self) -> bool:
        """Whether the store holds any tag or note, read on this search's own connection.

        Search's annotation matches (``session.annotations.search``) cost a SQLAlchemy
        round trip of two statements, more than a rare-phrase search itself; on a store
        without annotations this one statement lets them be skipped. On a SQLite file it runs
        outside an explicit transaction (one statement is its own snapshot): no ``BEGIN`` and
        ``ROLLBACK`` around it.
        """
        if self._db_path is None:
            with self._reader() as db:
                return kc.annotations_present(db)
        return kc.annotations_present(_Db(raw=self._thread_conn(self._db_path)))

    # -- index state ----------------------------------------------------------
    def tables(self) -> dict[str, bool]:
        """Which FTS tables this search uses (none when forced off or unavailable)."""
        if self._tables is None:
            if self._use_fts is False or (self._use_fts is None and fts.forced_off()):
                self._tables = {"word": False, "cjk": False}
            elif not self.store.is_sqlite:
                self._tables = {"word": False, "cjk": False}
            else:
                try:
                    self._tables = fts.ensure(self.store)
                except Exception:  # a locked or odd database must not break search
                    log.exception("could not check or install the keyword index")
                    with self.store.read() as conn:
                        self._tables = fts.usable(conn)
        return self._tables

    def postgres_index(self) -> bool:
        """Whether this search runs on PostgreSQL's tsvector index (``memviewer.store.pg_fts``;
        not when forced off, as FTS5 is not)."""
        if self._pg is None:
            off = self._use_fts is False or (self._use_fts is None and fts.forced_off())
            if off or self.store.is_sqlite:
                self._pg = False
            else:
                with self.store.read() as conn:
                    self._pg = pg_fts.installed(conn)["word"]
        return self._pg

    @property
    def mode(self) -> str:
        if self.postgres_index():
            return "postgres"
        t = self.tables()
        return "fts5" if t["word"] else "scan"

    # -- entry point ------------------------------------------------------------
    def search(
        self,
        query: str | None = None,
        session_id: str | None = None,
        around: int | str | None = None,
        limit: int = 5,
        window: int = 5,
        scope: str | None = None,
        scope_id: str | None = None,
    ) -> dict[str, Any]:
        """Discovery (query), scroll (session_id) or browse (neither); see docs/cli.md.

        A query with a session id searches inside that session. Never raises:
        every failure comes back as ``{"success": false, "mode", "error", "hint"}``.
        """
        text = query.strip() if isinstance(query, str) else query
        mode = "discovery" if text else "scroll" if session_id else "browse"
        try:
            if text is not None and not isinstance(text, str):
                raise MemviewerError(INVALID_ARGUMENT, f"query must be text, not {type(query).__name__}")
            for name, value in (("session_id", session_id), ("scope", scope), ("scope_id", scope_id)):
                if value is not None and not isinstance(value, str):
                    raise MemviewerError(INVALID_ARGUMENT, f"{name} must be text")
            limit = _int_arg("limit", limit, *params.SEARCH_INT_BOUNDS["limit"])
            window = _int_arg("window", window, *params.SEARCH_INT_BOUNDS["window"])
            if text:  # discovery
                return self._discovery(text, limit, window, _Filters(scope, scope_id, session_id))
            if session_id:  # scroll
                return self._scroll(session_id, around, window)
            if around not in (None, ""):
                raise MemviewerError(
                    INVALID_ARGUMENT,
                    "an anchor (around) needs a session id",
                    hint="pass --session ID with --around N",
                )
            return self._browse(limit, scope, scope_id)
        except MemviewerError as exc:
            return _error(mode, exc.message, exc.hint or _HINTS.get(exc.code, ""), exc.code)
        except Exception as exc:  # the contract is an error dict, never a traceback
            log.exception("keyword search failed")
            return _error(
                mode,
                f"internal error: {type(exc).__name__}: {exc}",
                "this is a bug; `memviewer doctor` checks the store and the index",
                "internal",
            )

    # -- discovery ---------------------------------------------------------------
    def _discovery(self, text: str, limit: int, window: int, filters: _Filters) -> dict[str, Any]:
        pq = fts_query.parse(text)
        out: dict[str, Any] = {"success": True, "mode": "discovery", "query": text}
        tables = self.tables()
        with self._reader() as db:
            candidates: dict[int, _Candidate] = {}
            if self.postgres_index():
                window_used = self._postgres_candidates(db, pq, filters, candidates)
                if window_used is not None:
                    out["ranked_window"] = window_used
                tables = {"word": True, "cjk": True}  # nothing left to scan
            else:
                window_used = self._sqlite_candidates(db, pq, filters, tables, candidates)
                if window_used is not None:
                    out["ranked_window"] = window_used
            scan = ([] if tables["word"] else pq.word_units) + ([] if tables["cjk"] else pq.cjk_units)
            if scan:
                whole = None if tables["word"] else pq.text
                with self.store.read() as conn:
                    _add(candidates, _scan_candidates(conn, scan, whole, filters))
            if not candidates:
                return {**out, "total_found": 0, "results": []}
            sessions: dict[str, dict[str, Any]] = {}
            per_session: dict[str, list[tuple[float, int]]] = defaultdict(list)
            for c in candidates.values():
                sid = c.session["id"]
                if sid not in sessions:
                    sessions[sid] = c.session
                per_session[sid].append((c.score * (SUMMARY_WEIGHT if c.summary else 1.0), -c.idx))
            raw: dict[str, float] = {}
            anchors: dict[str, int] = {}
            for sid, items in per_session.items():
                items.sort(reverse=True)
                raw[sid] = sum(w * sc for w, (sc, _) in zip(SESSION_DECAY, items, strict=False))
                anchors[sid] = -items[0][1]
            ranked, total = _rank(db, raw, sessions, limit)
            results = _hits(db, [(sessions[sid], anchors[sid], score) for sid, score in ranked], window, pq)
        return {**out, "total_found": total, "results": results}

    def _sqlite_candidates(
        self,
        db: _Db,
        pq: ParsedQuery,
        filters: _Filters,
        tables: dict[str, bool],
        into: dict[int, _Candidate],
    ) -> int | None:
        """The word and CJK candidates from SQLite's FTS5 tables into ``into``; the
        window of newest matches ranked when a common query was cut to it (else None)."""
        window_used = None
        # ``plan.counts`` holds the units found in the index (in this snapshot): when none is,
        # no turn can match and the ranked statement is skipped (a query matching nothing
        # costs the count alone).
        if tables["word"] and (plan := _word_match(db, pq, self._counts)) and plan.counts:
            if not plan.windowed:
                _add(into, _fts_candidates(db, fts.WORD_TABLE, plan.match, pq, filters))
            elif self._broad_bm25:
                all_common = all(n > COMMON_DF for n in plan.counts.values())
                narrow = COMMON_WINDOW if all_common else None
                _add(into, _fts_candidates(db, fts.WORD_TABLE, plan.match, pq, filters, narrow))
            else:
                _add(into, _common_candidates(db, plan, pq, filters))
                # said in the answer, not only in the docs: older sessions may be missing
                window_used = COMMON_TURNS
        if pq.cjk_units and tables["cjk"] and (cjk := _cjk_match(db, pq.cjk_units)):
            _add(into, _fts_candidates(db, fts.CJK_TABLE, cjk, pq, filters))
        return window_used

    def _postgres_candidates(
        self, db: _Db, pq: ParsedQuery, filters: _Filters, into: dict[int, _Candidate]
    ) -> int | None:
        """The word and CJK candidates on PostgreSQL (``keyword_pg``), with this module's
        constants read now (tests narrow them); returns the ranked window, if any."""
        seen: dict[Any, dict[str, Any]] = {}
        found, window_used = keyword_pg.word_candidates(
            db,
            pq,
            filters,
            common_df=COMMON_DF,
            ranked_max=RANKED_MAX,
            broad_window=BROAD_WINDOW,
            common_turns=COMMON_TURNS,
            keep=CANDIDATE_TURNS,
        )
        if pq.cjk_units:
            found += keyword_pg.cjk_candidates(db, pq, filters, FALLBACK_MAX_ROWS)
        _add(into, ((f.num, _candidate(f.score, f.idx, f.summary, f.row, f.at, seen)) for f in found))
        return window_used

    # -- scroll ----------------------------------------------------------------
    def _scroll(self, session_id: str, around: Any, window: int) -> dict[str, Any]:
        with self._reader() as db:
            if not kc.session_exists(db, session_id):
                raise MemviewerError(
                    SESSION_NOT_FOUND,
                    f"unknown session {session_id!r}",
                    hint="list sessions with `memviewer search` (browse) or `memviewer sessions`",
                )
            top = kc.max_index(db, session_id)
            n = 0 if top is None else int(top) + 1
            if around is None or (isinstance(around, str) and not around.strip()):
                anchor = n - 1
            else:
                anchor = _anchor(around)
                if not 0 <= anchor < n:
                    span = f"0–{n - 1}" if n else "none"
                    raise MemviewerError(
                        INVALID_ARGUMENT,
                        f"message index {anchor} is out of range: session {session_id!r} has "
                        f"{n} messages (indexes {span})",
                        data={
                            "hint": "use anchor_index from a discovery hit, or omit --around "
                            "for the most recent messages"
                        },
                    )
            messages = _window(db, session_id, anchor, window) if n else []
        return {
            "success": True,
            "mode": "scroll",
            "session_id": session_id,
            "around_message_id": str(anchor) if n else None,
            "messages": messages,
        }

    # -- browse -----------------------------------------------------------------
    def _browse(self, limit: int, scope: str | None, scope_id: str | None) -> dict[str, Any]:
        with self.store.read() as conn:
            rows = repos.list_sessions(conn, scope=scope, scope_id=scope_id, limit=limit)
            total = repos.count_sessions(conn, scope, scope_id)
            counts = repos.session_counts(conn, [r["id"] for r in rows])
            db = _Db(conn)
            results = [
                {
                    "session_id": r["id"],
                    "title": _title(db, r),
                    "when": iso(r["last_seen_at"] or r["started_at"]),
                    "message_count": counts[r["id"]]["active_turns"] + counts[r["id"]]["archived_turns"],
                }
                for r in rows
            ]
        return {"success": True, "mode": "browse", "total_found": total, "results": results}


_HINTS = {
    INVALID_ARGUMENT: "see `memviewer search --help` for the accepted syntax",
    SESSION_NOT_FOUND: "list sessions with `memviewer search` (browse) or `memviewer sessions`",
}


def _anchor(around: Any) -> int:
    if isinstance(around, int) and not isinstance(around, bool):
        return around
    if isinstance(around, str) and _INT.fullmatch(around.strip()):
        return int(around.strip())
    raise MemviewerError(
        INVALID_ARGUMENT,
        f"around must be a message index (an integer), not {around!r}",
        hint="use anchor_index from a discovery hit, e.g. --around 12",
    )


@dataclass
class _Candidate:
    score: float
    idx: int
    summary: bool
    session: dict[str, Any]


def _add(into: dict[int, _Candidate], found: Iterable[tuple[int, _Candidate]]) -> None:
    """Merge one index's candidates; a turn found by both indexes adds up its scores."""
    for num, cand in found:
        if num in into:
            into[num].score += cand.score
        else:
            into[num] = cand


def _candidate(
    score: float, idx: int, summary: Any, row: Sequence[Any], at: int, seen: dict[Any, dict[str, Any]]
) -> _Candidate:
    """One candidate turn; the session's columns (``row[at:]``) become one dict per session
    (``seen``)."""
    session = seen.get(row[at])
    if session is None:
        session = seen[row[at]] = kc.session_dict(row, at)
    return _Candidate(score, int(idx), bool(summary), session)


def _fts_candidates(
    db: _Db, table: str, match: str, pq: ParsedQuery, filters: _Filters, broad: int | None = None
) -> list[tuple[int, _Candidate]]:
    """The best ``CANDIDATE_TURNS`` turns by BM25 with their turn and session columns,
    each BM25 scaled by the share of query units the turn contains (``coverage``).

    FTS5 computes BM25 for every match before it can sort, about 1 µs a turn, so
    a query whose words are everywhere ("rollback plan" in 500 000 of 4 million
    turns) would take seconds. BM25 is therefore taken over the ``BROAD_WINDOW``
    most recently stored matching turns (FTS5 walks rowids newest first and
    stops there); any query with fewer matches is ranked in full, and rare words
    always reach old sessions (see ``_word_match``). ``broad`` narrows the window
    (the old common-word ranking, see ``KeywordSearch``).

    BM25 ranks inside a LIMITed subquery, so only the kept turns are joined;
    with a filter, the filter joins run inside it (they must, to keep the LIMIT
    meaningful).
    """
    try:
        rows = kc.ranked_rows(db, table, match, filters, broad or BROAD_WINDOW, CANDIDATE_TURNS)
    except Exception as exc:
        if "fts5" in str(exc).lower() or "syntax error" in str(exc).lower():
            raise MemviewerError(
                INVALID_ARGUMENT,
                f"the search index could not read this query ({exc})",
                hint='use plain words or a "quoted phrase"',
            ) from None
        raise
    seen: dict[Any, dict[str, Any]] = {}
    return [
        (int(r[0]), _candidate(-float(r[1]) * pq.coverage(r[4] or ""), r[2], r[3], r, 5, seen)) for r in rows
    ]


def _common_candidates(
    db: _Db, plan: _WordPlan, pq: ParsedQuery, filters: _Filters
) -> list[tuple[int, _Candidate]]:
    """A query whose words match too many turns to rank them all: the newest
    ``COMMON_TURNS`` matching turns, scored in Python, with no FTS5 BM25 at all.

    Such a query ("rollback plan", "billing migration") has no one right answer, and FTS5's
    ``bm25()`` is what it cannot afford: before the first row it counts every phrase's
    documents over the whole index (one callback per posting of each common word), then
    costs microseconds per ranked turn. Here FTS5 only walks postings newest first
    (``kc.newest_rows``): first turns holding every word that occurs (an AND), then, if
    fewer than ``COMMON_TURNS``, turns matching the plan's expression. Each turn gets BM25
    with FTS5's constants (k1 1.2, b 0.75; length in words against the index's average
    tokens per turn, read from FTS5's own record; IDF from the capped match counts over the
    indexed turns, the whole-query phrase taking its rarest word's),
    summed over the units and the phrase and scaled by ``coverage`` like the ranked path
    (computed here from the same probes, the text lowered once). The turns come without
    their session's columns, which are read once per distinct session (``kc.session_rows``).
    Cost is bounded by the window, not by how many turns match.
    """
    occurring = [u for u in pq.word_units if u.text in plan.counts]
    rows: list[Any] = []
    if len(occurring) > 1:
        every = " AND ".join(fts_query.fts_string(u.text) for u in occurring)
        rows = kc.newest_turns(db, every, filters, COMMON_TURNS)
    if len(rows) < COMMON_TURNS:
        have = {r[0] for r in rows}
        rows += [r for r in kc.newest_turns(db, plan.match, filters, COMMON_TURNS) if r[0] not in have]
        rows = rows[:COMMON_TURNS]
    if not rows:
        return []
    session_of = {
        sid: kc.session_dict(row)
        for sid, row in kc.session_rows(db, list(dict.fromkeys(r[4] for r in rows))).items()
    }
    texts = [(r[3] or "").lower() for r in rows]
    lengths = [max(len(t.split()), 1) for t in texts]
    stats = kc.word_index_averages(db)
    total, avg = stats if stats else (len(rows), sum(lengths) / len(lengths))
    total = max(total, *plan.counts.values())
    idf = {u: math.log((total - n + 0.5) / (n + 0.5) + 1.0) for u, n in plan.counts.items()}
    probes: list[tuple[str, bool, float]] = [
        (p, flat, idf.get(u.text, 0.0))
        for (p, flat), u in zip(pq.probes, pq.units, strict=True)
        if u.kind == "word"
    ]
    if pq.phrase:
        phrase = fts_query.flatten(pq.phrase.lower())
        probes.append((phrase, phrase != " ".join(pq.phrase.lower().split()), max(idf.values())))
    # ``pq.coverage``: the word units' probes are the first ``len(words)`` of ``probes`` (a
    # probe found is a term frequency above 0); the other units' are checked as it does.
    n_units = len(pq.units)
    n_words = sum(1 for u in pq.units if u.kind == "word")
    others = [p for (p, u) in zip(pq.probes, pq.units, strict=True) if u.kind != "word"]
    # Probe by probe over all turns (one ``str.count`` comprehension each), adding each turn's
    # terms in probe order: the same float operations in the same order as turn by turn.
    norms = [BM25_K1 * (1.0 - BM25_B + BM25_B * dl / avg) for dl in lengths]
    flats = [fts_query.flatten(low) for low in texts] if any(f for _, f, _ in probes) else None
    scores = [0.0] * len(rows)
    hits = [0] * len(rows)
    for k, (probe, needs_flat, weight) in enumerate(probes):
        word = k < n_words
        source = flats if needs_flat and flats is not None else texts
        for i, tf in enumerate([t.count(probe) for t in source]):
            if tf:
                scores[i] += weight * tf * (BM25_K1 + 1.0) / (tf + norms[i])
                if word:
                    hits[i] += 1
    out: list[tuple[int, _Candidate]] = []
    for i, r in enumerate(rows):
        if n_units < 2:
            coverage = 1.0
        else:
            extra = (
                fts_query.probe_hits(others, texts[i], flats[i] if flats is not None else None)
                if others
                else 0
            )
            coverage = max(hits[i] + extra, 1) / n_units
        out.append((int(r[0]), _Candidate(scores[i] * coverage, int(r[1]), bool(r[2]), session_of[r[4]])))
    return out


@dataclass(frozen=True)
class _WordPlan:
    """How the word index answers a query (``_word_match``)."""

    match: str  # the MATCH expression
    counts: dict[str, int]  # matches per occurring word unit (text), capped at COMMON_DF + 1
    windowed: bool  # too many matches to rank them all: ``_common_candidates``


def _word_match(db: _Db, pq: ParsedQuery, known: kc.MatchCounts | None = None) -> _WordPlan | None:
    """``fts_query.word_match``, restricted to turns with at least one uncommon unit, and
    whether the turns it matches are few enough to rank them all with FTS5's BM25.

    BM25 costs microseconds per matching turn, and FTS5 ranks every match:
    "What did we decide about the kiwi rollout?" would rank the ~10 % of turns
    that say "decide" just to find the few that say "kiwi". One statement counts
    each unit's matches (capped at ``COMMON_DF + 1``); when some units are common
    and at least one uncommon unit occurs, the expression becomes ``(uncommon
    units) AND (all units)``: the same BM25 scores (common words still count) for
    the turns that can matter. When every unit that occurs is common, or the
    uncommon ones still match more than ``RANKED_MAX`` turns, no small set of
    turns can be singled out: ``_common_candidates`` scores the newest matches.
    """
    base = fts_query.word_match(pq)
    units = pq.word_units
    if base is None:
        return None
    literals = [fts_query.fts_string(u.text) for u in units]
    counts = (known.get if known is not None else kc.unit_match_counts)(db, literals, COMMON_DF + 1)
    found = {u.text: n for u, n in zip(units, counts, strict=True) if n > 0}
    rare = [u for u, n in zip(units, counts, strict=True) if 0 < n <= COMMON_DF]
    if not found:
        return _WordPlan(base, found, False)
    windowed = not rare or sum(found[u.text] for u in rare) > RANKED_MAX
    if not rare or len(rare) == len(found):
        return _WordPlan(base, found, windowed)
    match = f"({' OR '.join(fts_query.fts_string(u.text) for u in rare)}) AND ({base})"
    return _WordPlan(match, found, windowed)


def _cjk_match(db: _Db, units: Sequence[Unit]) -> str | None:
    """Runs of ≥3 characters are trigram phrases; shorter ones expand to the trigrams
    that start with them (every occurrence is such a prefix, thanks to ``fts.PAD``)."""
    parts: list[str] = []
    for u in units:
        if len(u.text) >= 3:
            parts.append(fts_query.fts_string(u.text))
            continue
        prefix = u.text.lower()
        parts += [fts_query.fts_string(t) for t in kc.cjk_expansions(db, prefix, MAX_EXPANSIONS)]
    return " OR ".join(parts) if parts else None


def _scan_candidates(
    conn: Connection, units: Sequence[Unit], whole: str | None, filters: _Filters
) -> list[tuple[int, _Candidate]]:
    """The no-FTS path: a case-insensitive substring scan (portable SQL), scored like the
    reference store: +1 per unit present in a turn, +2 when the whole query is."""
    needles = [u.text for u in units]
    lowered = [n.lower() for n in needles]
    whole_low = whole.lower() if whole and len(units) > 1 else None
    out: list[tuple[int, _Candidate]] = []
    seen: dict[Any, dict[str, Any]] = {}
    for r in kc.scan_rows(conn, needles, filters, FALLBACK_MAX_ROWS):
        low = (r[1] or "").lower()
        score = sum(1.0 for n in lowered if n in low) + (2.0 if whole_low and whole_low in low else 0.0)
        if score > 0:
            out.append((int(r[0]), _candidate(score, r[2], r[3], r, 4, seen)))
    return out


_PROJECTIONS: dict[tuple[Any, ...], tuple[str | None, bool]] = {}
_PROJECTIONS_MAX = 200_000


def _projection(row: dict[str, Any]) -> tuple[str | None, bool]:
    """(lineage key, tagged automated) of a session row, cached by the columns they derive from.

    Both read the metadata JSON, which is most of a candidate's cost otherwise; the key
    is the raw text (and the columns), so a changed session is simply a new key.
    """
    meta = row["meta"]
    key = (row["source"], row["lineage_id"], row["root_session_id"], row["thread_id"], meta)
    if not isinstance(meta, str | None):
        return lineage_key(row), tagged_automated(row)
    got = _PROJECTIONS.get(key)
    if got is None:
        parsed = dict(row)
        if isinstance(meta, str):  # raw SQL returns the JSON text
            try:
                parsed["meta"] = json.loads(meta)
            except ValueError:
                parsed["meta"] = None
        got = (lineage_key(parsed), tagged_automated(parsed))
        if len(_PROJECTIONS) >= _PROJECTIONS_MAX:
            _PROJECTIONS.clear()
        _PROJECTIONS[key] = got
    return got


# -- ranking ------------------------------------------------------------------------
def _rank(
    db: _Db, raw: dict[str, float], sessions: dict[str, dict[str, Any]], limit: int
) -> tuple[list[tuple[str, float]], int]:
    """Demote, dedup by lineage and sort; returns (top ``limit`` (sid, score), total_found).

    Sessions are visited in raw-score order in chunks. Demotion can only lower
    a score, so once ``limit`` lineage groups have a final score above the next
    unvisited raw score, no unvisited session can enter the top ``limit``.
    """
    ids = list(raw)
    recency = {sid: sessions[sid]["last_seen_at"] or sessions[sid]["started_at"] or 0.0 for sid in ids}
    order = sorted(ids, key=lambda s: (-raw[s], -recency[s], s))
    proj = {sid: _projection(sessions[sid]) for sid in ids}
    group = {sid: proj[sid][0] or f"\x00{sid}" for sid in ids}
    total = len(set(group.values()))
    best: dict[str, tuple[float, float, str]] = {}  # group -> (score, recency, sid)
    chunk = max(limit * 2, 10)
    pos = 0
    while pos < len(order):
        batch = order[pos : pos + chunk]
        pos += len(batch)
        need_rate = [sid for sid in batch if not proj[sid][1]]
        rates = kc.rate_stats(db, need_rate)
        for sid in batch:
            automated = proj[sid][1] or rate_automated(*rates.get(sid, (0, None, None)))
            score = raw[sid] * (AUTOMATED_DEMOTION if automated else 1.0)
            cand = (score, recency[sid], sid)
            g = group[sid]
            if g not in best or (cand[0], cand[1]) > (best[g][0], best[g][1]):
                best[g] = cand
        bound = raw[order[pos]] if pos < len(order) else -math.inf
        if sum(1 for sc, _, _ in best.values() if sc > bound) >= limit:
            break
    winners = sorted(best.values(), key=lambda c: (-c[0], -c[1], c[2]))[:limit]
    return [(sid, score) for score, _, sid in winners], total


# -- building hits ------------------------------------------------------------------
_WINDOW, _OPENING, _CLOSING, _FIRST_USER = kc.WINDOW, kc.OPENING, kc.CLOSING, kc.FIRST_USER


def _message(r: Sequence[Any]) -> dict[str, Any]:
    return {"index": r[0], "role": r[1], "content": r[2], "timestamp": iso(r[3]), "archived": bool(r[4])}


def _window(db: _Db, session_id: str, anchor: int, window: int) -> list[dict[str, Any]]:
    return [_message(r) for r in kc.window_rows(db, session_id, anchor - window, anchor + window)]


def _hits(
    db: _Db, picks: list[tuple[dict[str, Any], int, float]], window: int, pq: ParsedQuery
) -> list[dict[str, Any]]:
    """Windows, bookends and missing titles of every hit, read in one compound statement.

    One sort of the row tuples (by hit, part, index: C comparisons, the rows arrive nearly
    in that order) puts every part in order; then one dict per message (~75 for 5 hits),
    no per-part row lists, slices or key functions.
    """
    if not picks:
        return []
    needs = [(row["id"], anchor, not (row.get("title") or row.get("agent"))) for row, anchor, _ in picks]
    parts: list[list[list[dict[str, Any]]]] = [[[], [], [], []] for _ in picks]
    first_user: dict[int, Sequence[Any]] = {}
    anchor_text: dict[int, str] = {}
    anchors = [anchor for _, anchor, _ in picks]
    rows = kc.hit_rows(db, needs, window, BOOKEND_SIZE)
    rows.sort()  # (hit, part, index) is unique: the content is never compared
    for k, part, idx, role, content, ts, archived in rows:
        if part == _FIRST_USER:
            first_user[k] = (idx, role, content)
            continue
        if part == _WINDOW and idx == anchors[k]:
            anchor_text[k] = content
        parts[k][part].append(
            {"index": idx, "role": role, "content": content, "timestamp": iso(ts), "archived": bool(archived)}
        )
    out = []
    for k, (row, anchor, score) in enumerate(picks):
        context, opening, closing = parts[k][_WINDOW], parts[k][_OPENING], parts[k][_CLOSING]
        hit: dict[str, Any] = {
            "session_id": row["id"],
            "title": _title_of(row, [first_user[k]] if k in first_user else []),
            "when": iso(row["last_seen_at"] or row["started_at"]),
            "snippet": make_snippet(anchor_text.get(k, ""), pq.needles),
            "score": float(f"{score:.6g}"),
            "anchor_index": anchor,
            "messages": context,
        }
        # More than BOOKEND_SIZE conversational messages exist iff the two ends differ.
        if len({m["index"] for m in opening} | {m["index"] for m in closing}) > BOOKEND_SIZE:
            hit["bookends"] = {"opening": opening, "closing": closing}
        out.append(hit)
    return out


def _title_of(row: dict[str, Any], first_user: Sequence[Sequence[Any]]) -> str:
    """The seed's title rule: title, else agent name, else the first user message, else the id."""
    if row.get("title"):
        return str(row["title"])
    if row.get("agent"):
        return str(row["agent"])
    text = " ".join(str(first_user[0][2] if first_user else "").split())
    return text[:60] if text else str(row["id"])


def _title(db: _Db, row: dict[str, Any]) -> str:
    first: list[Any] = []
    if not (row.get("title") or row.get("agent")):
        first = kc.first_user_row(db, row["id"])
    return _title_of(row, first)


def pg_index_status(store: Store) -> dict[str, Any]:
    """For ``memviewer doctor`` on a PostgreSQL store: the tsvector index and whether pg_trgm
    indexes unspaced scripts (``memviewer.store.pg_fts.status``)."""
    with store.read() as conn:
        return pg_fts.status(conn)


def fts_status(settings: Settings) -> dict[str, Any]:
    """For ``memviewer doctor``: FTS5 support, the tokenizers in use, rows indexed vs turns."""
    from memviewer import paths
    from memviewer.store.db import Store

    support = fts.sqlite_support()
    caps = (
        f"SQLite {support['version']}, FTS5 {'yes' if support['fts5'] else 'no'}, "
        f"trigram {'yes' if support['trigram'] else 'no'}"
    )
    if fts.forced_off():
        return {"ok": True, "detail": f"{fts.FORCE_ENV} is set: substring scan ({caps})"}
    if not support["fts5"]:
        return {"ok": True, "detail": f"degraded: no FTS5, keyword search scans ({caps})"}
    db = paths.db_path(settings.home_path)
    if not db.exists():
        return {"ok": True, "detail": f"store not created yet ({caps})"}
    store = Store.open(db, readonly=True)
    try:
        with store.read() as conn:
            have = fts.installed(conn)
            if not have["word"]:
                return {
                    "ok": False,
                    "detail": f"keyword index missing: the next write command installs it ({caps})",
                }
            n = fts.counts(conn)
            segments = fts.segment_count(conn)
    finally:
        store.close()
    parts = [f"{n['word']}/{n['turns']} turns indexed ({fts.WORD_TOKENIZER})"]
    if have["cjk"]:
        parts.append(f"{n['cjk']} CJK turns (trigram)")
    parts.append(f"{segments} segment{'' if segments == 1 else 's'}")
    ok = n["word"] == n["turns"]
    if not ok:
        parts.append("index out of step with turns: run `memviewer reindex`")
    return {"ok": ok, "detail": "; ".join(parts) + f" ({caps})", "segments": segments}
