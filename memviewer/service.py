"""``MemoryService``: the one API through which the hub, the CLI and the TUI
read and write memory.

It owns the SQL store and the session manager, and opens the heavier layers
(keyword search, the LanceDB index and recall, exporters) lazily on first use,
so a caller that only lists sessions never imports LanceDB or onnxruntime.
``memviewer.wire.remote.RemoteService`` offers the same methods over the hub
socket.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memviewer import __version__, paths, recall_log
from memviewer.config import Settings
from memviewer.errors import INTERNAL, INVALID_ARGUMENT, NOT_FOUND, MemviewerError
from memviewer.events import EventRecord
from memviewer.index.parts import IndexParts
from memviewer.session import annotations as annotation_rows
from memviewer.session.manager import SessionManager
from memviewer.store import repos
from memviewer.store.db import Store

if TYPE_CHECKING:
    from memviewer.index.embedder import Embedder
    from memviewer.index.indexer import Indexer
    from memviewer.llm import LlmEndpoint
    from memviewer.praisonai.format import ImportReport
    from memviewer.recall.rerank import Reranker
    from memviewer.recall_log import RecordAs
    from memviewer.session.bus import EventBus
    from memviewer.session.chunked_import import ChunkedImport

log = logging.getLogger("memviewer")


def open_store(home: Path, store_url: str | None = None, readonly: bool = False) -> Store:
    """Open (and migrate, unless read-only) the store, or raise a ``MemviewerError`` that
    says what is wrong with it: the home is a file, the database is another
    application's or no database at all, or a newer memviewer wrote it.
    The store is never changed when it is refused.
    """
    from memviewer.store import migrations
    from memviewer.store.db import DriverError, url_label

    db = paths.db_path(home)
    hint = {
        "hint": "point --home (or MEMVIEWER_HOME) at a memviewer home folder; "
        f"move {db} aside to start a new store there"
    }
    if store_url is None:
        if home.exists() and not home.is_dir():  # no memviewer.db to move aside: the home itself is
            raise MemviewerError(
                INTERNAL,
                f"{home} is not a memviewer store (it is a file, not a folder)",
                data={
                    "reason": "not_a_store",
                    "hint": "the home must be a folder: pick another --home (or MEMVIEWER_HOME), "
                    f"or move the file {home} aside",
                },
            )
        if db.is_dir():
            raise MemviewerError(
                INTERNAL,
                f"{db} is not a memviewer store (it is a folder)",
                data={"reason": "not_a_store", **hint},
            )
        from memviewer.wire import trust

        try:  # a home of another user is refused; ours is created (or tightened to) 0700
            trust.check_home(home)
        except trust.UntrustedPath as exc:
            raise MemviewerError(
                INTERNAL, str(exc), data={"reason": "foreign_home", "hint": "use a home of your own (--home)"}
            ) from None
        if not readonly:
            try:
                trust.ensure_private_dir(home, allow_symlink=True)
            except OSError as exc:
                raise MemviewerError(
                    INTERNAL, f"cannot create the home folder {home}: {exc.strerror or exc}"
                ) from None
    label = str(db) if store_url is None else url_label(store_url)
    store: Store | None = None
    try:
        if store_url is None and not readonly and db.is_file() and db.stat().st_size:
            # Look before a read-write open: it would switch the file to WAL mode
            # (a change to someone else's database) and migrate it.
            store = Store(f"sqlite:///{db}", readonly=True)
            store.check_compatible()
            store.close()
        store = Store(store_url or f"sqlite:///{db}", readonly=readonly)
        if readonly:  # a read-write open checks while migrating
            store.check_compatible()
        return store
    except migrations.NotAStoreError as exc:
        _dispose(store)
        raise MemviewerError(
            INTERNAL,
            f"{label} is not a memviewer store ({exc.reason})",
            data={"reason": "not_a_store", **hint},
        ) from None
    except MemviewerError:
        _dispose(store)
        raise
    except DriverError as exc:
        _dispose(store)
        orig = exc.orig or exc
        code = getattr(orig, "sqlite_errorcode", None)
        if code is not None and code & 0xFF in (11, 26):  # SQLITE_CORRUPT, SQLITE_NOTADB
            raise MemviewerError(
                INTERNAL, f"{label} is not a memviewer store ({orig})", data={"reason": "not_a_store", **hint}
            ) from None
        raise MemviewerError(
            INTERNAL, f"cannot open the store {label}: {orig}", data={"reason": "storage_error"}
        ) from None


def _dispose(store: Store | None) -> None:
    if store is not None:
        store.close()


class MemoryService:
    """Sessions, episodes, turns, events, search, recall and export."""

    def __init__(
        self,
        settings: Settings,
        *,
        readonly: bool = False,
        embedder: Embedder | None = None,
        store_url: str | None = None,
    ) -> None:
        self.settings = settings
        self.home = settings.home_path
        self.readonly = readonly
        self.store = open_store(self.home, store_url, readonly)
        self._store_url = store_url
        self.parts = IndexParts(self.store, settings, readonly=readonly, embedder=embedder)
        self.manager = SessionManager(
            self.store,
            classify=self._make_classifier(),
            retention=settings.retention,
            active_window=settings.active_window,
        )
        self.manager.recall_log_max = settings.recall_log_max
        self.manager.recall_log_days = settings.recall_log_days
        self.manager.recall_log_mb = settings.recall_log_mb
        # Where recall log entries go when not written here directly: a hub running on this
        # service sets it to hand them to its one writer thread (see ``record_recall``).
        self.record_sink: Callable[[recall_log.Entry], None] | None = None
        self._log_route: Any = None  # RemoteService or SessionManager for a read-only service
        self._lazy: dict[str, Any] = {}
        # An optional neural reranker that every recall blends in as
        # 0.7 * score + 0.3 * neural; none ships by default.
        self.reranker: Reranker | None = None

    # -- wiring -------------------------------------------------------------
    def _make_classifier(self) -> Callable[[str], Any] | None:
        from memviewer.session.intent import IntentClassifier

        endpoint = self.llm_endpoint()
        return IntentClassifier(endpoint).classify

    def llm_endpoint(self) -> LlmEndpoint | None:
        return self.parts.llm_endpoint()

    @property
    def bus(self) -> EventBus:
        return self.manager.bus

    @property
    def embedder(self) -> Embedder:
        return self.parts.embedder

    def _get(self, name: str, factory: Callable[[], Any]) -> Any:
        if name not in self._lazy:
            self._lazy[name] = factory()
        return self._lazy[name]

    # -- writes (delegated to the manager) -----------------------------------
    def open_session(self, **kwargs: Any) -> dict[str, Any]:
        return self.manager.open_session(**kwargs)

    def start_episode(self, session_id: str, user_message: str, **kwargs: Any) -> dict[str, Any]:
        return self.manager.start_episode(session_id, user_message, **kwargs)

    def add_turn(self, episode_id: str, role: str, content: str, **kwargs: Any) -> dict[str, Any]:
        return self.manager.add_turn(episode_id, role, content, **kwargs)

    def finalize_episode(self, episode_id: str, r_task: float | None = None, **kw: Any) -> dict[str, Any]:
        return self.manager.finalize_episode(episode_id, r_task, **kw)

    def abandon_episode(self, episode_id: str, reason: str | None = None, **kw: Any) -> dict[str, Any]:
        return self.manager.abandon_episode(episode_id, reason, **kw)

    def close_session(self, session_id: str, **kwargs: Any) -> dict[str, Any]:
        return self.manager.close_session(session_id, **kwargs)

    def delete_session(self, session_id: str) -> dict[str, Any]:
        return self.manager.delete_session(session_id)

    def apply_batch(self, commands: list[Any]) -> list[dict[str, Any]]:
        return self.manager.apply_batch(commands)

    def merge_keyword_index(self, pages: int | None = None, above: int = 1) -> tuple[int, int, bool]:
        """One bounded merge step of the keyword index's segments when it holds more than
        ``above`` (``store.fts.merge_step``: answers stay the same, lookups get cheaper);
        returns the segments before and after and whether anything merged ((0, 0, False)
        without an FTS5 index). The hub runs it on its writer thread."""
        from memviewer.store import fts

        if not self.store.is_sqlite or self.readonly:
            return 0, 0, False
        db = paths.db_path(self.home)
        with self.store.write() as tx:
            # The last merge rewrites the whole index: leave it on a disk without that much room
            # (the database's size, more than the index needs), so publishes never run out of it.
            if db.exists() and shutil.disk_usage(db.parent).free < db.stat().st_size:
                n = fts.segment_count(tx.conn)
                log.info("keyword index not merged (%d segments): less free disk than the store's size", n)
                return n, n, False
            return fts.merge_step(tx.conn, fts.MERGE_PAGES if pages is None else pages, above)

    def merge_keyword_index_fully(self, max_steps: int = 1000) -> tuple[int, int]:
        """The bounded ``merge_keyword_index`` steps run until one segment is left (or nothing
        merges, or ``max_steps``): what an import does when no hub serves the home. Each step
        is its own write transaction, so another writer waits at most one step. Returns the
        segments before and after ((0, 0) without an FTS5 index)."""
        before, left, worked = self.merge_keyword_index(None, 1)
        steps = 0
        while worked and left > 1 and steps < max_steps:
            _, left, worked = self.merge_keyword_index(None, 1)
            steps += 1
        return before, left

    def keyword_segments(self) -> int:
        """The keyword index's segments (b-trees), summed over both indexes; 0 without FTS5."""
        from memviewer.store import fts

        if not self.store.is_sqlite:
            return 0
        with self.store.read() as conn:
            return fts.segment_count(conn)

    def prune_idle(self, cutoff: float) -> list[str]:
        return self.manager.prune_idle(cutoff)

    def shutdown(self, episode_ids: list[str] | None = None) -> list[str]:
        return self.manager.shutdown(episode_ids)

    def import_session(
        self,
        session: dict[str, Any],
        turns: list[dict[str, Any]],
        episodes: list[dict[str, Any]] | None = None,
        *,
        origin: str | None = None,
        replace: bool = False,
        keep_missing: bool = False,
    ) -> dict[str, Any]:
        result = self.manager.import_session(
            session, turns, episodes, origin=origin, replace=replace, keep_missing=keep_missing
        )
        return self._imported(session["id"], result)

    def import_session_chunks(
        self,
        session: dict[str, Any],
        chunks: Iterable[list[dict[str, Any]]],
        *,
        origin: str | None = None,
        replace: bool = False,
    ) -> dict[str, Any]:
        """``import_session`` for a big file's turns a chunk at a time (``session.chunked_import``)."""
        result = self.manager.import_session_chunks(session, chunks, origin=origin, replace=replace)
        return self._imported(session["id"], result)

    def finish_chunked_import(self, job: ChunkedImport) -> dict[str, Any]:
        """The last transaction of a chunked import driven by its caller (the folder watcher)."""
        return self._imported(job.session_id, job.finish())

    def _imported(self, session_id: str, result: dict[str, Any]) -> dict[str, Any]:
        """Every import path: the tags and notes of turns an import removed go too."""
        if result.get("removed_turns"):
            with self.annotation_write() as conn:
                annotation_rows.drop_orphans(conn, session_id)
        return result

    def import_praisonai(
        self,
        paths_: Iterable[str | Path],
        progress: Callable[[int, int, str], None] | None = None,
        *,
        index: bool = True,
        replace: bool = False,
        file_progress: Callable[[int, int, str], None] | None = None,
    ) -> ImportReport:
        """Import PraisonAI files; with ``index`` returns once they are recallable.

        ``file_progress(bytes, size, path)`` follows the reading of a big file."""
        from memviewer.praisonai.importer import import_paths

        report = import_paths(
            self.import_session,
            paths_,
            progress,
            replace=replace,
            file_progress=file_progress,
            import_chunks=self.import_session_chunks,
        )
        if index and report.imported:
            self.sync_index(report.session_ids)
        return report

    def sync_index(self, session_ids: list[str] | None = None) -> dict[str, Any]:
        """Bring the derived vector index up to date (blocking).

        If a hub's background indexer owns this home's index, this process writes
        nothing and waits until that indexer has caught up (``Indexer.sync``).
        """
        return self.indexer().sync(session_ids)

    def reindex(self, progress: Callable[..., None] | None = None) -> dict[str, Any]:
        """Rebuild the derived indexes from the store (``memviewer reindex``): the FTS5 turn
        index, then the vectors and summaries; the indexer's report with ``keyword_index``."""
        from memviewer.store import fts

        keyword = fts.reindex(self.store)
        report = self.indexer().rebuild(progress=progress)
        report["keyword_index"] = keyword
        return report

    def indexer(self) -> Indexer:
        from memviewer.index.indexer import Indexer

        indexer: Indexer = self._get("indexer", lambda: Indexer(self.parts, bus=self.manager.bus))
        return indexer

    # -- tags and notes (the user's annotations: no event, no index) ---------------------
    @contextlib.contextmanager
    def annotation_write(self) -> Iterator[Any]:
        """One write transaction for annotations. A read-only service (beside a running
        hub) opens the store writable for just this write, as golden sets do: annotations
        are not memory, no event is written, and SQLite serialises the writers."""
        if not self.readonly:
            with self.store.write() as tx:
                yield tx.conn
            return
        store = open_store(self.home, self._store_url)
        try:
            with store.write() as tx:
                yield tx.conn
        finally:
            store.close()

    def tag(self, target_id: str, tags: list[str], *, remove: bool = False) -> dict[str, Any]:
        """Add (``remove``: take away) tags on a session or turn; ``not_found`` for an unknown id."""
        return annotation_rows.tag(self.annotation_write, target_id, tags, remove=remove)

    def note(self, target_id: str, text: str | None) -> dict[str, Any]:
        """Set the note of a session or turn (``None`` removes it)."""
        return annotation_rows.note(self.annotation_write, target_id, text)

    def annotations(
        self, target_id: str | None = None, *, tag: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Annotated sessions and turns, most recently changed first (see docs/cli.md)."""
        return annotation_rows.listing(self.store, target_id=target_id, tag=tag, limit=limit)

    def import_annotations(self, session_id: str, marks: dict[str, dict[str, Any]]) -> None:
        """Store an imported session's tags and notes (``{target id: {tags, note}}``, checked
        by the importer): tags are added to those already there, a note replaces the old one;
        ids that are not this session's are skipped."""
        with self.annotation_write() as conn:
            annotation_rows.merge(conn, session_id, marks)

    def import_llm_calls(self, commands: list[dict[str, Any]]) -> None:
        """Store an imported session's LLM calls (``record_llm_call`` arguments, checked by the
        importer); a call already stored (same id) is left as it is."""
        for cmd in commands:
            self.manager.record_llm_call(**cmd)

    # -- reads ----------------------------------------------------------------
    @property
    def last_seq(self) -> int:
        return self.store.refresh_last_seq() if self.readonly else self.store.last_seq

    def sessions(
        self,
        *,
        scope: str | None = None,
        scope_id: str | None = None,
        filter: str | None = None,
        sort: str = "last_seen",
        descending: bool = True,
        limit: int | None = None,
        offset: int = 0,
    ) -> dict[str, Any]:
        """A page of sessions with episode, active and archived turn counts."""
        if sort not in repos.SORT_COLUMNS:
            raise MemviewerError(
                INVALID_ARGUMENT, f"unknown sort {sort!r}; expected one of {', '.join(repos.SORT_COLUMNS)}"
            )
        if (limit is not None and limit < 0) or offset < 0:
            raise MemviewerError(INVALID_ARGUMENT, "limit and offset must be >= 0")
        with self.store.read() as conn:
            rows = repos.list_sessions(
                conn,
                scope=scope,
                scope_id=scope_id,
                text_filter=filter,
                sort=sort,
                descending=descending,
                limit=limit,
                offset=offset,
            )
            total = (
                len(rows) + offset if limit is None else repos.count_sessions(conn, scope, scope_id, filter)
            )
            counts = repos.session_counts(conn, [r["id"] for r in rows])
            marks = annotation_rows.safe_read(
                conn, annotation_rows.session_marks, [r["id"] for r in rows], default={}
            )
        return {
            "total": total,
            "offset": offset,
            "sessions": [
                {**repos.session_public(r, counts[r["id"]]), **marks.get(r["id"], {})} for r in rows
            ],
        }

    def session(self, session_id: str) -> dict[str, Any]:
        """One session with its episodes and every turn (archived first)."""
        with self.store.read() as conn:
            row = repos.get_session(conn, session_id)
            if row is None:
                raise MemviewerError(NOT_FOUND, f"unknown session {session_id!r}")
            counts = repos.session_counts(conn, [session_id])[session_id]
            episodes = repos.session_episodes(conn, session_id)
            turns = repos.session_turns(conn, session_id)
            marks = annotation_rows.safe_read(conn, annotation_rows.of_session, session_id, default={})
        out: dict[str, Any] = {
            "session": repos.session_public(row, counts),
            "episodes": [repos.episode_public(e) for e in episodes],
            "turns": [repos.turn_public(t) for t in turns],
        }
        if marks:  # only then: the shape without annotations is unchanged
            out["annotations"] = marks
        return out

    def events(
        self,
        from_seq: int = 0,
        limit: int = 1000,
        kinds: list[str] | None = None,
        session_id: str | None = None,
    ) -> list[EventRecord]:
        return self.store.events_since(from_seq, limit, kinds, session_id)

    def stats(self) -> dict[str, Any]:
        from memviewer.store.row_counts import row_counts

        with self.store.read() as conn:
            counts = row_counts(conn)
        db = paths.db_path(self.home)
        out: dict[str, Any] = {
            "version": __version__,
            "home": str(self.home),
            "schema_version": self.store.schema_version(),
            "last_seq": self.last_seq,
            "counts": counts,
            "db_bytes": db.stat().st_size if db.exists() else 0,
            "pid": os.getpid(),
        }
        indexer = self._lazy.get("indexer")
        if indexer is not None and hasattr(indexer, "status"):
            out["index"] = indexer.status()
        return out

    # -- search / recall / export (layers opened lazily) ----------------------
    def keyword(self) -> Any:
        from memviewer.recall.keyword import KeywordSearch

        return self._get("keyword", lambda: KeywordSearch(self.store))

    def search(
        self,
        query: str | None = None,
        *,
        session_id: str | None = None,
        around: int | str | None = None,
        limit: int = 5,
        window: int = 5,
        scope: str | None = None,
        scope_id: str | None = None,
        record: RecordAs | None = None,
    ) -> dict[str, Any]:
        """Discovery (query), scroll (session_id) or browse (neither); see docs/cli.md.

        ``record`` names the front end asking; the search then goes into the recall log.
        """
        params = {
            "session_id": session_id,
            "around": around,
            "limit": limit,
            "window": window,
            "scope": scope,
            "scope_id": scope_id,
        }
        keyword = self.keyword()
        out = annotation_rows.search(keyword.search, self.store, query, params, keyword.annotated)
        if record is not None and self.recall_log_enabled:
            # Built where it is written: a hub builds it after the answer is on its way.
            entry = functools.partial(recall_log.search_command, query, params, out, record, time.time())
            self.record_recall(entry)
        return out

    def recall(self, query: str, *, record: RecordAs | None = None, **params: Any) -> dict[str, Any]:
        """Two-stage recall (or ``mode='flat'``) with diagnostics; see docs/cli.md.

        ``record`` names the front end asking; the recall then goes into the recall log.
        ``with_tool_calls=True`` (a display option, not logged): rows of turns that called
        tools carry their ``tool_calls``.
        """
        from memviewer.recall.hierarchical import recall as run_recall
        from memviewer.recall.index_guard import guarded_recall

        params.setdefault("reranker", self.reranker)
        as_of_text = _resolve_as_of(params)
        # a lagging, incomplete or damaged index escalates (keyword results), never a traceback
        out = guarded_recall(self.parts, self.home, self.search, query, params, run_recall)
        if record is not None and self.recall_log_enabled:
            logged = {k: v for k, v in params.items() if k not in ("reranker", "with_tool_calls")}
            entry_out = out
            if as_of_text is not None:  # the words the caller used, beside the instant they meant
                entry_out = {
                    **out,
                    "diagnostics": {**(out.get("diagnostics") or {}), "as_of_text": as_of_text},
                }
            self.record_recall(recall_log.recall_command(query, logged, entry_out, record))
        return out

    def compare(self, query: str, params: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
        """A and B recalls at one moment and their diff (``recall --vs``, the Recall screen's B)."""
        from memviewer.contract.compare import compare

        return compare(self.recall, query, params, overrides)

    def check_turn(self, turn_id: str, scope: str | None, scope_id: str | None) -> dict[str, Any]:
        """The turn ``--why`` follows, refused before any model load when unknown or out of scope."""
        from memviewer.recall.why import check_turn

        return check_turn(self.store, turn_id, scope, scope_id)

    def why(
        self,
        query: str,
        turn_id: str,
        params: Mapping[str, Any],
        *,
        cache: Any = None,
        progress: Callable[[int, int], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(recall result, why)`` for ``turn_id`` (``recall.why.why_not`` with this service's
        index and reranker): only this process can re-run recall's stages."""
        from memviewer.recall.why import why_not

        return why_not(
            self.parts,
            query,
            turn_id,
            params,
            reranker=self.reranker,
            cache=cache,
            progress=progress,
            cancelled=cancelled,
        )

    def why_cache(self) -> object:
        """A cache for several ``why`` of one question (the viewer's expected turns): they
        share reads and stages (``recall.rerun_cache.RerunCache``)."""
        from memviewer.recall.rerun_cache import RerunCache

        return RerunCache()

    def index_lag(self) -> dict[str, Any]:
        """How far the vector index is behind the store (``index.progress.index_lag``)."""
        from memviewer.index.progress import index_lag

        with self.store.read() as conn:
            return index_lag(self.home, conn)

    def attach_tool_calls(self, session_id: str, messages: Iterable[MutableMapping[str, Any]]) -> None:
        """Set ``tool_calls`` on the blank messages of one session's scroll window (keyed by
        index: the window carries no turn ids), read from the store, for display only."""
        blank = [m for m in messages if not str(m.get("content") or "").strip()]
        if not blank:
            return
        indexes = [int(m["index"]) for m in blank]
        with self.store.read() as conn:
            rows = repos.session_turns(conn, session_id, start=min(indexes), end=max(indexes))
        calls = {r["idx"]: r["tool_calls"] for r in rows}
        for m in blank:
            if calls.get(m["index"]):
                m["tool_calls"] = calls[m["index"]]

    def session_titles(self, session_ids: Iterable[str]) -> dict[str, str]:
        """Titles (or the id, for an untitled one) of the sessions that exist among ``session_ids``."""
        out: dict[str, str] = {}
        with self.store.read() as conn:
            for sid in set(session_ids):
                row = repos.get_session(conn, sid) if sid else None
                if row is not None:
                    out[sid] = row["title"] or sid
        return out

    # -- the recall log ---------------------------------------------------------------
    @property
    def recall_log_enabled(self) -> bool:
        return self.manager.recall_log_max > 0

    def record_recall(self, command: recall_log.Entry) -> bool:
        """Write one ``record_recall`` command through the one writer; never raises.

        ``command`` may be a function building it (``recall_log.Entry``): the hub's sink
        then builds it after the request's answer is written; every other route builds it now.

        The route: the hub running on this service takes it on its writer thread
        (``record_sink``); a writable service writes it itself; a read-only one hands it
        to the hub that serves the home, or, when none runs, opens the store for writing
        just for this entry (SQLite's write lock keeps one writer at a time and the event
        log gap-free; a hub that starts later sees the event). A failure is logged, and the
        search or recall that caused it still answers.
        """
        try:
            if self.record_sink is not None:
                self.record_sink(command)
                return True
            command = recall_log.built(command)
            if not self.readonly:  # written here: this process is the caller
                command.setdefault("caller", recall_log.local_caller())
                self.manager.apply(command)
            else:
                self._record_elsewhere(command)
            return True
        except Exception as exc:
            recall_id = command.get("recall_id") if isinstance(command, dict) else None
            log.warning("recall log: entry %s not written: %s", recall_id, exc)
            return False

    def _record_elsewhere(self, command: dict[str, Any]) -> None:
        for attempt in (1, 2):
            route = self._log_route
            if route is None:
                from memviewer.wire.probe import serving_hub

                sock = serving_hub(self.settings)
                if sock is not None:
                    from memviewer.wire.remote import RemoteService

                    route = RemoteService(sock, timeout=10.0, client="memviewer.recall-log")
                else:
                    store = open_store(self.home, self._store_url, readonly=False)
                    route = SessionManager(store)
                    route.recall_log_max = self.manager.recall_log_max
                    route.recall_log_days = self.manager.recall_log_days
                    route.recall_log_mb = self.manager.recall_log_mb
                self._log_route = route
            if isinstance(route, SessionManager):
                route.apply(command)
                return
            try:
                (answer,) = route.publish([command])
            except MemviewerError:
                route.close()
                self._log_route = None  # the hub went away: look again
                if attempt == 2:
                    raise
                continue
            if "error" in answer:
                raise MemviewerError(str(answer["error"].get("code")), str(answer["error"].get("message")))
            return

    def recalls(
        self,
        *,
        source: str | None = None,
        session_id: str | None = None,
        kind: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> dict[str, Any]:
        """A page of the recall log, newest first (entries without results and diagnostics),
        and ``log``: its counters (``store.recall_log.counters``) and limits."""
        from memviewer.store import recall_log as rows

        if limit < 1 or offset < 0:
            raise MemviewerError(INVALID_ARGUMENT, "limit must be >= 1 and offset >= 0")
        counts: dict[str, int] = {}
        with self.store.read() as conn:
            try:
                total, page = rows.list_records(
                    conn, source=source, session_id=session_id, kind=kind, limit=limit, offset=offset
                )
                counts = rows.counters(conn)
            except Exception as exc:  # a read-only store of an older schema has no log yet
                if "recall_log" not in str(exc):
                    raise
                total, page = 0, []
        m = self.manager
        limits = {"max_entries": m.recall_log_max, "max_days": m.recall_log_days}
        return {
            "total": total,
            "offset": offset,
            "recalls": [rows.record_public(r, full=False) for r in page],
            "log": {**counts, **limits, "max_bytes": int(m.recall_log_mb * 1024 * 1024)},
        }

    def recall_entry(self, recall_id: str) -> dict[str, Any]:
        """One recall log entry with its results and diagnostics."""
        from memviewer.store import recall_log as rows

        with self.store.read() as conn:
            row = rows.get(conn, recall_id)
        if row is None:
            raise MemviewerError(
                NOT_FOUND,
                f"unknown recall {recall_id!r}",
                hint="list recorded recalls with `memviewer recalls`",
            )
        return rows.record_public(row)

    def llm_calls(
        self, *, session_id: str | None = None, limit: int = 100, offset: int = 0
    ) -> dict[str, Any]:
        """LLM calls in call order (``memviewer calls``; docs/cli.md, ``## calls``)."""
        from memviewer.session import calls_view

        if limit < 1 or offset < 0:
            raise MemviewerError(INVALID_ARGUMENT, "limit must be >= 1 and offset >= 0")
        with self.store.read() as conn:
            return calls_view.list_page(conn, session_id=session_id, limit=limit, offset=offset)

    def llm_call(self, call_id: str) -> dict[str, Any]:
        """One LLM call with its context anatomy and its diff from the call before it."""
        from memviewer.index.tokens import counter
        from memviewer.session import calls_view

        tok = counter()
        with self.store.read() as conn:
            out = calls_view.show(conn, call_id, tok.count)
        out["anatomy"]["tokenizer"] = tok.describe()
        return out

    def export(self, session_ids: list[str] | None, fmt: str, out: Any, **kw: Any) -> dict[str, Any]:
        from memviewer.io.export import export_sessions

        return export_sessions(self.store, session_ids, fmt, out, home=self.home, **kw)

    def close(self) -> None:
        route, self._log_route = self._log_route, None
        if route is not None:
            (route.store if isinstance(route, SessionManager) else route).close()
        for name in ("indexer", "keyword"):
            layer = self._lazy.get(name)
            if layer is not None and hasattr(layer, "close"):
                layer.close()
        self.store.close()

    def __enter__(self) -> MemoryService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _resolve_as_of(params: dict[str, Any]) -> str | None:
    """A textual ``as_of`` ("6 days ago", an ISO date) becomes the instant it means, once,
    where the request enters: recall asks about that instant and the recall log keeps it, so
    a re-run days later asks about the same moment. Returns the caller's words (None when
    ``as_of`` was a number or absent); raises ``invalid_argument`` for words it cannot read."""
    raw = params.get("as_of")
    if not isinstance(raw, str) or not raw.strip():
        return None
    from memviewer.contract.timeref import parse_as_of

    try:
        params["as_of"] = parse_as_of(raw)
    except ValueError as exc:
        raise MemviewerError(INVALID_ARGUMENT, str(exc)) from None
    return raw
