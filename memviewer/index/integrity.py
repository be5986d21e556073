"""Does the vector index hold what SQLite says it should? Both ways, per table.

SQLite is the source of truth and LanceDB a derived copy, so the copy can be checked
against it. The indexer's watermark (``turn_num`` in ``state.json``, the one that
``memviewer.index.progress`` reads for the lag) says what the copy must hold:

* **turns**: one row for every SQLite turn with ``num`` up to the watermark; a row whose
  turn SQLite does not have is *foreign* (the index is ahead of the store);
* **session summaries**: one for every session with such a turn; a summary of a session
  SQLite does not have is foreign;
* **indexes**: each table's B-tree and full-text indexes are listed in its manifest and
  their files are on disk (``LanceIndex.index_problems``).

``quick_check`` compares counts (a handful of cheap queries, no id is read): the
indexer runs it on its first pass in a process (the hub at start, ``reindex
--catch-up``, an import) and then every ``VERIFY_EVERY_S``; recall runs it after
answering (cached until the index or the store changes); ``doctor`` runs the exact one.
``exact_check`` reads the ids of both sides and names what is missing, and ``heal``
(under the write lock) re-embeds exactly those turns, re-summarises exactly those
sessions and rebuilds missing indexes. Foreign rows are reported, never deleted here:
``memviewer reindex`` rebuilds the index from SQLite.

A reader without the write lock can judge too. The indexer appends rows before it
advances the watermark, so "fewer rows than the watermark promises" is always a real
loss (a rolled-back manifest, deleted files). Summaries are written at the end of a
pass, so they are judged only when no writer was at work during the check; "more rows
than SQLite has" only once the indexer has examined every event, because a deletion
reaches SQLite first and the index after.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from memviewer.index import timing

if TYPE_CHECKING:
    from memviewer.index.lance import LanceIndex
    from memviewer.store.db import Store

log = logging.getLogger("memviewer.index")

#: Recall escalations (docs/cli.md): rows lost below the watermark or summaries missing;
#: rows SQLite does not have; an index whose files are gone or that cannot be queried.
INDEX_INCOMPLETE = "index:incomplete"
INDEX_AHEAD = "index:ahead"
INDEX_DAMAGED = "index:damaged"
#: A long-running indexer re-checks this often (counts only; cheap).
VERIFY_EVERY_S = 60.0
HEAL_BATCH = 2048
SAMPLE = 5
HEAL_HINT = (
    "a hub repairs this when it starts (it re-embeds what is missing and rebuilds lost indexes), "
    "as does `memviewer reindex --catch-up`; `memviewer reindex` rebuilds the whole index from SQLite"
)
AHEAD_HINT = "run `memviewer reindex` to rebuild the index from SQLite"


@dataclass
class TableCheck:
    """One table: rows SQLite says it should hold against the rows it holds."""

    expected: int
    indexed: int
    missing: int
    extra: int
    missing_ids: list[str] | None = None  # exact check only (sorted)
    extra_ids: list[str] | None = None
    #: Summaries not counted as missing: their sessions were active within the summarizer's
    #: normal delay (``timing.SUMMARY_GRACE_S``; ``doctor`` only), so they may be in flight.
    pending: int = 0

    def public(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "expected": self.expected,
            "indexed": self.indexed,
            "missing": self.missing,
            "extra": self.extra,
        }
        if self.missing_ids:
            out["missing_sample"] = self.missing_ids[:SAMPLE]
        if self.extra_ids:
            out["extra_sample"] = self.extra_ids[:SAMPLE]
        if self.pending:
            out["pending"] = self.pending
        return out


@dataclass
class Integrity:
    """The verdict of one check (``exact``: ids compared, else counts)."""

    watermark: int
    exact: bool
    settled: bool  # the indexer has examined every event: "ahead" is meaningful
    turns: TableCheck
    summaries: TableCheck | None  # None: a writer was at work, summaries may be in flight
    index_problems: list[str] = field(default_factory=list)

    @property
    def behind(self) -> bool:
        return self.turns.missing > 0 or (self.summaries is not None and self.summaries.missing > 0)

    @property
    def ahead(self) -> bool:
        return self.settled and (
            self.turns.extra > 0 or (self.summaries is not None and self.summaries.extra > 0)
        )

    @property
    def damaged(self) -> bool:
        return bool(self.index_problems)

    @property
    def ok(self) -> bool:
        return not (self.behind or self.ahead or self.damaged)

    def escalations(self) -> list[str]:
        out = []
        if self.behind:
            out.append(INDEX_INCOMPLETE)
        if self.ahead:
            out.append(INDEX_AHEAD)
        if self.damaged:
            out.append(INDEX_DAMAGED)
        return out

    def problems(self) -> list[str]:
        """One phrase per problem, for ``doctor`` and logs."""
        out = []
        t, s = self.turns, self.summaries
        if t.missing:
            line = (
                f"{t.missing:,} of {t.expected:,} embedded turns are missing from the vector index "
                f"(it holds {t.indexed:,}: rolled back or lost)"
            )
            out.append(line + _sample(t.missing_ids))
        if s is not None and s.missing:
            out.append(f"{s.missing:,} of {s.expected:,} sessions have no summary" + _sample(s.missing_ids))
        if self.settled and t.extra:
            out.append(f"{t.extra:,} turn rows that SQLite does not have (ahead)" + _sample(t.extra_ids))
        if self.settled and s is not None and s.extra:
            out.append(
                f"{s.extra:,} summaries of sessions SQLite does not have (ahead)" + _sample(s.extra_ids)
            )
        out.extend(self.index_problems)
        return out

    def hint(self) -> str:
        return AHEAD_HINT if self.ahead and not (self.behind or self.damaged) else HEAL_HINT

    def public(self) -> dict[str, Any]:
        """The JSON form (recall's ``diagnostics.index_integrity``, doctor's ``integrity``)."""
        return {
            "ok": self.ok,
            "exact": self.exact,
            "watermark": self.watermark,
            "settled": self.settled,
            "turns": self.turns.public(),
            "summaries": self.summaries.public() if self.summaries is not None else None,
            "indexes": list(self.index_problems),
            "problems": self.problems(),
            "hint": None if self.ok else self.hint(),
        }


def _sample(ids: list[str] | None) -> str:
    if not ids:
        return ""
    more = " …" if len(ids) > SAMPLE else ""
    return f" (e.g. {', '.join(ids[:SAMPLE])}{more})"


def _watermark(state: dict[str, Any]) -> int:
    try:
        return int(state.get("turn_num", 0) or 0)
    except (TypeError, ValueError):
        return 0


def quick_check(index: LanceIndex, store: Store, *, writer: bool = False) -> Integrity:
    """Counts on both sides (no ids read). ``writer``: the caller holds the write lock."""
    from memviewer.index.lance import SUMMARIES, TURNS
    from memviewer.store import index_progress as q

    busy = False if writer else index.write_busy()
    state = index.load_state()
    w = _watermark(state)
    turns = summaries = 0
    problems: list[str] = []
    if index.exists:
        # rows above the watermark exist only while (or after a crash during) an append
        turns = index.count(TURNS, f"num <= {w}") if state.get("appending") else index.count(TURNS)
        summaries = index.count(SUMMARIES)
        problems = index.index_problems()
    with store.read() as conn:
        sql_turns = q.turns_through(conn, w)
        with_turns = q.sessions_with_turns_through(conn, w)
        all_sessions = q.session_count(conn)
        _num, seq = q.heads(conn)
    steady = index.load_state() == state and (writer or not (busy or index.write_busy()))
    return Integrity(
        watermark=w,
        exact=False,
        settled=steady and int(state.get("event_seq", 0) or 0) >= seq,
        turns=TableCheck(sql_turns, turns, max(0, sql_turns - turns), max(0, turns - sql_turns)),
        summaries=TableCheck(
            with_turns, summaries, max(0, with_turns - summaries), max(0, summaries - all_sessions)
        )
        if steady
        else None,
        index_problems=problems,
    )


def exact_check(index: LanceIndex, store: Store, *, writer: bool = False) -> Integrity:
    """The ids of both sides: which turns and summaries are missing, which are foreign."""
    from memviewer.index.lance import SUMMARIES, TURNS
    from memviewer.store import index_progress as q

    busy = False if writer else index.write_busy()
    state = index.load_state()
    w = _watermark(state)
    turn_ids: set[str] = set()
    summary_ids: set[str] = set()
    problems: list[str] = []
    if index.exists:
        turn_ids = index.ids(TURNS, "turn_id", f"num <= {w}")
        summary_ids = index.ids(SUMMARIES, "session_id")
        problems = index.index_problems()
    with store.read() as conn:
        sql_turns = q.turn_ids_through(conn, w)
        with_turns = q.session_ids_with_turns_through(conn, w)
        sessions = q.session_ids(conn)
        _num, seq = q.heads(conn)
    steady = index.load_state() == state and (writer or not (busy or index.write_busy()))
    missing_turns = sorted(sql_turns - turn_ids)
    extra_turns = sorted(turn_ids - sql_turns)
    missing_summaries = sorted(with_turns - summary_ids)
    extra_summaries = sorted(summary_ids - sessions)
    return Integrity(
        watermark=w,
        exact=True,
        settled=steady and int(state.get("event_seq", 0) or 0) >= seq,
        turns=TableCheck(
            len(sql_turns), len(turn_ids), len(missing_turns), len(extra_turns), missing_turns, extra_turns
        ),
        summaries=TableCheck(
            len(with_turns),
            len(summary_ids),
            len(missing_summaries),
            len(extra_summaries),
            missing_summaries,
            extra_summaries,
        )
        if steady
        else None,
        index_problems=problems,
    )


def heal(
    index: LanceIndex,
    store: Store,
    *,
    read_turns: Callable[[Sequence[str]], list[dict[str, Any]]],
    embed_rows: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
    summarise: Callable[[list[str]], int],
) -> dict[str, Any]:
    """Make the index hold what SQLite says it should (the caller holds the write lock).

    ``read_turns`` reads SQLite turns by id in the indexer's row shape, ``embed_rows``
    turns them into LanceDB rows, ``summarise`` (re)writes the summaries of sessions.
    Returns what was done: ``{"turns", "summaries", "indexes", "foreign_turns",
    "foreign_summaries"}`` (all zero / empty when the quick check found nothing).
    """
    from memviewer.index.lance import TURNS

    report: dict[str, Any] = {"turns": 0, "summaries": 0, "indexes": [], "foreign_turns": 0}
    report["foreign_summaries"] = 0
    started = time.monotonic()
    quick = quick_check(index, store, writer=True)
    if quick.damaged:
        report["indexes"] = index.repair_indexes()
    if not (quick.behind or quick.ahead):
        return report
    exact = exact_check(index, store, writer=True)
    missing = exact.turns.missing_ids or []
    if missing:
        log.warning(
            "the vector index lost %d of %d turns below its watermark (e.g. %s); re-embedding them",
            len(missing),
            exact.turns.expected,
            ", ".join(missing[:SAMPLE]),
        )
    for i in range(0, len(missing), HEAL_BATCH):
        rows = read_turns(missing[i : i + HEAL_BATCH])
        if rows:
            index.upsert_turns(embed_rows(rows))
            report["turns"] += len(rows)
    gone = (exact.summaries.missing_ids or []) if exact.summaries is not None else []
    if gone:
        log.warning(
            "%d sessions had no summary in the vector index (e.g. %s); writing them", len(gone), gone[0]
        )
        report["summaries"] = summarise(gone)
    if exact.settled and (exact.turns.extra or (exact.summaries and exact.summaries.extra)):
        report["foreign_turns"] = exact.turns.extra
        report["foreign_summaries"] = exact.summaries.extra if exact.summaries else 0
        log.warning(
            "the vector index holds %d turns and %d summaries that SQLite does not have; %s",
            report["foreign_turns"],
            report["foreign_summaries"],
            AHEAD_HINT,
        )
    if report["turns"] or report["summaries"]:
        log.info(
            "healed the vector index: %d turns re-embedded, %d summaries written in %.1f s (%s)",
            report["turns"],
            report["summaries"],
            time.monotonic() - started,
            TURNS,
        )
    return report


# -- a cached quick check for recall (counts are cheap, but recall is the hot path) ------------
_CACHE: weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], Integrity]] = weakref.WeakKeyDictionary()


def _cache_key(index: LanceIndex, store: Store) -> tuple[Any, ...]:
    from memviewer.index.lance import STATE_FILE
    from memviewer.store import index_progress as q

    try:
        st = (index.folder / STATE_FILE).stat()
        stamp: tuple[Any, ...] = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = ()
    with store.read() as conn:
        heads = q.heads(conn)
    return (stamp, tuple(sorted(index.versions().items())), heads, index.write_busy())


def recall_check(index: LanceIndex, store: Store) -> Integrity | None:
    """The quick check, reused until the state file, a table version or the store moves.

    None when even counting fails (recall then reports the index as damaged anyway).
    """
    try:
        key = _cache_key(index, store)
        hit = _CACHE.get(index)
        if hit is not None and hit[0] == key:
            return hit[1]
        result = quick_check(index, store)
        _CACHE[index] = (key, result)
        return result
    except Exception as exc:  # noqa: BLE001 - a check must never break recall
        log.warning("could not check the vector index: %s", exc)
        return None


def doctor_check(index: LanceIndex, store: Store, *, exact_limit: int) -> Integrity:
    """For ``memviewer doctor``: the exact check up to ``exact_limit`` turns, counts above.

    Waits briefly for a running pass to finish so summaries can be judged.
    """
    deadline = time.monotonic() + 3.0
    while index.write_busy() and time.monotonic() < deadline:
        time.sleep(0.05)
    from memviewer.index.lance import TURNS

    big = index.exists and index.count(TURNS) > exact_limit
    result = quick_check(index, store) if big else exact_check(index, store)
    return forgive_recent_summaries(result, store, time.time() - timing.SUMMARY_GRACE_S)


def forgive_recent_summaries(result: Integrity, store: Store, since: float) -> Integrity:
    """``result`` without the missing summaries of sessions active at ``since`` or later.

    A session a live agent opened seconds ago gets its first summary from the indexer's
    next pass: that is its normal delay, not a gap. The exact check names the sessions;
    the quick one (huge homes) can only take off how many recently active sessions have
    a turn below the watermark, at most as many as are missing.
    """
    from memviewer.store import index_progress as q

    s = result.summaries
    if s is None or not s.missing:
        return result
    with store.read() as conn:
        if s.missing_ids is not None:
            recent = q.active_since(conn, s.missing_ids, since)
            kept = [i for i in s.missing_ids if i not in recent]
            pending = len(s.missing_ids) - len(kept)
        else:
            kept = None
            pending = min(s.missing, q.active_with_turns_through(conn, result.watermark, since))
    if not pending:
        return result
    summaries = replace(s, missing=s.missing - pending, missing_ids=kept, pending=pending)
    return replace(result, summaries=summaries)


__all__ = [
    "INDEX_AHEAD",
    "INDEX_DAMAGED",
    "INDEX_INCOMPLETE",
    "Integrity",
    "TableCheck",
    "doctor_check",
    "exact_check",
    "forgive_recent_summaries",
    "heal",
    "quick_check",
    "recall_check",
]
