"""The hub: serves ``MemoryService`` over a Unix socket and fans events out live.

* One writer: every write (publish batches, spool ingestion, shutdown) runs
  on a single dedicated thread, so the event loop never waits on fsync and
  SQLite never sees two writers from this process. Concurrent ``publish``
  requests are group-committed: whatever queued up while the previous batch
  was being applied goes into the next ``apply_batch`` (one transaction, a
  savepoint per command), and each request is answered only after its
  batch returned, i.e. once it is durable.
* Fan-out: ``Store.on_commit`` (called on the writer thread after commit)
  hands events to the loop with ``call_soon_threadsafe``; each subscriber has
  a bounded queue. A subscriber first gets history from the store (paged),
  then live events, with no gap and no duplicate at the seam (see
  ``_Subscription``). A subscriber that falls too far behind gets ``lagged``
  and re-subscribes from the last seq it saw; hub memory stays bounded.
* Reads (sessions, search, recall …) run on a small reader thread pool.
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
from collections import deque
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from memviewer import __version__, locks, paths
from memviewer.errors import MemviewerError
from memviewer.store.events import EVENT_KINDS, EventRecord
from memviewer.wire import protocol, spool, trust
from memviewer.wire.probe import HOME_LOCK
from memviewer.wire.protocol import RpcError

log = logging.getLogger("memviewer.hub")

SUN_PATH_MAX = 107  # bytes, Linux AF_UNIX limit without the NUL
# After an oversized frame the hub reads the rest of it away (bounded), so a client
# still writing gets to read the error instead of a broken pipe.
DRAIN_FRAMES = 16  # read at most this many frame limits of the rest
DRAIN_TIMEOUT_S = 5.0
NONE = type(None)
OPT_STR = (str, NONE)
OPT_INT = (int, NONE)


class HubError(RuntimeError):
    """The hub cannot start (bad socket path, permissions …)."""


class HubAlreadyRunning(HubError):
    """Another hub answers on (or owns) this socket."""


# -- parameter checks ------------------------------------------------------------
# name -> allowed types; names in REQUIRED must be present. Unknown names are
# rejected (-32602) except where a method passes extra options through.
SCHEMAS: dict[str, dict[str, tuple[type, ...]]] = {
    protocol.HELLO: {"protocol": (int,), "role": (str,), "client": (str,)},
    protocol.PUBLISH: {"commands": (list,)},
    protocol.SUBSCRIBE: {"from_seq": OPT_INT, "kinds": (list, NONE), "session_id": OPT_STR},
    protocol.UNSUBSCRIBE: {},
    protocol.EVENTS: {"from_seq": (int,), "limit": (int,), "kinds": (list, NONE), "session_id": OPT_STR},
    protocol.SESSIONS: {
        "scope": OPT_STR,
        "scope_id": OPT_STR,
        "filter": OPT_STR,
        "sort": (str,),
        "descending": (bool,),
        "limit": OPT_INT,
        "offset": (int,),
    },
    protocol.SESSION: {"session_id": (str,)},
    protocol.SEARCH: {
        "query": OPT_STR,
        "session_id": OPT_STR,
        "around": (int, str, NONE),
        "limit": (int,),
        "window": (int,),
        "scope": OPT_STR,
        "scope_id": OPT_STR,
        "record": (dict, bool, NONE),
    },
    protocol.RECALL: {
        "query": (str,),
        "scope": OPT_STR,
        "scope_id": OPT_STR,
        "top_sessions": (int,),
        "chunks_per_session": (int,),
        "top_k": (int,),
        "mode": (str,),
        "record": (dict, bool, NONE),
    },
    protocol.STATS: {},
}
REQUIRED = {protocol.PUBLISH: ("commands",), protocol.SESSION: ("session_id",), protocol.RECALL: ("query",)}
# hello ignores unknown keys (forward compatibility); recall options belong to the recall layer.
PASS_THROUGH = {protocol.HELLO, protocol.RECALL}


# Integers must fit SQLite's 64-bit INTEGER; these also have a floor.
INT64_MAX = 2**63 - 1
INT_FLOOR = {
    "from_seq": 0,
    "limit": 1,
    "offset": 0,
    "window": 0,
    "top_k": 1,
    "top_sessions": 1,
    "chunks_per_session": 1,
    "protocol": 0,
}


def check_params(method: str, params: dict[str, Any]) -> None:
    schema = SCHEMAS.get(method, {})
    for name in REQUIRED.get(method, ()):
        if name not in params:
            raise RpcError(protocol.INVALID_PARAMS, f"{method}: missing parameter {name!r}")
    for name, value in params.items():
        allowed = schema.get(name)
        if allowed is None:
            if method in PASS_THROUGH:
                continue
            known = ", ".join(schema) or "none"
            raise RpcError(protocol.INVALID_PARAMS, f"{method}: unknown parameter {name!r} (known: {known})")
        if isinstance(value, bool) and bool not in allowed:
            ok = False
        else:
            ok = isinstance(value, allowed)
        if not ok:
            names = "/".join("null" if t is NONE else t.__name__ for t in allowed)
            raise RpcError(
                protocol.INVALID_PARAMS,
                f"{method}: parameter {name!r} must be {names}, not {type(value).__name__}",
            )
        if isinstance(value, int) and not isinstance(value, bool):
            floor = INT_FLOOR.get(name, -INT64_MAX)
            if not floor <= value <= INT64_MAX:
                raise RpcError(
                    protocol.INVALID_PARAMS,
                    f"{method}: parameter {name!r} must be between {floor} and {INT64_MAX}",
                )


def _check_kinds(kinds: list[Any] | None) -> frozenset[str] | None:
    if not kinds:
        return None
    bad = [k for k in kinds if not isinstance(k, str) or k not in EVENT_KINDS]
    if bad:
        raise RpcError(protocol.INVALID_PARAMS, f"unknown event kinds {bad!r}; known: {list(EVENT_KINDS)}")
    return frozenset(kinds)


# -- connections and subscriptions ------------------------------------------------
class _Conn:
    """One client connection: its writer, in-flight request slots and subscription."""

    def __init__(
        self, cid: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_inflight: int
    ) -> None:
        self.id = cid
        self.reader = reader
        self.writer = writer
        self.role = "unknown"
        self.client = ""
        self.opened = time.time()
        self.slots = asyncio.Semaphore(max_inflight)
        self.tasks: set[asyncio.Task[Any]] = set()
        self.sub: _Subscription | None = None
        self.closed = False
        self.requests = 0

    def write(self, data: bytes) -> None:
        if not self.closed and not self.writer.is_closing():
            self.writer.write(data)

    async def send(self, data: bytes) -> None:
        """Write one frame and wait while the client's buffer is full (back-pressure)."""
        self.write(data)
        await self.drain()

    async def drain(self) -> None:
        if self.closed or self.writer.is_closing():
            self.closed = True
            return
        try:
            await self.writer.drain()
        except (ConnectionError, OSError):
            self.closed = True

    def buffered(self) -> int:
        transport = self.writer.transport
        return transport.get_write_buffer_size() if transport is not None else 0

    def spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def close(self) -> None:
        self.closed = True
        if self.sub is not None:
            self.sub.stop()
        for task in list(self.tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            self.writer.close()


class _Subscription:
    """A subscriber's bounded queue and the task that feeds its socket.

    The seam between history and live: the subscription is registered for
    live events *before* the first history page is read, so an event is
    either in a page (committed before that read) or in the live queue
    (dispatched after registration); the sender skips any live event whose
    seq it already sent. While catching up, a full queue is simply emptied
    (those events are in the store and the next page reads them); the switch
    to live happens only after a short page during which nothing was dropped.
    Once live, a full queue means ``lagged``.
    """

    def __init__(
        self,
        sid: int,
        conn: _Conn,
        from_seq: int,
        kinds: frozenset[str] | None,
        session_id: str | None,
        limit: int,
    ) -> None:
        self.id = sid
        self.conn = conn
        self.from_seq = from_seq
        self.cursor = from_seq  # last seq sent (or skipped past) to this subscriber
        self.kinds = kinds
        self.session_id = session_id
        self.limit = limit
        self.queue: deque[tuple[int, bytes]] = deque()
        self.state = "history"  # history | live | lagged | stopped
        self.wakeup = asyncio.Event()
        self.drops = 0  # queue overflows during catch-up
        self.sent = 0
        self.lagged_dropped = 0
        self.lagged_at: float | None = None
        self.task: asyncio.Task[Any] | None = None

    def matches(self, ev: EventRecord) -> bool:
        if self.kinds is not None and ev.kind not in self.kinds:
            return False
        return self.session_id is None or ev.session_id == self.session_id

    def offer(self, ev: EventRecord, frame: bytes) -> None:
        if self.state in ("lagged", "stopped") or not self.matches(ev):
            return
        if len(self.queue) >= self.limit:
            self.lagged_dropped += len(self.queue)
            self.queue.clear()
            if self.state == "history":
                self.drops += 1
                return
            self.state = "lagged"
            self.lagged_at = time.time()
            self.wakeup.set()
            return
        self.queue.append((ev.seq, frame))
        self.wakeup.set()

    def stop(self) -> None:
        self.state = "stopped"
        self.queue.clear()
        self.wakeup.set()
        if self.task is not None and self.task is not asyncio.current_task():
            self.task.cancel()

    def info(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "connection": self.conn.id,
            "state": self.state,
            "from_seq": self.from_seq,
            "last_seq_sent": self.cursor,
            "queued": len(self.queue),
            "queue_limit": self.limit,
            "sent": self.sent,
            "kinds": sorted(self.kinds) if self.kinds else None,
            "session_id": self.session_id,
            "client_buffer_bytes": self.conn.buffered(),
        }


def _event_frame(ev: EventRecord) -> bytes:
    """The event's notification; never raises, so one bad row cannot stall a stream.

    A payload stored too deeply nested to encode (an old import) is replaced by a note
    saying so: the seq still arrives, so subscribers see no gap and do not re-subscribe.
    """
    try:
        return protocol.notification(protocol.EVENT, ev.to_dict())
    except (RecursionError, ValueError, TypeError) as exc:
        log.error("event %d cannot be encoded (%s); sending it without its payload", ev.seq, exc)
        stub = {**ev.to_dict(), "payload": {"unencodable": f"{type(exc).__name__}: {exc}"}}
        return protocol.notification(protocol.EVENT, stub)


# -- the hub -------------------------------------------------------------------------
class Hub:
    """JSON-RPC server over ``service``; ``await start()`` inside any running loop.

    The hub is not the agent: stopping it (SIGINT, SIGTERM, ``close()``) never closes
    an episode. Agents keep publishing into their spools while no hub runs and replay
    into the same open episodes when one comes back. An agent's own end (the
    publisher's ``shutdown`` command at ``Publisher.close()``) abandons that agent's
    episodes; idle pruning handles agents that vanished. ``abandon_on_stop`` is kept
    for callers that pass ``False``; ``True`` (the old ``serve`` default) is refused.
    """

    def __init__(
        self,
        service: Any,
        socket_path: str | Path,
        *,
        frame_limit: int | None = None,
        subscriber_queue: int | None = None,
        spool_dir: str | Path | None = None,
        start_indexer: bool = True,
        history_page: int = 500,
        max_group_commands: int = 2000,
        max_inflight: int = 16,
        readers: int = 4,
        max_connections: int = 512,
        stall_timeout: float = 60.0,
        spool_scan_interval: float = 30.0,
        foreign_poll_interval: float = 0.5,
        abandon_on_stop: bool = False,
        sources: list[Any] | None = None,
    ) -> None:
        if abandon_on_stop:
            raise ValueError(
                "a hub never abandons episodes when it stops (the hub is not the agent); "
                "an agent's Publisher.close() ends its own"
            )
        settings = getattr(service, "settings", None)
        self.service = service
        self.socket_path = Path(socket_path).expanduser()
        self.frame_limit = int(
            frame_limit or getattr(settings, "frame_limit", None) or protocol.DEFAULT_FRAME_LIMIT
        )
        self.subscriber_queue = int(subscriber_queue or getattr(settings, "subscriber_queue", None) or 10_000)
        home = getattr(service, "home", None) or paths.default_home()
        self.spool_dir = Path(spool_dir) if spool_dir else paths.spool_dir(Path(home))
        self.start_indexer = start_indexer
        self.history_page = history_page
        self.max_group_commands = max_group_commands
        self.max_inflight = max_inflight
        self.readers = readers
        self.spool_scan_interval = spool_scan_interval
        self.foreign_poll_interval = foreign_poll_interval
        self.max_connections = max_connections
        self.stall_timeout = stall_timeout
        home_attr = getattr(service, "home", None)
        self.home: Path | None = Path(trust.resolved(home_attr)) if home_attr is not None else None
        self.store_id: str | None = None
        # Sources (memviewer.sources): started after the socket answers, stopped first.
        self.sources: list[Any] = list(sources or [])

        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._writer: ThreadPoolExecutor | None = None
        self._reader_pool: ThreadPoolExecutor | None = None
        self._write_q: asyncio.Queue[tuple[list[Any], asyncio.Future[Any]] | None] | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._conns: dict[int, _Conn] = {}
        self._subs: dict[int, _Subscription] = {}
        self._next_conn = 0
        self._next_sub = 0
        self._lock_fd: int | None = None
        self._lock_path = self.socket_path.with_name(self.socket_path.name + ".lock")
        self._home_lock_fd: int | None = None
        self._sock_ino: int | None = None
        self._started_at = 0.0
        self._closing = False
        self._closed = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._close_task: asyncio.Task[Any] | None = None

        # fan-out state (loop thread only)
        self._dispatched = 0
        self._pending: dict[int, EventRecord] = {}
        self._gap_timer: asyncio.TimerHandle | None = None

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
        }
        self.refused_by_code: dict[str, int] = {}
        self.last_refused: dict[str, Any] | None = None  # the last command the store refused
        self.last_refusal: dict[str, Any] | None = None  # the store's last failure (full disk…)
        self.spool_reports: list[dict[str, Any]] = []
        self.indexer_status = "not started"
        self.last_close_report: dict[str, Any] = {}
        self._handler_table: dict[str, Any] | None = None

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
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="memviewer-writer")
            self._reader_pool = ThreadPoolExecutor(self.readers, thread_name_prefix="memviewer-reader")
            self._write_q = asyncio.Queue()
            self.service.store.on_commit(self._on_commit)
            self.service.record_sink = self._submit_record  # recall log entries: the one writer
            self._dispatched = self.service.store.last_seq
            # Leftover spools first: once the hub answers, what dead publishers left is stored.
            await self._ingest_spools()
            self._server = await asyncio.start_unix_server(
                self._handle, path=str(self.socket_path), limit=self.frame_limit
            )
            os.chmod(self.socket_path, 0o600)
            self._sock_ino = os.stat(self.socket_path).st_ino
        except BaseException:
            self._closed.set()
            if getattr(self.service, "record_sink", None) == self._submit_record:
                self.service.record_sink = None
            self._release_socket()
            if self._writer is not None:
                self._writer.shutdown(wait=False)
            if self._reader_pool is not None:
                self._reader_pool.shutdown(wait=False)
            raise
        self._started_at = time.monotonic()
        self._tasks.append(asyncio.create_task(self._writer_pump(), name="memviewer-hub-writer"))
        self._tasks.append(asyncio.create_task(self._spool_scanner(), name="memviewer-hub-spool"))
        self._tasks.append(asyncio.create_task(self._foreign_watch(), name="memviewer-hub-foreign"))
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
        if getattr(self.service, "record_sink", None) == self._submit_record:
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
        if self._write_q is not None and self._tasks:
            self._write_q.put_nowait(None)
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._tasks[0]), timeout=30)
        if self._writer is not None:
            try:
                report["open_episodes"] = await loop.run_in_executor(self._writer, self._open_episodes)
            except Exception:
                log.exception("listing the open episodes failed")
        deadline = loop.time() + grace
        while loop.time() < deadline and any(s.queue for s in self._subs.values()):
            await asyncio.sleep(0.02)
        self._closed.set()
        for conn in list(self._conns.values()):
            conn.close()
        await asyncio.sleep(0)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout=2)
        if self._gap_timer is not None:
            self._gap_timer.cancel()
        if self._writer is not None:  # e.g. a spool ingestion still running: no write after close()
            await loop.run_in_executor(None, self._writer.shutdown, True)
        if self._reader_pool is not None:
            self._reader_pool.shutdown(wait=False, cancel_futures=True)
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
        home = getattr(self.service, "home", None)
        if home is None:
            return
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
            report = await self._loop.run_in_executor(
                self._writer, spool.ingest, self.spool_dir, self._apply_spooled
            )
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
        self._count_refusals(commands, results, where="spool")
        return results

    async def _foreign_watch(self) -> None:
        """Events committed by another process (a CLI import into this home) reach the
        subscribers, and ``last_seq`` stays true, even while this hub writes nothing itself."""
        assert self._loop is not None
        store = self.service.store
        while True:
            await asyncio.sleep(self.foreign_poll_interval)
            try:
                last = await self._loop.run_in_executor(self._reader_pool, store.refresh_last_seq)
                while last > self._dispatched and not self._closed.is_set():
                    seen = max(self._dispatched, max(self._pending, default=0))
                    if last <= seen:
                        break  # in flight from this hub's own writer: _on_commit delivers it
                    page = await self._loop.run_in_executor(
                        self._reader_pool, self.service.events, self._dispatched, self.history_page
                    )
                    if not page:
                        break
                    self._dispatch(page)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("could not read events written by another process")

    async def _spool_scanner(self) -> None:
        while True:
            await asyncio.sleep(self.spool_scan_interval)
            await self._ingest_spools()

    async def _writer_pump(self) -> None:
        """Apply queued publishes in order; everything queued meanwhile is one group commit."""
        assert self._write_q is not None and self._loop is not None
        q = self._write_q
        while True:
            first = await q.get()
            if first is None:
                return
            group = [first]
            n = len(first[0])
            stop = False
            while n < self.max_group_commands and not q.empty():
                item = q.get_nowait()
                if item is None:
                    stop = True
                    break
                group.append(item)
                n += len(item[0])
            commands = [c for cmds, _ in group for c in cmds]
            try:
                results = await self._loop.run_in_executor(self._writer, self.service.apply_batch, commands)
            except MemviewerError as exc:  # the store failed (full disk…): retryable, nothing stored
                log.error("a publish batch was not applied: %s", exc.message)
                self.counters["refused_batches"] += 1
                self.last_refusal = {"at": time.time(), "message": exc.message, **exc.data}
                err = protocol.app_error(exc.code, f"batch not applied: {exc.message}", exc.data)
                for _, fut in group:
                    if not fut.done():
                        fut.set_exception(err)
            except Exception as exc:
                log.exception("a publish batch failed as a whole")
                err = protocol.app_error("internal", f"batch not applied: {exc}", {"retry": True})
                for _, fut in group:
                    if not fut.done():
                        fut.set_exception(err)
            else:
                self.counters["group_commits"] += 1
                self.counters["published_commands"] += len(commands)
                self._count_refusals(commands, results)
                i = 0
                for cmds, fut in group:
                    if not fut.done():
                        fut.set_result(results[i : i + len(cmds)])
                    i += len(cmds)
            if stop:
                return

    def _count_refusals(
        self, commands: list[Any], results: list[dict[str, Any]], where: str = "publish"
    ) -> None:
        """Count and log every command the store refused (the agent hears it in its result)."""
        for cmd, res in zip(commands, results, strict=False):
            err = res.get("error") if isinstance(res, dict) else None
            if err is None:
                continue
            code = str(err.get("code")) if isinstance(err, dict) else "unknown"
            message = str(err.get("message")) if isinstance(err, dict) else str(err)
            op = cmd.get("op") if isinstance(cmd, dict) else None
            self.counters["command_errors"] += 1
            self.counters["refused_commands"] += 1
            self.refused_by_code[code] = self.refused_by_code.get(code, 0) + 1
            self.last_refused = {"at": time.time(), "op": op, "code": code, "message": message, "via": where}
            log.warning("refused %s command %s: %s: %s", where, op, code, message)

    # -- fan-out ----------------------------------------------------------------------
    def _on_commit(self, events: list[EventRecord]) -> None:
        """Writer thread, after commit: hand the events to the loop."""
        loop = self._loop
        if self._closed.is_set() or loop is None:
            return
        with contextlib.suppress(RuntimeError):  # loop already closed
            loop.call_soon_threadsafe(self._dispatch, events)

    def _dispatch(self, events: list[EventRecord]) -> None:
        """Loop thread: deliver in seq order; a gap waits briefly, then is filled from the store."""
        for ev in events:
            if ev.seq > self._dispatched:
                self._pending[ev.seq] = ev
        subs = list(self._subs.values())
        while self._dispatched + 1 in self._pending:
            ev = self._pending.pop(self._dispatched + 1)
            self._dispatched = ev.seq
            self.counters["events_dispatched"] += 1
            if subs:
                frame = _event_frame(ev)
                for sub in subs:
                    was = sub.state
                    sub.offer(ev, frame)
                    if sub.state == "lagged" and was != "lagged":
                        self.counters["lagged"] += 1
                        log.info("subscriber %d lagged at seq %d", sub.id, sub.cursor)
        if self._pending and self._gap_timer is None and self._loop is not None:
            self._gap_timer = self._loop.call_later(0.5, self._fill_gap)

    def _fill_gap(self) -> None:
        self._gap_timer = None
        if not self._pending or self._closed.is_set():
            return
        lo, hi = self._dispatched, min(self._pending)
        log.info("event gap %d..%d not seen in-process (another writer?); reading it from the store", lo, hi)

        async def _fill() -> None:
            assert self._loop is not None
            try:
                missing = await self._loop.run_in_executor(
                    self._reader_pool, self.service.events, lo, hi - lo - 1
                )
            except Exception:
                log.exception("could not read the event gap")
                missing = []
            self._dispatch(missing)
            if self._pending and self._dispatched + 1 not in self._pending and self._dispatched <= lo:
                first = min(self._pending)
                log.error(
                    "events %d..%d are not in the store; skipping them", self._dispatched + 1, first - 1
                )
                self._dispatched = first - 1
                self._dispatch([])

        asyncio.ensure_future(_fill())

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
        conn = _Conn(self._next_conn, reader, writer, self.max_inflight)
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
                await self._frame(conn, line)
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
            if conn.sub is not None:
                self._subs.pop(conn.sub.id, None)

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

    async def _frame(self, conn: _Conn, line: bytes) -> None:
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
        conn.spawn(self._answer(conn, req_id, is_note, fn(conn, params), release=True))

    async def _answer(
        self, conn: _Conn, req_id: Any, is_note: bool, coro: Awaitable[Any], release: bool = False
    ) -> None:
        deferred: _Deferred | None = None
        try:
            try:
                result = await coro
            except RpcError as err:
                out = protocol.error_response(req_id, err)
            except MemviewerError as exc:
                out = protocol.error_response(req_id, protocol.app_error(exc.code, exc.message, exc.data))
            except (TypeError, ValueError) as exc:
                out = protocol.error_response(req_id, RpcError(protocol.INVALID_PARAMS, str(exc)))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("request failed")
                out = protocol.error_response(
                    req_id, RpcError(protocol.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
                )
            else:
                deferred = result if isinstance(result, _Deferred) else None
                try:  # an answer that cannot be encoded still gets an answer
                    out = protocol.response(req_id, deferred.result if deferred else result)
                except (RecursionError, ValueError, TypeError) as exc:
                    log.error("the answer to request %r cannot be encoded: %s", req_id, exc)
                    out = protocol.error_response(
                        req_id,
                        RpcError(
                            protocol.INTERNAL_ERROR,
                            f"the result cannot be encoded as JSON ({type(exc).__name__}: {exc})",
                        ),
                    )
            if not is_note:
                await conn.send(out)
            if deferred is not None:
                deferred.then()
        finally:
            if release:
                conn.slots.release()

    def _handlers(self) -> dict[str, tuple[bool, Callable[[_Conn, dict[str, Any]], Awaitable[Any]]]]:
        if self._handler_table is None:
            self._handler_table = self._build_handlers()
        return self._handler_table

    def _build_handlers(self) -> dict[str, tuple[bool, Callable[[_Conn, dict[str, Any]], Awaitable[Any]]]]:
        return {
            protocol.HELLO: (True, self._m_hello),
            protocol.PUBLISH: (False, self._m_publish),
            protocol.SUBSCRIBE: (True, self._m_subscribe),
            protocol.UNSUBSCRIBE: (True, self._m_unsubscribe),
            protocol.EVENTS: (False, self._m_events),
            protocol.SESSIONS: (False, self._reader(lambda p: self.service.sessions(**p))),
            protocol.SESSION: (False, self._reader(lambda p: self.service.session(p["session_id"]))),
            protocol.SEARCH: (False, self._reader(self._search)),
            protocol.RECALL: (False, self._reader(self._recall)),
            protocol.STATS: (False, self._m_stats),
        }

    def _search(self, params: dict[str, Any]) -> dict[str, Any]:
        """Reader thread: a search, recorded in the recall log as the caller asked (``record``)."""
        from memviewer.recall_log import RecordAs

        args = {k: v for k, v in params.items() if k != "record"}
        return self.service.search(**args, record=RecordAs.from_param(params.get("record")))

    def _recall(self, params: dict[str, Any]) -> dict[str, Any]:
        from memviewer.recall_log import RecordAs

        args = {k: v for k, v in params.items() if k not in ("query", "record")}
        return self.service.recall(params["query"], record=RecordAs.from_param(params.get("record")), **args)

    # -- the recall log's writer route ------------------------------------------------
    def _submit_record(self, command: dict[str, Any]) -> None:
        """Any thread: queue a recall log entry for the one writer (answered without waiting)."""
        loop = self._loop
        if loop is None or self._closing:
            raise MemviewerError("internal", "the hub is stopping; the recall log entry is not written")
        loop.call_soon_threadsafe(self._queue_record, command)

    def _queue_record(self, command: dict[str, Any]) -> None:
        assert self._loop is not None
        if self._closing or self._write_q is None:
            self.counters["recall_log_failed"] += 1
            log.warning("recall log entry %s not written: the hub is stopping", command.get("recall_id"))
            return
        fut: asyncio.Future[list[dict[str, Any]]] = self._loop.create_future()
        fut.add_done_callback(functools.partial(self._record_done, command.get("recall_id")))
        self._write_q.put_nowait(([command], fut))

    def _record_done(self, recall_id: Any, fut: asyncio.Future[list[dict[str, Any]]]) -> None:
        if fut.cancelled() or fut.exception() is not None:
            self.counters["recall_log_failed"] += 1
            log.warning("recall log entry %s not written: %s", recall_id, fut.exception() or "cancelled")
            return
        (answer,) = fut.result()
        if "error" in answer:
            self.counters["recall_log_failed"] += 1
            log.warning("recall log entry %s refused: %s", recall_id, answer["error"])
        else:
            self.counters["recall_log_written"] += 1

    def _reader(
        self, fn: Callable[[dict[str, Any]], Any]
    ) -> Callable[[_Conn, dict[str, Any]], Awaitable[Any]]:
        async def run(_conn: _Conn, params: dict[str, Any]) -> Any:
            assert self._loop is not None
            return await self._loop.run_in_executor(self._reader_pool, fn, params)

        return run

    # -- methods ------------------------------------------------------------------------
    async def _m_hello(self, conn: _Conn, params: dict[str, Any]) -> dict[str, Any]:
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
        }

    async def _m_publish(self, conn: _Conn, params: dict[str, Any]) -> dict[str, Any]:
        commands = params["commands"]
        self.counters["publish_requests"] += 1
        if not commands:
            return {"results": []}
        if self._closing:
            raise protocol.app_error(
                "internal", "the hub is shutting down; publish again later", {"retry": True}
            )
        assert self._write_q is not None and self._loop is not None
        fut: asyncio.Future[list[dict[str, Any]]] = self._loop.create_future()
        self._write_q.put_nowait((commands, fut))
        return {"results": await fut}

    async def submit(self, commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Publish commands from an in-process source (OTLP receiver…) through the same
        queue as ``publish``: group-committed with the agents' batches, answered after commit.
        Raises ``MemviewerError`` (retryable) when the hub is closing or the store failed."""
        if not commands:
            return []
        if self._closing or self._write_q is None or self._loop is None:
            raise MemviewerError("internal", "the hub is shutting down", data={"retry": True})
        fut: asyncio.Future[list[dict[str, Any]]] = self._loop.create_future()
        self._write_q.put_nowait((commands, fut))
        try:
            return await fut
        except RpcError as err:
            raise MemviewerError("internal", err.message, data={"retry": True, **err.data}) from None

    async def write(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the writer thread (a source's import), in turn with the
        publish batches; the event loop does not wait on it."""
        if self._closing or self._writer is None or self._loop is None:
            raise MemviewerError("internal", "the hub is shutting down", data={"retry": True})
        return await self._loop.run_in_executor(self._writer, fn, *args)

    async def _m_subscribe(self, conn: _Conn, params: dict[str, Any]) -> Any:
        from_seq = params.get("from_seq") or 0
        if from_seq < 0:
            raise RpcError(protocol.INVALID_PARAMS, "from_seq must be >= 0")
        kinds = _check_kinds(params.get("kinds"))
        if conn.sub is not None:  # one subscription per connection: the new one replaces it
            conn.sub.stop()
            self._subs.pop(conn.sub.id, None)
        self._next_sub += 1
        sub = _Subscription(
            self._next_sub, conn, from_seq, kinds, params.get("session_id"), self.subscriber_queue
        )
        conn.sub = sub
        self._subs[sub.id] = sub  # registered for live events before history is read

        def begin() -> None:
            sub.task = asyncio.ensure_future(self._feed(sub))

        return _Deferred(
            {"subscription": sub.id, "from_seq": from_seq, "last_seq": self.service.store.last_seq},
            begin,
        )

    async def _m_unsubscribe(self, conn: _Conn, params: dict[str, Any]) -> dict[str, Any]:
        sub = conn.sub
        if sub is None:
            return {"unsubscribed": False}
        sub.stop()
        self._subs.pop(sub.id, None)
        conn.sub = None
        return {"unsubscribed": True, "last_seq_sent": sub.cursor}

    async def _m_events(self, conn: _Conn, params: dict[str, Any]) -> dict[str, Any]:
        assert self._loop is not None
        limit = params.get("limit", 1000)
        if not 1 <= limit <= 10_000:
            raise RpcError(protocol.INVALID_PARAMS, "limit must be between 1 and 10000")
        from_seq = params.get("from_seq", 0)
        kinds = _check_kinds(params.get("kinds"))

        def read() -> tuple[list[EventRecord], int]:  # last_seq fresh: another process may write
            found = self.service.events(
                from_seq, limit, sorted(kinds) if kinds else None, params.get("session_id")
            )
            return found, self.service.store.refresh_last_seq()

        events, last = await self._loop.run_in_executor(self._reader_pool, read)
        return {"events": [e.to_dict() for e in events], "last_seq": last}

    async def _m_stats(self, conn: _Conn, params: dict[str, Any]) -> dict[str, Any]:
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
            "subscribers": [s.info() for s in self._subs.values()],
            "subscriber_queue_limit": self.subscriber_queue,
            "queued_events": sum(len(s.queue) for s in self._subs.values()),
            "write_queue": self._write_q.qsize() if self._write_q is not None else 0,
            "dispatched_seq": self._dispatched,
            "pending_reorder": len(self._pending),
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

    # -- the subscriber feed ----------------------------------------------------------------
    async def _feed(self, sub: _Subscription) -> None:
        assert self._loop is not None
        conn = sub.conn
        kinds = sorted(sub.kinds) if sub.kinds else None
        try:
            while sub.state == "history":
                drops = sub.drops
                page = await self._loop.run_in_executor(
                    self._reader_pool,
                    self.service.events,
                    sub.cursor,
                    self.history_page,
                    kinds,
                    sub.session_id,
                )
                if sub.state == "stopped":
                    return
                for ev in page:
                    if ev.seq > sub.cursor:
                        conn.write(_event_frame(ev))
                        sub.cursor = ev.seq
                        sub.sent += 1
                await conn.drain()
                if conn.closed:
                    return
                if len(page) < self.history_page and sub.drops == drops:
                    sub.state = "live"
            while sub.state == "live":
                while sub.queue:
                    seq, frame = sub.queue.popleft()
                    if seq <= sub.cursor:
                        continue  # already sent from history
                    conn.write(frame)
                    sub.cursor = seq
                    sub.sent += 1
                    if conn.buffered() > 256 * 1024:
                        await conn.drain()
                await conn.drain()
                if conn.closed:
                    return
                sub.wakeup.clear()
                if not sub.queue and sub.state == "live":
                    await sub.wakeup.wait()
            if sub.state == "lagged":
                self._subs.pop(sub.id, None)
                if conn.sub is sub:
                    conn.sub = None
                await conn.send(
                    protocol.notification(
                        protocol.LAGGED,
                        {
                            "subscription": sub.id,
                            "last_seq_sent": sub.cursor,
                            "queue_limit": sub.limit,
                            "dropped": sub.lagged_dropped,
                        },
                    )
                )
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("subscriber %d feed failed", sub.id)
            conn.close()
        finally:
            self._subs.pop(sub.id, None)


class _Deferred:
    """A result whose response must be written before ``then()`` runs (subscribe ack, then events)."""

    def __init__(self, result: Any, then: Callable[[], None]) -> None:
        self.result = result
        self.then = then


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


def _count_by(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _answering_hub(path: Path, timeout: float = 0.5) -> str | None:
    """The version of a hub answering on ``path`` (None when refused/absent)."""
    from memviewer.wire.probe import probe_hub

    return probe_hub(path, timeout=timeout)
