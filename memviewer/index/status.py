"""How far the vector index is, for ``Indexer.status`` (hub ``stats``) and ``memviewer doctor``.

``indexer_status`` reports a running indexer from its own process; ``index_status`` opens
a home's index read-only and judges it (lag, duplicates, integrity) without an indexer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memviewer import paths
from memviewer.store import index_progress, indexing
from memviewer.words import plural

if TYPE_CHECKING:
    from memviewer.config import Settings
    from memviewer.index.lance import LanceIndex
    from memviewer.present.index_words import Embedding
    from memviewer.store.db import Store


def indexer_status(
    index: LanceIndex,
    store: Store,
    *,
    last_sync: float | None,
    background: bool,
    last_error: str | None,
    healed: dict[str, Any],
) -> dict[str, Any]:
    """Rows in the index and in SQLite, the lag and its ETA, and what this indexer last did."""
    from memviewer.index.lance import SUMMARIES, TURNS
    from memviewer.index.progress import eta_seconds

    state = index.load_state()
    with store.read() as conn:
        sql_turns = indexing.turn_count(conn)
        behind = index_progress.turns_after(conn, int(state.get("turn_num", 0)))
    return {
        "indexed_turns": index.count(TURNS),
        "summaries": index.count(SUMMARIES),
        "sql_turns": sql_turns,
        "lag": behind,
        "turn_num": state.get("turn_num", 0),
        "event_seq": state.get("event_seq", 0),
        "last_sync": last_sync or state.get("last_sync"),
        "model": state.get("model"),
        "background": background,
        "ann_index": index.has_vector_index(),
        "last_error": last_error,
        "healed": healed or None,  # the last integrity repair (memviewer.index.integrity)
        "rate_turns_s": state.get("rate_turns_s"),
        "eta_s": eta_seconds(behind, state.get("rate_turns_s")),
    }


def index_status(settings: Settings, embedding: Callable[[], Embedding] | None = None) -> dict[str, Any]:
    """For ``memviewer doctor``: tables, model, row counts and lag, opened read-only.

    A lag within ``timing.CATCH_UP_GRACE_S`` (turns published a moment ago) is fine;
    past it the check fails and says who embeds the turns (``embedding()``, asked only
    then: ``memviewer.wire.embedding.who_embeds``), or that nothing does.
    """
    from memviewer.index.lance import SUMMARIES, TURNS, WINDOWS, LanceIndex
    from memviewer.index.progress import index_lag
    from memviewer.present.index_words import waiting_line
    from memviewer.store.db import Store

    home = settings.home_path
    folder = paths.lance_dir(home)
    db = paths.db_path(home)
    sql_turns = behind = sql_sessions = 0
    # read_consistency 0: every read sees the newest table version, so a pass that has
    # just saved its watermark is never judged against a table view a second older
    index = LanceIndex(folder, readonly=True, read_consistency=0.0)
    state = index.load_state()
    lag: dict[str, Any] = {"lag": 0}
    if db.exists():
        store = Store.open(db, readonly=True)
        try:
            with store.engine.connect() as conn:
                sql_turns = indexing.turn_count(conn)
                lag = index_lag(home, conn)
                behind = int(lag["lag"])
                sql_sessions = indexing.sessions_with_turns_count(conn)
        finally:
            store.close()
    if not index.exists:
        ok = sql_turns == 0
        detail = f"{folder}: no index yet ({plural(sql_turns, 'turn')} in SQLite)"
        if not ok:
            detail += "; run `memviewer reindex`"
        return {"ok": ok, "detail": detail}
    turns, summaries, windows = index.count(TURNS), index.count(SUMMARIES), index.count(WINDOWS)
    ann = "IVF_PQ" if index.has_vector_index() else "brute force"
    detail = (
        f"{folder}: {plural(turns, 'turn')}, {plural(summaries, 'session summary', 'session summaries')}, "
        f"{plural(windows, 'chat window')}, model "
        f"{state.get('model')} (dim {state.get('dim')}), vector search {ann}, "
        f"lag {plural(behind, 'turn')}"
    )
    if behind:
        eta = lag.get("eta_s")
        detail += f", ETA {eta:.0f} s" if eta is not None else ", ETA unknown"
    ok = behind == 0 or bool(lag.get("within_grace"))
    out: dict[str, Any] = {}
    if behind and ok:
        detail += f" (catching up: the oldest was stored {lag.get('waiting_s')} s ago)"
    elif behind:
        who = embedding() if embedding is not None else None
        if who is None:
            detail += " (a running hub catches up by itself; otherwise run `memviewer reindex`)"
        else:
            detail += f"; {waiting_line(lag, who)}"
            out.update(who.public())
    extra = _duplicates(index, TURNS, "turn_id", turns, sql_turns - behind)
    extra += _duplicates(index, SUMMARIES, "session_id", summaries, sql_sessions)
    if extra:
        ok = False
        detail += "; " + "; ".join(extra) + ": run `memviewer reindex`"
    health = _integrity(index, db)  # both ways, per table: memviewer.index.integrity
    if health is not None and not health.ok:
        ok = False
        detail += "; " + "; ".join(health.problems()) + f": {health.hint()}"
    index.close()
    out = {"ok": ok, "detail": detail, **out}
    if behind:
        out["lag"] = {k: lag.get(k) for k in ("lag", "eta_s", "waiting_s", "within_grace")}
    if health is not None:
        out["integrity"] = health.public()
    return out


def _integrity(index: Any, db: Any) -> Any:
    from memviewer.index.integrity import doctor_check
    from memviewer.store.db import Store

    if not db.exists():
        return None
    store = Store.open(db, readonly=True)
    try:
        return doctor_check(index, store, exact_limit=DISTINCT_CHECK_ROWS)
    finally:
        store.close()


#: Above this many rows ``doctor`` compares counts only instead of reading every id.
DISTINCT_CHECK_ROWS = 2_000_000


def _duplicates(index: Any, table: str, key: str, rows: int, expected: int) -> list[str]:
    """Problems of one table: more rows than SQLite has items, or an id indexed twice."""
    import pyarrow.compute as pc

    what = "turn" if key == "turn_id" else "session summary"
    if rows > DISTINCT_CHECK_ROWS:  # too many ids to read: counts only (stale rows count too)
        return [f"{rows - expected} more {what} rows than SQLite has"] if rows > expected else []
    if rows == 0:
        return []
    ids = index.table(table).search().select([key]).limit(None).to_arrow()[key]
    unique = int(pc.count_distinct(ids).as_py())
    return [f"{rows - unique} duplicated {what} rows"] if unique < rows else []
