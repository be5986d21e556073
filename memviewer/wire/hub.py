"""The hub: serves ``MemoryService`` over a Unix socket and fans events out live.

This module holds the socket and lock lifecycle and the request dispatch; the jobs
it wires together live beside it:

* ``hub_params``: each method's parameter schema, checked before dispatch.
* ``connection``: one client connection and its subscription.
* ``group_commit``: the one writer thread. Every write (publish batches, spool
  ingestion, a source's import) runs there, so the event loop never waits on fsync
  and SQLite never sees two writers from this process; concurrent ``publish``
  requests are group-committed and each is answered once its batch is durable.
* ``fanout``: committed events to subscribers (history, then live, no gap at the
  seam), gap-fill and the watch for commits made by another process.
* Reads (sessions, search, recall …) run on a small reader thread pool; from its first
  fast read (``search``, ``sessions``, ``session``) on, a connection is served by a thread
  of its own that reads its frames, runs fast reads and answers them (``threaded``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import logging
import os
import stat
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from memviewer import __version__, locks, paths, recall_log
from memviewer.errors import MemviewerError
from memviewer.store.events import EventRecord
from memviewer.wire import fastjson, group_commit, protocol, recall_buffer, spool, trust
from memviewer.wire.connection import AfterAnswer, Connection, Deferred, HeldRecords, event_frame
from memviewer.wire.fanout import FanOut
from memviewer.wire.group_commit import GroupCommitWriter, Results
from memviewer.wire.hub_params import SCHEMAS, check_kinds, check_params
from memviewer.wire.hub_service import HubService
from memviewer.wire.probe import HOME_LOCK
from memviewer.wire.protocol import RpcError
from memviewer.wire.threaded import (
    CLOSE,
    DRAIN_FRAMES,
    DRAIN_TIMEOUT_S,
    EOF,
    STALLED,
    TOO_LARGE,
    ThreadedReads,
)

log = logging.getLogger("memviewer.hub")

SUN_PATH_MAX = 107  # bytes, Linux AF_UNIX limit without the NUL


class HubError(RuntimeError):
    """The hub cannot start (bad socket path, permissions …)."""


class HubAlreadyRunning(HubError):
    """Another hub answers on (or owns) this socket."""


# Kept importable from here: the names tests and older callers use.
__all__ = ["SCHEMAS", "Hub", "HubAlreadyRunning", "HubError", "check_params", "event_frame"]


Handler = Callable[[Connection, dict[str, Any]], Awaitable[Any]]


# -- the hub -------------------------------------------------------------------------
KEYWORD_UPKEEP_INTERVAL_S = 30.0  # how often an idle hub looks at the keyword index's segments
KEYWORD_SEGMENTS_MAX = 8  # ...and merges them down to one when more have piled up
KEYWORD_MERGE_STEPS = 1000  # at most this many merge steps in one go


class Hub:
    """JSON-RPC server over ``service``; ``await start()`` inside any running loop.

    The hub is not the agent: stopping it (SIGINT, SIGTERM, ``close()``) never closes
    an episode. Agents keep publishing into their spools while no hub runs and replay
    into the same open episodes when one comes back. An agent's own end (the
    publisher's ``shutdown`` command at ``Publisher.close()``) abandons that agent's
    episodes; idle pruning handles agents that vanished.
    """

    def __init__(
        self,
        service: HubService,
        socket_path: str | Path,
        *,
        frame_limit: int | None = None,
        subscriber_queue: int | None = None,
        spool_dir: str | Path | None = None,
        start_indexer: bool = True,
        history_page: int = 500,
        max_group_commands: int = 2000,
        max_pending_bytes: int = group_commit.MAX_PENDING_BYTES,
        max_pending_commands: int = group_commit.MAX_PENDING_COMMANDS,
        max_inflight: int = 16,
        readers: int = 4,
        threaded_connections: int = 32,
        max_connections: int = 512,
        stall_timeout: float = 60.0,
        spool_scan_interval: float = 30.0,
        foreign_poll_interval: float = 0.5,
        sources: list[Any] | None = None,
        recall_log_quiet_s: float = recall_buffer.QUIET_S,
        recall_log_max_wait_s: float = recall_buffer.MAX_WAIT_S,
        keyword_upkeep_interval: float = KEYWORD_UPKEEP_INTERVAL_S,
    ) -> None:
        settings = service.settings
        self.service = service
        self.socket_path = Path(socket_path).expanduser()
        self.frame_limit = int(frame_limit or settings.frame_limit or protocol.DEFAULT_FRAME_LIMIT)
        self.subscriber_queue = int(subscriber_queue or settings.subscriber_queue or 10_000)
        self.spool_dir = Path(spool_dir) if spool_dir else paths.spool_dir(Path(service.home))
        self.start_indexer = start_indexer
        self.history_page = history_page
        self.max_group_commands = max_group_commands
        self.max_inflight = max_inflight
        self.readers = readers
        self.threaded_connections = threaded_connections
        self.spool_scan_interval = spool_scan_interval
        self.foreign_poll_interval = foreign_poll_interval
        self.max_connections = max_connections
        self.stall_timeout = stall_timeout
        self.home: Path = Path(trust.resolved(service.home))
        self.store_id: str | None = None
        # Sources (memviewer.sources): started after the socket answers, stopped first.
        self.sources: list[Any] = list(sources or [])

        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._reader_pool: ThreadPoolExecutor | None = None
        self.threads: ThreadedReads | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._conns: dict[int, Connection] = {}
        self._next_conn = 0
        self._lock_fd: int | None = None
        self._lock_path = self.socket_path.with_name(self.socket_path.name + ".lock")
        self._home_lock_fd: int | None = None
        self._sock_ino: int | None = None
        self._started_at = 0.0
        self._closing = False
        self._closed = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._close_task: asyncio.Task[Any] | None = None

        self.counters: dict[str, int] = {
            "publish_requests": 0,
            "published_commands": 0,
            "group_commits": 0,
            "command_errors": 0,
            "events_dispatched": 0,
            "lagged": 0,
            "connections_total": 0,
            "protocol_errors": 0,
            "refused_batches": 0,
            "refused_connections": 0,
            "stalled_connections": 0,
            "recall_log_written": 0,
            "recall_log_failed": 0,
            "refused_commands": 0,
            "overloaded_requests": 0,
            "overloaded_commands": 0,
        }
        self.writes = GroupCommitWriter(
            service,
            self.counters,
            max_group_commands=max_group_commands,
            max_pending_bytes=max_pending_bytes,
            max_pending_commands=max_pending_commands,
        )
        self.fanout = FanOut(
            service,
            self.counters,
            subscriber_queue=self.subscriber_queue,
            history_page=history_page,
            foreign_poll_interval=foreign_poll_interval,
            closed=self._closed,
        )
        self.spool_reports: list[dict[str, Any]] = []
        self.indexer_status = "not started"
        self.last_close_report: dict[str, Any] = {}
        self._handler_table: dict[str, tuple[bool, Handler]] | None = None
        self._read_table: dict[str, Callable[[dict[str, Any]], Any]] | None = None
        self._records_closed = False  # set on close once answered reads have queued their entries
        self.recall_log_quiet_s = recall_log_quiet_s
        self.keyword_upkeep_interval = keyword_upkeep_interval
        self.keyword_segments: int | None = None  # the keyword index's segments, last seen
        self.recall_log_max_wait_s = recall_log_max_wait_s
        self.recall_log: recall_buffer.RecallLogBuffer | None = None  # entries waiting (on the loop)
        self._held = threading.local()  # a reader thread's HeldRecords while it serves a request

    @property
    def refused_by_code(self) -> dict[str, int]:
        """``{code: n}`` of the commands the store refused (publishes and spool replays)."""
        return self.writes.refused_by_code

    @property
    def last_refused(self) -> dict[str, Any] | None:
        return self.writes.last_refused

    @property
    def last_refusal(self) -> dict[str, Any] | None:
        return self.writes.last_refusal

    # -- lifecycle ---------------------------------------------------------------
    async def start(self) -> None:
        """Bind the socket, ingest leftover spools, start serving. Raises HubError."""
        if self._server is not None:
            raise HubError("hub already started")
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        _raise_fd_limit(self.max_connections)
        self._prepare_socket()
        try:
            self.writes.open(self._loop)
            self.recall_log = recall_buffer.RecallLogBuffer(
                self._loop,
                self._write_records,
                quiet_s=self.recall_log_quiet_s,
                max_wait_s=self.recall_log_max_wait_s,
            )
            self._reader_pool = ThreadPoolExecutor(self.readers, thread_name_prefix="memviewer-reader")
            if self.threaded_connections > 0:
                self.threads = ThreadedReads(self, self.threaded_connections, self.readers)
            self.fanout.start(self._loop, self._reader_pool)
            self.service.record_sink = self._submit_record  # recall log entries: the one writer
            # Leftover spools first: once the hub answers, what dead publishers left is stored.
            await self._ingest_spools()
            self._server = await asyncio.start_unix_server(
                self._handle, path=str(self.socket_path), limit=self.frame_limit
            )
            os.chmod(self.socket_path, 0o600)
            self._sock_ino = os.stat(self.socket_path).st_ino
        except BaseException:
            self.fanout.stop()
            if self.service.record_sink == self._submit_record:
                self.service.record_sink = None
            self._release_socket()
            self.writes.abandon()
            if self._reader_pool is not None:
                self._reader_pool.shutdown(wait=False)
            if self.threads is not None:
                self.threads.shutdown()
            raise
        self._started_at = time.monotonic()
        self._tasks.append(self.writes.start_pump())
        self._tasks.append(asyncio.create_task(self._spool_scanner(), name="memviewer-hub-spool"))
        self._tasks.append(asyncio.create_task(self.fanout.watch_foreign(), name="memviewer-hub-foreign"))
        self._tasks.append(asyncio.create_task(self._keyword_upkeep(), name="memviewer-hub-keyword-upkeep"))
        if self.start_indexer:
            threading.Thread(target=self._start_indexer, name="memviewer-indexer-start", daemon=True).start()
        for source in self.sources:
            try:
                await source.start(self)
            except Exception:  # a source that cannot start (port taken…) is reported, the hub serves
                log.exception("source %s did not start", getattr(source, "kind", source))
        log.info("hub %s listening on %s", __version__, self.socket_path)

    async def serve_forever(self) -> None:
        """Wait until ``close()`` (or ``request_stop()``) finished."""
        assert self._stopped is not None, "start() first"
        await self._stopped.wait()

    def request_stop(self) -> None:
        """Ask the hub to shut down (safe from signal handlers and other threads)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        def _go() -> None:
            if self._close_task is None:
                self._close_task = asyncio.ensure_future(self.close())

        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_go)

    async def close(self, *, grace: float = 2.0) -> dict[str, Any]:
        """Stop accepting, finish queued publishes, give subscribers a moment to
        receive the last events, close every connection and remove the socket.

        Open episodes stay open (the hub is not the agent). The report lists
        ``open_episodes``; ``abandoned_episodes`` is always empty (kept for callers).
        """
        if self._closing:
            if self._stopped is not None:
                await self._stopped.wait()
            return self.last_close_report
        self._closing = True
        if self.service.record_sink == self._submit_record:
            self.service.record_sink = None  # in-process recalls (the viewer) write directly again
        report: dict[str, Any] = {"abandoned_episodes": [], "open_episodes": []}
        self.last_close_report = report
        loop = asyncio.get_running_loop()
        if self._server is not None:
            self._server.close()
        for source in self.sources:  # no new writes from them once the queue drains
            try:
                await source.stop()
            except Exception:
                log.exception("stopping source %s failed", getattr(source, "kind", source))
        for task in self._tasks[1:]:
            task.cancel()
        # Requests already being answered finish first, so the recall log entries of searches
        # and recalls that got their answer reach the writer before it stops (bounded by grace).
        inflight = [task for conn in self._conns.values() for task in conn.tasks]
        if inflight:
            await asyncio.wait(inflight, timeout=grace)
        waited = loop.time() + grace  # and the reads served by connection threads
        while self.threads is not None and self.threads.busy() and loop.time() < waited:
            await asyncio.sleep(0.005)
        self._records_closed = True
        if self.recall_log is not None:
            self.recall_log.flush()  # what waits for a quiet moment goes now, before the writer stops
        await self.writes.drain_and_stop()
        if self.writes.executor is not None:
            try:
                report["open_episodes"] = await self.writes.run(self._open_episodes)
            except Exception:
                log.exception("listing the open episodes failed")
        deadline = loop.time() + grace
        while loop.time() < deadline and self.fanout.queued():
            await asyncio.sleep(0.02)
        self.fanout.stop()  # no dispatch after this; the store's commit listener is removed
        for conn in list(self._conns.values()):
            conn.close()
        await asyncio.sleep(0)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout=2)
        await self.writes.shutdown()  # e.g. a spool ingestion still running: no write after close()
        if self._reader_pool is not None:
            self._reader_pool.shutdown(wait=False, cancel_futures=True)
        if self.threads is not None:
            self.threads.shutdown()
        self._release_socket()
        if self._stopped is not None:
            self._stopped.set()
        log.info("hub stopped (%d open episodes left open)", len(report["open_episodes"]))
        return report

    def _open_episodes(self) -> list[str]:
        """Ids of the episodes still open (writer thread: after the last publish)."""
        from memviewer.store import repos

        with self.service.store.read() as conn:
            return repos.open_episode_ids(conn)

    # -- socket file, lock, permissions -----------------------------------------
    def _prepare_socket(self) -> None:
        path = self.socket_path
        if len(os.fsencode(str(path))) > SUN_PATH_MAX:
            raise HubError(
                f"socket path is too long for a Unix socket ({len(os.fsencode(str(path)))} "
                f"bytes, limit {SUN_PATH_MAX}): {path}"
            )
        parent = path.parent
        try:
            runtime = paths.runtime_dir()
            if parent == runtime or parent.parent == runtime:  # the default places: ours, 0700
                trust.ensure_private_dir(runtime)
                trust.ensure_private_dir(parent)
            elif not parent.exists():
                trust.ensure_private_dir(parent)
            trust.check_socket(path)
        except trust.UntrustedPath as exc:
            raise HubError(f"{exc}; no hub was started") from None
        except OSError as exc:
            raise HubError(f"cannot prepare the socket folder {parent}: {exc}") from None
        self._acquire_home_lock()
        try:
            self._acquire_lock()
        except BaseException:
            self._release_home_lock()
            raise
        try:
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                return
            if not stat.S_ISSOCK(st.st_mode):
                raise HubError(f"{path} exists and is not a socket; refusing to replace it")
            version = _answering_hub(path)
            if version is not None:
                raise HubAlreadyRunning(f"a memviewer hub ({version}) is already running on {path}")
            log.warning("replacing stale socket %s", path)
            path.unlink()
        except BaseException:
            self._release_lock()
            raise

    def _acquire_lock(self) -> None:
        """An flock beside the socket: one hub per socket path, even when two start at once."""
        for _ in range(5):
            try:
                fd = trust.open_nofollow(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as exc:
                raise HubError(f"cannot open the socket lock {self._lock_path}: {exc}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                version = _answering_hub(self.socket_path) or "starting or stopping"
                raise HubAlreadyRunning(
                    f"a memviewer hub ({version}) is already running on {self.socket_path}"
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self._lock_path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self._lock_fd = fd
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                return
            os.close(fd)  # the previous owner removed it while we waited: take the new one
        raise HubError(f"could not lock {self._lock_path}")

    def _acquire_home_lock(self) -> None:
        """One hub per home, whatever its socket: two hubs over one store would each
        abandon the other's open episodes when they stop, and both would write the index."""
        home = self.service.home
        path = Path(home) / HOME_LOCK
        try:
            trust.check_home(Path(home))
            fd = locks.try_lock(path)
        except OSError as exc:
            raise HubError(f"cannot lock the home {home}: {exc}") from None
        if fd is None:
            owner = locks.read_note(path).split("\n")
            where = owner[1] if len(owner) > 1 and owner[1] else "another socket"
            raise HubAlreadyRunning(
                f"a memviewer hub is already running for {home} (pid {owner[0] or '?'}, on {where}); "
                f"use that one (--socket {where}) or stop it first"
            )
        locks.write_note(fd, f"{os.getpid()}\n{self.socket_path}\n")
        self._home_lock_fd = fd
        try:
            self.store_id = trust.ensure_store_id(Path(home))
        except OSError as exc:  # hello still names the home's path
            log.warning("cannot write the store id in %s: %s", home, exc)

    def _release_home_lock(self) -> None:
        if self._home_lock_fd is not None:
            locks.release(self._home_lock_fd)
            self._home_lock_fd = None

    def _release_lock(self) -> None:
        self._release_home_lock()
        if self._lock_fd is None:
            return
        with contextlib.suppress(OSError):
            if os.fstat(self._lock_fd).st_ino == os.stat(self._lock_path).st_ino:
                self._lock_path.unlink()
        os.close(self._lock_fd)
        self._lock_fd = None

    def _release_socket(self) -> None:
        with contextlib.suppress(OSError):
            if self._sock_ino is not None and os.stat(self.socket_path).st_ino == self._sock_ino:
                self.socket_path.unlink()
        self._sock_ino = None
        self._release_lock()

    # -- background jobs ---------------------------------------------------------
    def _start_indexer(self) -> None:
        try:
            idx = self.service.indexer()
            if idx is None:
                self.indexer_status = "not available"
                return
            idx.start_background()
            self.indexer_status = "running"
        except Exception as exc:
            self.indexer_status = f"failed: {type(exc).__name__}: {exc}"
            log.exception("the vector indexer did not start")

    async def _ingest_spools(self) -> None:
        assert self._loop is not None
        try:
            report = await self.writes.run(spool.ingest, self.spool_dir, self._apply_spooled)
        except Exception:
            log.exception("spool ingestion failed; files are kept for the next attempt")
            return
        if report["files"] or report.get("refused_files"):
            log.info("ingested %d spool files (%d commands)", report["files"], report["commands"])
            self.spool_reports.append({"at": time.time(), **report})
            del self.spool_reports[:-10]

    def _apply_spooled(self, commands: list[Any]) -> list[dict[str, Any]]:
        """Writer thread: a chunk of a dead publisher's spool; refusals are counted like publishes."""
        results = self.service.apply_batch(commands)
        self.writes.count_refusals(commands, results, where="spool")
        return results

    async def _keyword_upkeep(self) -> None:
        """Merge the keyword index's segments (``store.fts.merge_step``) on the writer thread:
        down to one at start, then whenever more than ``KEYWORD_SEGMENTS_MAX`` have piled up
        (checked every ``keyword_upkeep_interval``). One bounded step per writer job, so a
        publish queued meanwhile is applied between two steps; a failure is logged and the
        hub serves on."""
        above = 1
        while True:
            try:
                await self.merge_keyword_index(above)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a full disk, a locked store: the next pass tries again
                log.warning("merging the keyword index failed: %s", exc)
            above = KEYWORD_SEGMENTS_MAX
            await asyncio.sleep(self.keyword_upkeep_interval)

    async def merge_keyword_index(self, above: int = 1) -> int:
        """When the keyword index holds more than ``above`` segments: bounded merge steps
        (``service.merge_keyword_index``, part of ``HubService``), each its own writer job,
        until one is left; the segments left. The upkeep loop and the folder watcher's
        big-file import call it."""
        merge = self.service.merge_keyword_index
        _, left, worked = await self.writes.run(merge, None, above)
        steps = 0
        while worked and left > 1 and steps < KEYWORD_MERGE_STEPS:
            _, left, worked = await self.writes.run(merge, None, 1)
            steps += 1
        self.keyword_segments = left
        return int(left)

    async def _spool_scanner(self) -> None:
        while True:
            await asyncio.sleep(self.spool_scan_interval)
            await self._ingest_spools()

    # -- connections ------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closing:
            writer.close()
            return
        if len(self._conns) >= self.max_connections:
            # Bounded file descriptors: past the cap a client hears why and is let go, so
            # one misbehaving process cannot starve the store (SQLite, LanceDB) of fds.
            self.counters["refused_connections"] += 1
            if (
                self.counters["refused_connections"] in (1, 10, 100)
                or self.counters["refused_connections"] % 1000 == 0
            ):
                log.warning(
                    "connection refused: %d open (limit %d); %d refused so far",
                    len(self._conns),
                    self.max_connections,
                    self.counters["refused_connections"],
                )
            with contextlib.suppress(Exception):
                writer.write(
                    protocol.error_response(
                        None,
                        protocol.app_error(
                            "internal",
                            f"too many connections ({self.max_connections}); try again later",
                            {"retry": True, "limit": self.max_connections},
                        ),
                    )
                )
                await asyncio.wait_for(writer.drain(), 1.0)
            writer.close()
            return
        self._next_conn += 1
        conn = Connection(self._next_conn, reader, writer, self.max_inflight)
        self._conns[conn.id] = conn
        self.counters["connections_total"] += 1
        partial = 0  # bytes of an unfinished frame seen at the last quiet period
        try:
            while not self._closing:
                try:
                    line = await asyncio.wait_for(reader.readuntil(b"\n"), self.stall_timeout)
                except TimeoutError:
                    # readuntil consumes nothing until the newline, so a timeout loses no data.
                    # Quiet between frames is fine (a subscriber, an idle agent); a partial
                    # frame that did not grow for a whole period is a stuck or hostile client
                    # keeping a connection slot. (One that is still arriving always grows.)
                    held = len(getattr(reader, "_buffer", b"") or b"")
                    if held and held == partial:
                        self.counters["stalled_connections"] += 1
                        log.warning(
                            "connection %d held half a frame for %.0f s; closing it",
                            conn.id,
                            2 * self.stall_timeout,
                        )
                        return
                    partial = held
                    continue
                except asyncio.IncompleteReadError as exc:  # EOF: closed or half-closed
                    if exc.partial.strip():
                        await self._frame(conn, exc.partial)
                    break
                except asyncio.LimitOverrunError:
                    self.counters["protocol_errors"] += 1
                    await conn.send(
                        protocol.error_response(
                            None,
                            RpcError(
                                protocol.INVALID_REQUEST,
                                f"frame larger than the {self.frame_limit}-byte limit; "
                                "closing the connection",
                                {"reason": "frame_too_large", "limit": self.frame_limit},
                            ),
                        )
                    )
                    await self._drain_frame(reader)
                    return
                except (ConnectionError, OSError):
                    return
                partial = 0
                if self.threads is not None and self.threads.wants(conn, line, reader):
                    # From here a thread reads, runs and answers this connection's frames.
                    outcome = await self.threads.serve(conn, line)
                    if outcome == STALLED:
                        self.counters["stalled_connections"] += 1
                    if outcome in (STALLED, TOO_LARGE, CLOSE):
                        return
                    assert outcome == EOF
                    break
                await self._frame(conn, line)
                del line  # not held while the next frame arrives
            # Half-closed: answer what was asked before closing; a subscription keeps
            # streaming until the client goes away or the hub stops.
            while conn.tasks and not conn.closed:
                await asyncio.wait(set(conn.tasks))
            if conn.sub is not None and conn.sub.task is not None and not conn.closed:
                with contextlib.suppress(asyncio.CancelledError):
                    await conn.sub.task
        except asyncio.CancelledError:
            pass
        finally:
            conn.close()
            self._conns.pop(conn.id, None)
            self.fanout.forget(conn)

    async def _drain_frame(self, reader: asyncio.StreamReader) -> None:
        """Discard the rest of an oversized frame, up to its newline, before closing.

        Closing at once would make a client blocked in ``sendall`` fail with a
        broken pipe before it reads the error. Bounded in bytes and time, so the
        hub's memory and a connection slot are never held by a huge or stalled frame.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DRAIN_TIMEOUT_S
        budget = DRAIN_FRAMES * self.frame_limit
        while budget > 0:
            left = deadline - loop.time()
            if left <= 0:
                return
            try:
                chunk = await asyncio.wait_for(reader.read(64 * 1024), left)
            except (TimeoutError, ConnectionError, OSError):
                return
            if not chunk or b"\n" in chunk:
                return
            budget -= len(chunk)

    async def _frame(self, conn: Connection, line: bytes) -> None:
        conn.requests += 1
        try:
            msg = protocol.decode(line)
        except RpcError as err:
            self.counters["protocol_errors"] += 1
            await conn.send(protocol.error_response(None, err))
            return
        try:
            req_id, method, params, is_note = protocol.parse_request(msg)
        except RpcError as err:
            self.counters["protocol_errors"] += 1
            await conn.send(protocol.error_response(protocol.request_id_of(msg), err))
            return
        handler = self._handlers().get(method)
        if handler is None:
            self.counters["protocol_errors"] += 1
            if not is_note:
                await conn.send(
                    protocol.error_response(
                        req_id,
                        RpcError(
                            protocol.METHOD_NOT_FOUND,
                            f"unknown method {method!r}",
                            {"methods": sorted(self._handlers())},
                        ),
                    )
                )
            return
        try:
            check_params(method, params)
        except RpcError as err:
            self.counters["protocol_errors"] += 1
            if not is_note:
                await conn.send(protocol.error_response(req_id, err))
            return
        inline, fn = handler
        if inline:  # ordering matters (subscribe/unsubscribe/hello): answer before reading on
            await self._answer(conn, req_id, is_note, fn(conn, params))
            return
        await conn.slots.acquire()  # back-pressure: stop reading when too many are in flight
        if method == protocol.PUBLISH:
            # Admitted to the write queue now, by its size on the wire: a refused frame is
            # answered and let go before the next one is read.
            try:
                pending = self._admit_publish(params["commands"], len(line), conn)
            except RpcError as err:
                conn.slots.release()
                if not is_note:
                    await conn.send(protocol.error_response(req_id, err))
                return
            del msg, params, line
            conn.spawn(self._answer(conn, req_id, is_note, self._publish_results(pending), release=True))
            return
        conn.spawn(self._answer(conn, req_id, is_note, fn(conn, params), release=True))

    async def _answer(
        self, conn: Connection, req_id: Any, is_note: bool, coro: Awaitable[Any], release: bool = False
    ) -> None:
        deferred: Deferred | None = None
        after: AfterAnswer | None = None
        try:
            try:
                result = await coro
                if isinstance(result, AfterAnswer):
                    after, result = result, result.result
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                out = self._error_answer(req_id, exc)
            else:
                deferred = result if isinstance(result, Deferred) else None
                out = self._result_answer(req_id, deferred.result if deferred else result)
            if not is_note:
                await conn.send(out)
            if deferred is not None:
                deferred.then()
        finally:
            if after is not None:
                after.then()
            if release:
                conn.slots.release()

    @staticmethod
    def _error_answer(req_id: Any, exc: BaseException) -> bytes:
        """The error response for a request that raised ``exc`` (any thread)."""
        if isinstance(exc, RpcError):
            return protocol.error_response(req_id, exc)
        if isinstance(exc, MemviewerError):
            return protocol.error_response(req_id, protocol.app_error(exc.code, exc.message, exc.data))
        if isinstance(exc, (TypeError, ValueError)):
            return protocol.error_response(req_id, RpcError(protocol.INVALID_PARAMS, str(exc)))
        log.error("request failed", exc_info=exc)
        return protocol.error_response(
            req_id, RpcError(protocol.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
        )

    @staticmethod
    def _result_answer(req_id: Any, result: Any) -> bytes:
        """The response carrying ``result``; one that cannot be encoded still gets an answer."""
        try:
            return fastjson.response(req_id, result)
        except (RecursionError, ValueError, TypeError) as exc:
            log.error("the answer to request %r cannot be encoded: %s", req_id, exc)
            return protocol.error_response(
                req_id,
                RpcError(
                    protocol.INTERNAL_ERROR,
                    f"the result cannot be encoded as JSON ({type(exc).__name__}: {exc})",
                ),
            )

    def _count(self, counter: str) -> None:
        """Loop thread: one more of ``counter`` (connection threads call it through the loop)."""
        self.counters[counter] += 1

    def _read_fns(self) -> dict[str, Callable[[dict[str, Any]], Any]]:
        """The fast reads a connection thread runs itself (``threaded.FAST_READS``)."""
        if self._read_table is None:
            self._read_table = {
                protocol.SESSIONS: lambda p: self.service.sessions(**p),
                protocol.SESSION: lambda p: self.service.session(p["session_id"]),
                protocol.SEARCH: self._search,
            }
        return self._read_table

    def _handlers(self) -> dict[str, tuple[bool, Handler]]:
        if self._handler_table is None:
            self._handler_table = self._build_handlers()
        return self._handler_table

    def _build_handlers(self) -> dict[str, tuple[bool, Handler]]:
        return {
            protocol.HELLO: (True, self._m_hello),
            protocol.PUBLISH: (False, self._m_publish),
            protocol.SUBSCRIBE: (True, self._m_subscribe),
            protocol.UNSUBSCRIBE: (True, self._m_unsubscribe),
            protocol.EVENTS: (False, self._m_events),
            protocol.SESSIONS: (False, self._reader(self._read_fns()[protocol.SESSIONS])),
            protocol.SESSION: (False, self._reader(self._read_fns()[protocol.SESSION])),
            protocol.SEARCH: (False, self._reader(self._search)),
            protocol.RECALL: (False, self._reader(self._recall)),
            protocol.STATS: (False, self._m_stats),
        }

    def _search(self, params: dict[str, Any]) -> dict[str, Any]:
        """Reader thread: a search, recorded in the recall log as the caller asked (``record``)."""
        args = {k: v for k, v in params.items() if k != "record"}
        return self.service.search(**args, record=recall_log.RecordAs.from_param(params.get("record")))

    def _recall(self, params: dict[str, Any]) -> dict[str, Any]:
        from memviewer.recall_log import RecordAs

        args = {k: v for k, v in params.items() if k not in ("query", "record")}
        return self.service.recall(params["query"], record=RecordAs.from_param(params.get("record")), **args)

    # -- the recall log's writer route ------------------------------------------------
    def _submit_record(self, command: recall_log.Entry) -> None:
        """Any thread: queue a recall log entry for the one writer (answered without waiting).

        On a reader thread serving a request the entry is held until the answer is written
        (see ``_reader``); an entry handed over as a function (a search's) is built then, on
        the loop thread, so its cost is off the request's path. Anywhere else it is built now.
        """
        loop = self._loop
        if loop is None or self._records_closed:
            raise MemviewerError("internal", "the hub is stopping; the recall log entry is not written")
        held: HeldRecords | None = getattr(self._held, "records", None)
        if held is not None:
            with held.lock:
                if not held.closed:
                    held.items.append(command)
                    return
        caller = held.caller if held is not None else {"via": "hub", "pid": os.getpid()}
        loop.call_soon_threadsafe(self._queue_record, recall_log.built(command), caller)

    def _queue_record(self, entry: recall_log.Entry, caller: dict[str, Any] | None = None) -> None:
        """Loop thread: the entry waits in ``recall_log`` for a quiet moment (``recall_buffer``);
        ``caller`` (the request's connection) replaces any the entry names."""
        assert self._loop is not None
        try:
            command = recall_log.built(entry)
        except Exception:  # a search's entry is built here; a bug in it must not stop the loop
            self.counters["recall_log_failed"] += 1
            log.exception("a recall log entry could not be built")
            return
        if caller is not None:
            command["caller"] = caller
        if self._records_closed or not self.writes.ready or self.recall_log is None:
            self.counters["recall_log_failed"] += 1
            log.warning("recall log entry %s not written: the hub is stopping", command.get("recall_id"))
            return
        self.recall_log.add(command)

    def _write_records(self, commands: list[dict[str, Any]]) -> None:
        """Loop thread: the waiting entries to the one writer, one request (one transaction)."""
        fut = self.writes.enqueue(commands, bounded=False)  # the hub's own small writes
        ids = [c.get("recall_id") for c in commands]
        fut.add_done_callback(functools.partial(self._records_done, ids))

    def _records_done(self, recall_ids: list[Any], fut: asyncio.Future[list[dict[str, Any]]]) -> None:
        if fut.cancelled() or fut.exception() is not None:
            self.counters["recall_log_failed"] += len(recall_ids)
            log.warning(
                "%d recall log entries (%s…) not written: %s",
                len(recall_ids),
                recall_ids[0],
                fut.exception() or "cancelled",
            )
            return
        for recall_id, answer in zip(recall_ids, fut.result(), strict=True):
            if "error" in answer:
                self.counters["recall_log_failed"] += 1
                log.warning("recall log entry %s refused: %s", recall_id, answer["error"])
            else:
                self.counters["recall_log_written"] += 1

    def _reader(self, fn: Callable[[dict[str, Any]], Any]) -> Handler:
        """A read method on the reader pool; the recall log entries it makes wait for its answer.

        A search or recall hands its recall log entry to the one writer (``_submit_record``).
        Queued at once, the entry's commit (SQLAlchemy statements, then an fsync) ran beside
        the end of the search, its encoding and its write, and they shared one interpreter
        lock: 2–3 ms of a 5 ms search. The entries are held until the answer is written
        (``HeldRecords``), then queued; none is dropped (a cancelled request queues them too).
        """

        async def run(conn: Connection, params: dict[str, Any]) -> Any:
            assert self._loop is not None
            held = HeldRecords(conn.caller())
            try:
                result = await self._loop.run_in_executor(self._reader_pool, self._holding, held, fn, params)
            except BaseException:
                self._release_records(held)  # an error or a cancelled request still logs
                raise
            if not held.items:
                held.closed = True
                return result
            return AfterAnswer(result, functools.partial(self._release_records, held))

        return run

    def _holding(self, held: HeldRecords, fn: Callable[[dict[str, Any]], Any], params: dict[str, Any]) -> Any:
        """Reader thread: run ``fn`` with its recall log entries going into ``held``."""
        self._held.records = held
        try:
            return fn(params)
        finally:
            self._held.records = None

    def _release_records(self, held: HeldRecords) -> None:
        """Loop thread: queue the held entries; any entry arriving later goes straight on."""
        with held.lock:
            held.closed = True
            items, held.items = held.items, []
        for command in items:
            self._queue_record(command, held.caller)

    # -- methods ------------------------------------------------------------------------
    async def _m_hello(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        version = params.get("protocol", protocol.PROTOCOL_VERSION)
        if version != protocol.PROTOCOL_VERSION:
            raise protocol.app_error(
                "invalid_argument",
                f"unsupported protocol version {version}; this hub speaks {protocol.PROTOCOL_VERSION}",
                {"supported": [protocol.PROTOCOL_VERSION]},
            )
        role = params.get("role", "reader")
        if role not in protocol.ROLES:
            raise RpcError(protocol.INVALID_PARAMS, f"role must be one of {protocol.ROLES}, not {role!r}")
        conn.role = role
        conn.client = str(params.get("client", ""))[:200]
        return {
            "server": "memviewer-hub",
            "server_version": __version__,
            "protocol": protocol.PROTOCOL_VERSION,
            "last_seq": self.service.store.last_seq,
            "frame_limit": self.frame_limit,
            "pid": os.getpid(),
            "home": str(self.home) if self.home is not None else None,
            "store_id": self.store_id,
            # whether this hub's background indexer embeds new turns (memviewer.wire.embedding)
            "indexing": self.start_indexer and self.indexer_status in ("not started", "running"),
        }

    async def _m_publish(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        """``publish`` (``_frame`` admits it itself, by its frame's size; this is the same
        path for a caller without a frame)."""
        commands = params["commands"]
        frame_bytes = len(protocol.encode(commands))
        return await self._publish_results(self._admit_publish(commands, frame_bytes, conn))

    def _admit_publish(
        self, commands: list[Any], frame_bytes: int, conn: Connection
    ) -> asyncio.Future[Results] | None:
        """Queue the commands for the writer (None: nothing to write). Raises the retryable
        ``overloaded`` error at once when the write queue is full, or when the hub stops.

        A ``record_recall`` is stamped with the connection's ``caller`` (what the hub knows:
        the kernel's peer pid/uid and the hello name), replacing any the client sent."""
        self.counters["publish_requests"] += 1
        if not commands:
            return None
        caller: dict[str, Any] | None = None
        for cmd in commands:
            if isinstance(cmd, dict) and cmd.get("op") == "record_recall":
                cmd["caller"] = caller = caller or conn.caller()
        if self._closing:
            raise protocol.app_error(
                "internal", "the hub is shutting down; publish again later", {"retry": True}
            )
        try:
            return self.writes.enqueue(commands, frame_bytes)
        except RpcError:
            self._log_overload()
            raise

    @staticmethod
    async def _publish_results(pending: asyncio.Future[Results] | None) -> dict[str, Any]:
        """The answer to an admitted publish, once its batch is committed."""
        return {"results": await pending if pending is not None else []}

    def _log_overload(self) -> None:
        n = self.counters["overloaded_requests"]
        if n in (1, 10, 100) or n % 1000 == 0:
            log.warning(
                "write queue full (%d bytes, %d commands waiting): %d publish requests pushed back so far",
                self.writes.pending_bytes,
                self.writes.pending_commands,
                n,
            )

    async def submit(self, commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Publish commands from an in-process source (OTLP receiver…) through the same
        queue as ``publish``: group-committed with the agents' batches, answered after commit.
        Raises ``MemviewerError`` (retryable) when the hub is closing or the store failed."""
        if not commands:
            return []
        if self._closing or not self.writes.ready:
            raise MemviewerError("internal", "the hub is shutting down", data={"retry": True})
        try:
            fut = self.writes.enqueue(commands, len(protocol.encode(commands)))
        except RpcError as err:
            self._log_overload()
            raise MemviewerError("internal", err.message, data={"retry": True, **err.data}) from None
        try:
            return await fut
        except RpcError as err:
            raise MemviewerError("internal", err.message, data={"retry": True, **err.data}) from None

    async def write(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the writer thread (a source's import), in turn with the
        publish batches; the event loop does not wait on it."""
        if self._closing or self.writes.executor is None:
            raise MemviewerError("internal", "the hub is shutting down", data={"retry": True})
        return await self.writes.run(fn, *args)

    async def _m_subscribe(self, conn: Connection, params: dict[str, Any]) -> Any:
        from_seq = params.get("from_seq") or 0
        if from_seq < 0:
            raise RpcError(protocol.INVALID_PARAMS, "from_seq must be >= 0")
        kinds = check_kinds(params.get("kinds"))
        sub = self.fanout.subscribe(conn, from_seq, kinds, params.get("session_id"))
        return Deferred(
            {"subscription": sub.id, "from_seq": from_seq, "last_seq": self.service.store.last_seq},
            lambda: self.fanout.begin(sub),
        )

    async def _m_unsubscribe(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        sub = self.fanout.unsubscribe(conn)
        if sub is None:
            return {"unsubscribed": False}
        return {"unsubscribed": True, "last_seq_sent": sub.cursor}

    async def _m_events(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        assert self._loop is not None
        limit = params.get("limit", 1000)
        if not 1 <= limit <= 10_000:
            raise RpcError(protocol.INVALID_PARAMS, "limit must be between 1 and 10000")
        from_seq = params.get("from_seq", 0)
        kinds = check_kinds(params.get("kinds"))

        def read() -> tuple[list[EventRecord], int]:  # last_seq fresh: another process may write
            found = self.service.events(
                from_seq, limit, sorted(kinds) if kinds else None, params.get("session_id")
            )
            return found, self.service.store.refresh_last_seq()

        events, last = await self._loop.run_in_executor(self._reader_pool, read)
        return {"events": [e.to_dict() for e in events], "last_seq": last}

    async def _m_stats(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        assert self._loop is not None
        out = await self._loop.run_in_executor(self._reader_pool, self.service.stats)
        out = dict(out)
        out["hub"] = self.info()
        return out

    def info(self) -> dict[str, Any]:
        """Hub health: connections, subscribers and their queues, counters."""
        return {
            "version": __version__,
            "protocol": protocol.PROTOCOL_VERSION,
            "socket": str(self.socket_path),
            "pid": os.getpid(),
            "uptime_s": round(time.monotonic() - self._started_at, 3) if self._started_at else 0.0,
            "connections": len(self._conns),
            "connections_by_role": _count_by(c.role for c in self._conns.values()),
            "connections_threaded": self.threads.serving if self.threads is not None else 0,
            **self.fanout.info(),
            "write_queue": self.writes.queued(),
            "write_pending": self.writes.info(),
            "recall_log_waiting": len(self.recall_log) if self.recall_log is not None else 0,
            "keyword_segments": self.keyword_segments,
            "dispatched_seq": self.fanout.dispatched,
            "pending_reorder": len(self.fanout.pending),
            "frame_limit": self.frame_limit,
            "counters": dict(self.counters),
            "refused_by_code": dict(self.refused_by_code),
            "last_refused": self.last_refused,
            "last_refusal": self.last_refusal,
            "spool_dir": str(self.spool_dir),
            "spool_ingested": list(self.spool_reports),
            "indexer": self.indexer_status,
            "sources": [source.status() for source in self.sources],
        }


def _raise_fd_limit(connections: int) -> None:
    """Lift the soft open-files limit toward the hard one: every connection is an fd, and the
    store needs its own beyond them (a 256-fd default made SQLite fail to open its files)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = connections * 2 + 256
        if hard != resource.RLIM_INFINITY:
            want = min(want, hard)
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ImportError, ValueError, OSError) as exc:  # not fatal: the cap still bounds fds
        log.debug("could not raise the open-files limit: %s", exc)


def _count_by(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _answering_hub(path: Path, timeout: float = 0.5) -> str | None:
    """The version of a hub answering on ``path`` (None when refused/absent)."""
    from memviewer.wire.probe import probe_hub

    return probe_hub(path, timeout=timeout)
