"""The LanceDB side of memory: a derived, rebuildable copy of SQLite's turns.

Three tables live under ``paths.lance_dir(home)``:

* ``turns`` — one row per SQLite turn: ids, scope, role, archived flag,
  timestamp, text, a hash of the embedded text and its vector. ``idx`` is
  deliberately absent: compaction renumbers turns, so positions are always read
  from SQLite when results are hydrated.
* ``session_summaries`` — one row per session: the summary shown in recall's
  explain trace, the text its keyword index covers, its vector, and the turn
  count/hash it was computed from (so re-indexing an unchanged session is a
  no-op).
* ``session_windows`` — a chat's overlapping windows of consecutive turns (only sessions whose
  turns name their authors): session, scope, a hash of the window's text and its vector,
  rewritten with the session's summary. Stage 1 of hierarchical recall scores a chat session by
  its best window too.

Each has B-tree indexes on the filter columns; turns and summaries also have a native (Lance)
BM25 full-text index with the ICU tokenizer, so CJK text is segmented into words.
Rows added after an index was built are still searched (flat) until
``optimize()`` folds them in. Vector search is brute force while a scope is
small and uses an IVF_PQ index with a refine step beyond ``ann_threshold``
turns (measured in ``bench/bench_recall.py``; HNSW is avoided for its memory
and build cost).

A small ``state.json`` beside the tables holds the indexer's watermarks and
the embedding model the vectors came from. lancedb is imported lazily (about
1.2 s): nothing here imports it at module import time.

Writers in different processes (a hub, a CLI import, ``reindex``) coordinate
through two ``fcntl.flock`` files in the same folder: ``.write.lock`` is held
for each catch-up, rebuild or optimize pass (one writer at a time, so no turn is
embedded twice), and ``.indexer.lock`` is held for the life of a background
indexer, so a CLI process can tell that a hub owns the index and leave the
writing to it. flock locks vanish with their process, so a crash never leaves
a stale lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from memviewer import locks

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("memviewer.index")

TURNS = "turns"
SUMMARIES = "session_summaries"
WINDOWS = "session_windows"
STATE_FILE = "state.json"
WRITE_LOCK = ".write.lock"
OWNER_LOCK = ".indexer.lock"
STAGING_DIR = ".rebuild"
#: Version of the row layout; a different value in state.json forces a rebuild.
SCHEMA_VERSION = 1
#: LanceDB's caches, per connection (a ``lancedb.Session``). Its defaults are 6 GiB for
#: indexes and 1 GiB for metadata, LRUs weighed in bytes that nothing else empties: every
#: small append is a new table version with its own manifest, deletion files and file
#: metadata, so one connection indexing turns in small batches kept ~22 MB more per 1,000
#: turns for as long as it lived (docs/benchmarks.md, "Indexer memory"). Bounded, the
#: superseded entries are evicted instead. The working set of the queries recall runs is far below
#: these (1.8 MB on a 16,000-turn index); the index cache keeps the FTS posting lists,
#: B-tree pages and IVF partitions of a large home hot.
INDEX_CACHE_BYTES = 128 << 20
METADATA_CACHE_BYTES = 32 << 20
#: IVF_PQ query knobs: partitions probed and the exact re-ranking factor.
ANN_NPROBES = 20
ANN_REFINE = 10

#: The indexes each table must have: B-tree filter columns and the full-text column.
#: ``ensure_tables`` builds them; ``index_problems`` / ``repair_indexes`` check and rebuild them.
TABLE_INDEXES: dict[str, tuple[tuple[str, ...], str | None]] = {
    TURNS: (("turn_id", "session_id", "scope", "scope_id"), "text"),
    SUMMARIES: (("session_id", "scope", "scope_id"), "search_text"),
    WINDOWS: (("session_id", "scope", "scope_id"), None),
}
#: Every table, in the order they are created, dropped and swapped in.
TABLES = (TURNS, SUMMARIES, WINDOWS)

TURN_COLUMNS = (
    "turn_id",
    "num",
    "session_id",
    "episode_id",
    "scope",
    "scope_id",
    "role",
    "archived",
    "is_summary",
    "timestamp",
    "text",
    "text_hash",
)
SUMMARY_COLUMNS = (
    "session_id",
    "scope",
    "scope_id",
    "summary",
    "search_text",
    "turn_count",
    "source_hash",
    "method",
    "updated",
)


def sql_str(value: str) -> str:
    """A SQL string literal for a LanceDB filter (single quotes doubled)."""
    return "'" + str(value).replace("'", "''") + "'"


def scope_filter(scope: str | None, scope_id: str | None) -> str | None:
    parts = []
    if scope:
        parts.append(f"scope = {sql_str(scope)}")
    if scope_id:
        parts.append(f"scope_id = {sql_str(scope_id)}")
    return " AND ".join(parts) or None


def in_filter(column: str, values: Iterable[str]) -> str:
    return f"{column} IN ({', '.join(sql_str(v) for v in values)})"


def _turn_schema(dim: int) -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("turn_id", pa.string()),
            ("num", pa.int64()),
            ("session_id", pa.string()),
            ("episode_id", pa.string()),
            ("scope", pa.string()),
            ("scope_id", pa.string()),
            ("role", pa.string()),
            ("archived", pa.bool_()),
            ("is_summary", pa.bool_()),
            ("timestamp", pa.float64()),
            ("text", pa.string()),
            ("text_hash", pa.string()),
            ("vector", pa.list_(pa.float32(), dim)),
        ]
    )


def _summary_schema(dim: int) -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("session_id", pa.string()),
            ("scope", pa.string()),
            ("scope_id", pa.string()),
            ("summary", pa.string()),
            ("search_text", pa.string()),
            ("turn_count", pa.int64()),
            ("source_hash", pa.string()),
            ("method", pa.string()),
            ("updated", pa.float64()),
            ("vector", pa.list_(pa.float32(), dim)),
        ]
    )


def _window_schema(dim: int) -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("window_id", pa.string()),
            ("session_id", pa.string()),
            ("scope", pa.string()),
            ("scope_id", pa.string()),
            ("text_hash", pa.string()),
            ("vector", pa.list_(pa.float32(), dim)),
        ]
    )


class IndexMismatchError(Exception):
    """The stored vectors come from another model (or layout) than the one in use."""


class LanceIndex:
    """Opens (lazily) and queries the LanceDB tables of one memviewer home.

    One writer per home at a time (``write_lock``: a thread lock plus a flock, so
    neither a background indexer and a blocking ``sync`` in one process nor two
    processes can interleave); readers open it ``readonly`` and see new versions
    within ``read_consistency`` s.
    """

    def __init__(
        self, folder: str | Path, *, readonly: bool = False, read_consistency: float | None = None
    ) -> None:
        self.folder = Path(folder)
        self.readonly = readonly
        self.read_consistency = (
            read_consistency if read_consistency is not None else (1.0 if readonly else None)
        )
        self._db: Any = None
        self._session: Any = None
        self._tables: dict[str, Any] = {}
        self.lock = threading.RLock()
        self._flock_fd: int | None = None
        self._flock_depth = 0
        self._owner_fd: int | None = None

    # -- cross-process locks -------------------------------------------------------
    @contextlib.contextmanager
    def write_lock(self, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
        """Hold ``.write.lock`` (and the thread lock): the one index writer across processes.

        Re-entrant within this object. ``on_wait`` runs once if another process holds
        the lock, before blocking until it is free.
        """
        with self.lock:
            if self._flock_depth == 0:
                self.folder.mkdir(parents=True, exist_ok=True)
                fd = os.open(
                    self.folder / WRITE_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
                )
                try:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        if on_wait is not None:
                            on_wait()
                        fcntl.flock(fd, fcntl.LOCK_EX)
                except BaseException:
                    os.close(fd)
                    raise
                self._flock_fd = fd
            self._flock_depth += 1
            try:
                yield
            finally:
                self._flock_depth -= 1
                if self._flock_depth == 0 and self._flock_fd is not None:
                    os.close(self._flock_fd)  # closing the descriptor releases the flock
                    self._flock_fd = None

    def write_busy(self) -> bool:
        """Whether some writer (in any process) holds ``.write.lock`` right now."""
        if self._flock_fd is not None:
            return True
        try:
            fd = os.open(self.folder / WRITE_LOCK, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def claim_owner(self) -> bool:
        """Hold ``.indexer.lock`` until ``release_owner``: a background indexer serves this home.

        Returns False when another process (or another index object) already owns it.
        """
        if self._owner_fd is not None:
            return True
        fd = locks.try_lock(self.folder / OWNER_LOCK)
        if fd is None:
            return False
        self._owner_fd = fd
        self.set_owner_note({"pid": os.getpid()})
        return True

    def owns(self) -> bool:
        """Whether this object holds the owner lock (a background indexer serves from here)."""
        return self._owner_fd is not None

    def release_owner(self) -> None:
        if self._owner_fd is not None:
            locks.release(self._owner_fd)
            self._owner_fd = None

    def set_owner_note(self, note: dict[str, Any]) -> None:
        """Publish the owner's pid and last error in the owner lock file (best effort)."""
        if self._owner_fd is not None:
            locks.write_note(self._owner_fd, json.dumps(note))

    def owner(self) -> dict[str, Any] | None:
        """The note of the background indexer that owns this folder, or None if none runs.

        Our own claim does not count: this asks whether *someone else* writes.
        """
        path = self.folder / OWNER_LOCK
        if self._owner_fd is not None or not path.exists():
            return None
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                raw = os.pread(fd, 4096, 0)
                try:
                    note = json.loads(raw.decode("utf-8")) if raw else {}
                except ValueError:
                    note = {}
                return note if isinstance(note, dict) else {}
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    # -- connection ------------------------------------------------------------
    @property
    def exists(self) -> bool:
        return (self.folder / f"{TURNS}.lance").exists()

    def db(self) -> Any:
        if self._db is None:
            import lancedb

            if not self.readonly:
                self.folder.mkdir(parents=True, exist_ok=True)
            kwargs: dict[str, Any] = {
                "session": lancedb.Session(
                    index_cache_size_bytes=INDEX_CACHE_BYTES,
                    metadata_cache_size_bytes=METADATA_CACHE_BYTES,
                )
            }
            if self.read_consistency is not None:
                kwargs["read_consistency_interval"] = timedelta(seconds=self.read_consistency)
            self._session = kwargs["session"]
            self._db = lancedb.connect(str(self.folder), **kwargs)
        return self._db

    def cache_bytes(self) -> int:
        """What LanceDB's caches of this connection hold now (at most the two bounds above)."""
        session = self._session if self._db is not None else None
        return int(session.size_bytes) if session is not None else 0

    def table(self, name: str) -> Any | None:
        """The table, or None when it does not exist (yet)."""
        tbl = self._tables.get(name)
        if tbl is not None:
            return tbl
        if not (self.folder / f"{name}.lance").exists():
            return None
        try:
            tbl = self.db().open_table(name)
        except ValueError as exc:
            # Another thread is inside ``create_table``: the folder is there but the first
            # version is not written yet, so the table does not exist yet for a reader.
            if "was not found" not in str(exc):
                raise
            return None
        self._tables[name] = tbl
        return tbl

    def ensure_tables(self, dim: int) -> None:
        """Create the tables that are missing, with their scalar and full-text indexes (a home
        from before the windows table gets it here; its rows come with the next summaries)."""
        from lancedb.index import FTS, BTree

        with self.lock:
            db = self.db()
            for name, schema in (
                (TURNS, _turn_schema(dim)),
                (SUMMARIES, _summary_schema(dim)),
                (WINDOWS, _window_schema(dim)),
            ):
                keys, text_col = TABLE_INDEXES[name]
                if self.table(name) is not None:
                    continue
                tbl = db.create_table(name, schema=schema)
                for col in keys:
                    tbl.create_index(col, config=BTree(), replace=True)
                if text_col is not None:
                    tbl.create_index(text_col, config=FTS(base_tokenizer="icu"), replace=True)
                self._tables[name] = tbl

    def drop(self) -> None:
        """Remove every table and the state file (``reindex``)."""
        with self.lock:
            db = self.db()
            for name in TABLES:
                path = self.folder / f"{name}.lance"
                if path.exists():
                    try:
                        db.drop_table(name)
                    except Exception:  # a damaged table: it is derived data, remove the files
                        log.warning("could not drop %s cleanly; deleting %s", name, path)
                        shutil.rmtree(path, ignore_errors=True)
            self._tables.clear()
            with contextlib.suppress(FileNotFoundError):
                (self.folder / STATE_FILE).unlink()

    def close(self) -> None:
        self._tables.clear()
        self._db = None

    def reopen(self) -> None:
        """Forget cached table handles (another process may have replaced the tables)."""
        self._tables.clear()
        self._db = None

    def staging(self) -> LanceIndex:
        """A fresh, empty index in ``.rebuild/`` for ``reindex`` to fill before ``swap_in``."""
        folder = self.folder / STAGING_DIR
        shutil.rmtree(folder, ignore_errors=True)  # a rebuild interrupted earlier
        return LanceIndex(folder)

    def discard_staging(self) -> None:
        shutil.rmtree(self.folder / STAGING_DIR, ignore_errors=True)

    def swap_in(self, staged: LanceIndex) -> None:
        """Replace this index's tables and state by ``staged``'s (hold ``write_lock``).

        The state file goes first: if the swap is interrupted, the watermark is gone
        and the next catch-up re-embeds from scratch, so no turn can go missing.
        """
        staged.close()
        trash = self.folder / ".old"
        with self.lock:
            shutil.rmtree(trash, ignore_errors=True)
            trash.mkdir(parents=True)
            self.reopen()
            with contextlib.suppress(FileNotFoundError):
                (self.folder / STATE_FILE).unlink()
            for name in TABLES:
                path = self.folder / f"{name}.lance"
                if path.exists():
                    path.rename(trash / path.name)
                if (staged.folder / path.name).exists():
                    (staged.folder / path.name).rename(path)
            (staged.folder / STATE_FILE).replace(self.folder / STATE_FILE)
            shutil.rmtree(trash, ignore_errors=True)
            shutil.rmtree(staged.folder, ignore_errors=True)

    def refresh(self) -> None:
        """Make a long-lived reader see the latest committed versions."""
        for tbl in self._tables.values():
            with contextlib.suppress(Exception):
                tbl.checkout_latest()

    # -- state ---------------------------------------------------------------------
    def load_state(self) -> dict[str, Any]:
        try:
            return cast("dict[str, Any]", json.loads((self.folder / STATE_FILE).read_text(encoding="utf-8")))
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def save_state(self, state: dict[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{STATE_FILE}.{os.getpid()}"
        tmp.write_text(json.dumps(state, indent=1, sort_keys=True), encoding="utf-8")
        tmp.replace(self.folder / STATE_FILE)

    def check_model(self, name: str, dim: int) -> None:
        state = self.load_state()
        if state and (
            state.get("model") != name or state.get("dim") != dim or state.get("schema") != SCHEMA_VERSION
        ):
            raise IndexMismatchError(
                f"the vector index was built with model {state.get('model')!r} "
                f"(dim {state.get('dim')}, layout v{state.get('schema')}) but {name!r} "
                f"(dim {dim}, layout v{SCHEMA_VERSION}) is in use; run `memviewer reindex`"
            )

    # -- writes --------------------------------------------------------------------
    def add_turns(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            with self.lock:
                self._require(TURNS).add(rows)

    def upsert_turns(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            with self.lock:
                (
                    self._require(TURNS)
                    .merge_insert("turn_id")
                    .when_matched_update_all()
                    .when_not_matched_insert_all()
                    .execute(rows)
                )

    def set_archived(self, turn_ids: Sequence[str], archived: bool) -> None:
        with self.lock:
            tbl = self._require(TURNS)
            for i in range(0, len(turn_ids), 500):
                chunk = turn_ids[i : i + 500]
                if chunk:
                    tbl.update(where=in_filter("turn_id", chunk), values={"archived": archived})

    def delete_turns(self, turn_ids: Sequence[str]) -> None:
        with self.lock:
            tbl = self._require(TURNS)
            for i in range(0, len(turn_ids), 500):
                if turn_ids[i : i + 500]:
                    tbl.delete(in_filter("turn_id", turn_ids[i : i + 500]))

    def delete_where(self, where: str, name: str = TURNS) -> None:
        with self.lock:
            tbl = self.table(name)
            if tbl is not None:
                tbl.delete(where)

    def upsert_summaries(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            with self.lock:
                (
                    self._require(SUMMARIES)
                    .merge_insert("session_id")
                    .when_matched_update_all()
                    .when_not_matched_insert_all()
                    .execute(rows)
                )

    def replace_windows(self, session_ids: Sequence[str], rows: list[dict[str, Any]]) -> None:
        """The windows of ``session_ids`` become ``rows`` (all of them, none when empty)."""
        with self.lock:
            tbl = self._require(WINDOWS)
            for i in range(0, len(session_ids), 500):
                if session_ids[i : i + 500]:
                    tbl.delete(in_filter("session_id", session_ids[i : i + 500]))
            if rows:
                tbl.add(rows)

    def _require(self, name: str) -> Any:
        tbl = self.table(name)
        if tbl is None:
            raise RuntimeError(f"LanceDB table {name!r} is missing; call ensure_tables() first")
        return tbl

    # -- reads -----------------------------------------------------------------------
    def rows(self, name: str, where: str | None, columns: Sequence[str]) -> list[dict[str, Any]]:
        tbl = self.table(name)
        if tbl is None:
            return []
        q = tbl.search()
        if where:
            q = q.where(where)
        return cast("list[dict[str, Any]]", q.select(list(columns)).limit(None).to_list())

    def count(self, name: str, where: str | None = None) -> int:
        tbl = self.table(name)
        if tbl is None:
            return 0
        return int(tbl.count_rows(where) if where else tbl.count_rows())

    def dense(
        self,
        name: str,
        vector: np.ndarray,
        where: str | None,
        limit: int,
        columns: Sequence[str],
        *,
        use_ann: bool = False,
    ) -> list[dict[str, Any]]:
        """Nearest rows by cosine; ``_distance`` is ``1 - cosine``."""
        tbl = self.table(name)
        if tbl is None or limit <= 0:
            return []
        q = tbl.search(vector, vector_column_name="vector").distance_type("cosine")
        if where:
            q = q.where(where, prefilter=True)
        if use_ann:
            q = q.nprobes(ANN_NPROBES).refine_factor(ANN_REFINE)
        else:
            q = q.bypass_vector_index()
        return cast("list[dict[str, Any]]", q.select([*columns, "_distance"]).limit(limit).to_list())

    def fulltext(
        self, name: str, query: str, where: str | None, limit: int, columns: Sequence[str]
    ) -> list[dict[str, Any]]:
        """BM25 matches (any query term); ``_score`` is the BM25 score."""
        from lancedb.query import MatchQuery

        tbl = self.table(name)
        if tbl is None or limit <= 0 or not query.strip():
            return []
        column = "text" if name == TURNS else "search_text"
        # lancedb declares MatchQuery's defaults as pydantic.Field(1.0, kw_only=True), which
        # mypy reads as required arguments: the optional ones are not missing.
        match = MatchQuery(query, column)  # type: ignore[call-arg]
        q = tbl.search(match, query_type="fts")
        if where:
            q = q.where(where, prefilter=True)
        return cast("list[dict[str, Any]]", q.select([*columns, "_score"]).limit(limit).to_list())

    def vectors(
        self, name: str, key: str, ids: Sequence[str], *, by: str | None = None
    ) -> dict[str, np.ndarray]:
        """The vectors of the rows whose ``key`` is in ``ids``, by that key (or by ``by``: a
        chat's windows by their text hash, to reuse)."""
        import numpy as np

        by = by or key
        out: dict[str, np.ndarray] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            if chunk:
                for r in self.rows(name, in_filter(key, chunk), list(dict.fromkeys([key, by, "vector"]))):
                    out[r[by]] = np.asarray(r["vector"], dtype=np.float32)
        return out

    def table_version(self, name: str) -> int | None:
        """The version of ``name`` this handle reads (None: no such table)."""
        tbl = self.table(name)
        return None if tbl is None else int(tbl.version)

    def versions(self) -> dict[str, int]:
        out = {}
        for name in TABLES:
            tbl = self.table(name)
            if tbl is not None:
                out[name] = int(tbl.version)
        return out

    def has_vector_index(self) -> bool:
        tbl = self.table(TURNS)
        if tbl is None:
            return False
        return any(getattr(ix, "columns", None) == ["vector"] for ix in tbl.list_indices())

    def ids(self, name: str, key: str, where: str | None = None) -> set[str]:
        """Every ``key`` of the table's rows (matching ``where``), read as one Arrow column."""
        tbl = self.table(name)
        if tbl is None:
            return set()
        q = tbl.search()
        if where:
            q = q.where(where)
        return {str(v) for v in q.select([key]).limit(None).to_arrow()[key].to_pylist()}

    def id_batches(
        self, name: str, key: str, where: str | None = None, size: int = 500
    ) -> Iterator[list[str]]:
        """The ``key`` of every row (matching ``where``), streamed ``size`` at a time.

        One scan of the table's version at the start; the memory is one batch, however
        many rows match.
        """
        tbl = self.table(name)
        if tbl is None:
            return
        q = tbl.search()
        if where:
            q = q.where(where)
        for batch in q.select([key]).limit(None).to_batches(size):
            values = [str(v) for v in batch.column(key).to_pylist()]
            for i in range(0, len(values), size):  # a reader may hand back larger batches
                yield values[i : i + size]

    def present(self, name: str, key: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` the table holds (a B-tree lookup per chunk)."""
        out: set[str] = set()
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            if chunk:
                out.update(str(r[key]) for r in self.rows(name, in_filter(key, chunk), [key]))
        return out

    # -- integrity of the indexes ------------------------------------------------------
    def index_problems(self) -> list[str]:
        """The indexes a table should have but does not, or whose files are gone.

        Cheap: the manifest's index list and one ``stat`` per index, no query.
        """
        problems: list[str] = []
        for name, (keys, text_col) in TABLE_INDEXES.items():
            tbl = self.table(name)
            if tbl is None:
                continue
            configs = tbl.list_indices()
            have = {tuple(getattr(ix, "columns", None) or ()): ix for ix in configs}
            for col in (*keys, *([text_col] if text_col else [])):
                if (col,) not in have:
                    problems.append(
                        f"{name}: no {'full-text' if col == text_col else 'B-tree'} index on {col}"
                    )
            gone = [
                ix.name
                for ix in configs
                if (uuid := getattr(ix, "index_uuid", None))
                and not (self.folder / f"{name}.lance" / "_indices" / str(uuid)).is_dir()
            ]
            if gone:
                problems.append(
                    f"{name}: the files of index{'es' if len(gone) > 1 else ''} {', '.join(gone)} are gone"
                )
        return problems

    def repair_indexes(self) -> list[str]:
        """Rebuild every index ``index_problems`` names (hold ``write_lock``); returns the repaired ones.

        The indexes are derived from the table's own rows, so rebuilding one loses nothing.
        """
        from lancedb.index import FTS, BTree

        repaired: list[str] = []
        with self.lock:
            for name, (keys, text_col) in TABLE_INDEXES.items():
                tbl = self.table(name)
                if tbl is None:
                    continue
                configs = tbl.list_indices()
                have = {tuple(getattr(ix, "columns", None) or ()): ix for ix in configs}
                folder = self.folder / f"{name}.lance" / "_indices"
                vector_broken = False
                for col in (*keys, *([text_col] if text_col else []), "vector"):
                    ix = have.get((col,))
                    if col == "vector":
                        uuid = getattr(ix, "index_uuid", None) if ix is not None else None
                        vector_broken = bool(uuid) and not (folder / str(uuid)).is_dir()
                        continue
                    uuid = getattr(ix, "index_uuid", None) if ix is not None else None
                    if ix is not None and (not uuid or (folder / str(uuid)).is_dir()):
                        continue
                    config = FTS(base_tokenizer="icu") if col == text_col else BTree()
                    tbl.create_index(col, config=config, replace=True)
                    repaired.append(f"{name}.{col}")
                if vector_broken:  # dropped: the indexer trains it again above ann_threshold
                    try:
                        tbl.drop_index(have[("vector",)].name)
                        repaired.append(f"{name}.vector")
                    except Exception as exc:  # noqa: BLE001 - recall then falls back; reindex fixes it
                        log.warning("could not drop the damaged vector index of %s: %s", name, exc)
        if repaired:
            log.warning("rebuilt the missing or damaged vector-index indexes: %s", ", ".join(repaired))
        return repaired

    # -- maintenance -------------------------------------------------------------------
    def build_ann(self, *, force: bool = False, threshold: int = 50_000) -> bool:
        """Train an IVF_PQ index on the turn vectors once the table outgrows ``threshold``."""
        from lancedb.index import IvfPq

        with self.lock:
            tbl = self.table(TURNS)
            if tbl is None:
                return False
            n = tbl.count_rows()
            if not force and (n < threshold or self.has_vector_index()):
                return False
            dim = tbl.schema.field("vector").type.list_size
            partitions = max(1, min(4096, int(n**0.5)))
            sub_vectors = next(s for s in (dim // 8, dim // 4, dim // 2, dim, 1) if s and dim % s == 0)
            tbl.create_index(
                "vector",
                config=IvfPq(distance_type="cosine", num_partitions=partitions, num_sub_vectors=sub_vectors),
                replace=True,
            )
            log.info("built IVF_PQ index over %d turns (%d partitions)", n, partitions)
            return True

    def optimize(self, keep_versions_s: float = 600.0, tables: Sequence[str] = TABLES) -> None:
        """Fold new rows into the indexes, compact small fragments, drop old versions.

        Versions younger than ``keep_versions_s`` survive so that readers in
        other processes never lose the version they are reading.
        """
        with self.lock:
            for name in tables:
                tbl = self.table(name)
                if tbl is not None:
                    tbl.optimize(cleanup_older_than=timedelta(seconds=keep_versions_s))

    def disk_bytes(self) -> int:
        total = 0
        for root, _dirs, files in os.walk(self.folder):
            for f in files:
                with contextlib.suppress(OSError):
                    total += os.path.getsize(os.path.join(root, f))
        return total
