"""The hub: serves ``MemoryService`` over a Unix socket and fans events out live.

``Hub`` is the public entry: it wires its parts together, starts and stops them, and
holds the methods it serves. Each part has a module of its own:

* ``rpc_server``: accepting connections, reading frames, dispatch and answers
  (``RpcServer``, which ``Hub`` extends with its methods).
* ``hub_socket``: the socket file and the locks that make this the only hub for its
  socket and its home.
* ``hub_limits``: ``HubLimits``, the bounds and intervals a hub runs with.
* ``hub_params``: each method's parameter schema, checked before dispatch.
* ``connection``: one client connection and its subscription.
* ``group_commit``: the one writer thread. Every write (publish batches, spool
  ingestion, a source's import) runs there, so the event loop never waits on fsync
  and SQLite never sees two writers from this process; concurrent ``publish``
  requests are group-committed and each is answered once its batch is durable.
* ``hub_records``: the recall log entries of the hub's reads, on their way to the writer.
* ``hub_jobs``: background jobs (the indexer's start, spool ingestion, keyword upkeep).
* ``fanout``: committed events to subscribers (history, then live, no gap at the
  seam), gap-fill and the watch for commits made by another process.
* Reads (sessions, search, recall …) run on a small reader thread pool; from its first
  fast read (``search``, ``sessions``, ``session``) on, a connection is served by a thread
  of its own that reads its frames, runs fast reads and answers them (``threaded``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memviewer import __version__, paths, recall_log
from memviewer.errors import MemviewerError
from memviewer.events import EventRecord
from memviewer.wire import protocol, trust
from memviewer.wire.connection import AfterAnswer, Connection, Deferred, HeldRecords
from memviewer.wire.fanout import FanOut
from memviewer.wire.group_commit import GroupCommitWriter, Results
from memviewer.wire.hub_jobs import HubJobs
from memviewer.wire.hub_limits import HubLimits
from memviewer.wire.hub_params import check_kinds
from memviewer.wire.hub_records import HubRecords
from memviewer.wire.hub_service import HubService
from memviewer.wire.hub_socket import HubAlreadyRunning, HubError, HubSocket
from memviewer.wire.hub_tcp import TLS_HANDSHAKE_TIMEOUT_S, Listen, server_context
from memviewer.wire.protocol import RpcError
from memviewer.wire.rpc_server import Handler, RpcServer, raise_fd_limit

if TYPE_CHECKING:  # a type only: sources sit a layer below the hub that runs them
    from memviewer.sources.source import Source
from memviewer.wire.threaded import ThreadedReads

log = logging.getLogger("memviewer.hub")

TOKEN_SWEEP_S = 1.0  # how soon a revoked token's quiet connections (subscribers) are closed

# The hub's face; its limits, jobs and parameter checks are imported from their own modules.
__all__ = ["Hub", "HubAlreadyRunning", "HubError", "HubLimits"]

COUNTERS = (  # the hub's counters in ``stats`` (``hub.counters``), in this order
    "publish_requests",
    "published_commands",
    "group_commits",
    "command_errors",
    "events_dispatched",
    "lagged",
    "connections_total",
    "protocol_errors",
    "refused_batches",
    "refused_connections",
    "stalled_connections",
    "recall_log_written",
    "recall_log_failed",
    "refused_commands",
    "overloaded_requests",
    "overloaded_commands",
    "refused_tokens",
)


class Hub(RpcServer):
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
        limits: HubLimits | None = None,
        spool_dir: str | Path | None = None,
        start_indexer: bool = True,
        sources: Sequence[Source] | None = None,
        listen: Listen | None = None,
    ) -> None:
        settings = service.settings
        self.limits = limits = limits or HubLimits()
        super().__init__(
            dict.fromkeys(COUNTERS, 0),
            frame_limit=int(limits.frame_limit or settings.frame_limit or protocol.DEFAULT_FRAME_LIMIT),
            max_inflight=limits.max_inflight,
            max_connections=limits.max_connections,
            stall_timeout=limits.stall_timeout,
        )
        self.service = service
        self.socket_path = Path(socket_path).expanduser()
        self.subscriber_queue = int(limits.subscriber_queue or settings.subscriber_queue or 10_000)
        self.spool_dir = Path(spool_dir) if spool_dir else paths.spool_dir(Path(service.home))
        self.start_indexer = start_indexer
        self.home: Path = Path(trust.resolved(service.home))
        # Sources (memviewer.sources): started after the socket answers, stopped first.
        self.sources: list[Source] = list(sources or [])
        self.last_close_report: dict[str, Any] = {}
        self.listen = listen  # the TCP listener (``serve --listen``), if any
        self.listen_port: int | None = None  # the port it is bound to (``--listen HOST:0``)
        self._tcp: asyncio.AbstractServer | None = None
        self.tokens: Any = None  # wire.auth.TokenGate, made with the TCP listener

        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._reader_pool: ThreadPoolExecutor | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._socket = HubSocket(self.socket_path, service.home)
        self._started_at = 0.0
        self._closed = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._close_task: asyncio.Task[Any] | None = None
        self._read_table: dict[str, Callable[[dict[str, Any]], Any]] | None = None

        self.writes = GroupCommitWriter(
            service,
            self.counters,
            max_group_commands=limits.max_group_commands,
            max_pending_bytes=limits.max_pending_bytes,
            max_pending_commands=limits.max_pending_commands,
        )
        self.fanout = FanOut(
            service,
            self.counters,
            subscriber_queue=self.subscriber_queue,
            history_page=limits.history_page,
            foreign_poll_interval=limits.foreign_poll_interval,
            closed=self._closed,
        )
        self.records = HubRecords(
            self.writes,
            self.counters,
            quiet_s=limits.recall_log_quiet_s,
            max_wait_s=limits.recall_log_max_wait_s,
        )
        self.jobs = HubJobs(
            service,
            self.writes,
            spool_dir=self.spool_dir,
            spool_scan_interval=limits.spool_scan_interval,
            keyword_upkeep_interval=limits.keyword_upkeep_interval,
        )

    @property
    def store_id(self) -> str | None:
        """The home's store id (``hello``), known once the home is locked."""
        return self._socket.store_id

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
        raise_fd_limit(self.max_connections)
        self._socket.prepare()
        try:
            self.writes.open(self._loop)
            self.records.open(self._loop)
            self._reader_pool = ThreadPoolExecutor(self.limits.readers, thread_name_prefix="memviewer-reader")
            if self.limits.threaded_connections > 0:
                self.threads = ThreadedReads(self, self.limits.threaded_connections, self.limits.readers)
            self.fanout.start(self._loop, self._reader_pool)
            self.service.record_sink = self.records.submit  # recall log entries: the one writer
            # Leftover spools first: once the hub answers, what dead publishers left is stored.
            await self.jobs.ingest_spools()
            self._server = await asyncio.start_unix_server(
                self._handle, path=str(self.socket_path), limit=self.frame_limit
            )
            self._socket.bound()
            if self.listen is not None:
                await self._start_tcp(self.listen)
        except BaseException:
            if self._tcp is not None:
                self._tcp.close()
            if self._server is not None:
                self._server.close()
            self.fanout.stop()
            if self.service.record_sink == self.records.submit:
                self.service.record_sink = None
            self._socket.release()
            self.writes.abandon()
            if self._reader_pool is not None:
                self._reader_pool.shutdown(wait=False)
            if self.threads is not None:
                self.threads.shutdown()
            raise
        self._started_at = time.monotonic()
        self._tasks.append(self.writes.start_pump())
        self._tasks.append(asyncio.create_task(self.jobs.spool_scanner(), name="memviewer-hub-spool"))
        self._tasks.append(asyncio.create_task(self.fanout.watch_foreign(), name="memviewer-hub-foreign"))
        self._tasks.append(
            asyncio.create_task(self.jobs.keyword_upkeep(), name="memviewer-hub-keyword-upkeep")
        )
        if self._tcp is not None:
            self._tasks.append(asyncio.create_task(self._token_sweep(), name="memviewer-hub-tokens"))
        if self.start_indexer:
            threading.Thread(
                target=self.jobs.start_indexer, name="memviewer-indexer-start", daemon=True
            ).start()
        for source in self.sources:
            try:
                await source.start(self)
            except Exception:  # a source that cannot start (port taken…) is reported, the hub serves
                log.exception("source %s did not start", source.kind)
        log.info("hub %s listening on %s", __version__, self.socket_path)

    async def _start_tcp(self, spec: Listen) -> None:
        """Listen on ``spec`` (TLS unless ``--plaintext`` on loopback); raises ``HubError``."""
        from memviewer.wire.auth import TokenGate

        self.tokens = TokenGate(self.service.store)
        ctx = server_context(spec)
        try:
            self._tcp = await asyncio.start_server(
                functools.partial(self._handle, remote=True),
                spec.host,
                spec.port,
                ssl=ctx,
                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S if ctx is not None else None,
                limit=self.frame_limit,
            )
        except OSError as exc:
            raise HubError(f"cannot listen on {spec.host}:{spec.port}: {exc.strerror or exc}") from None
        self.listen_port = int(self._tcp.sockets[0].getsockname()[1])
        log.info("hub listening on %s://%s:%d", "tls" if ctx else "tcp", spec.host, self.listen_port)

    def _authorize(self, conn: Connection, method: str, params: dict[str, Any]) -> None:
        """A TCP connection: ``hello`` must carry a valid token; every later request is
        checked again against the store (revoked, or outside the token's scope: refused)."""
        if method == protocol.HELLO:
            name, _scope = self.tokens.check(params.get("token"))
            conn.token_name = name
            if self._loop is not None and self.writes.executor is not None:
                self._loop.create_task(self._touch_token(name))
            return
        if conn.token_name is None:
            raise protocol.app_error(
                "token_missing",
                "say hello with a token first: this hub requires a token on TCP connections",
                {"hint": "set MEMVIEWER_TOKEN or MEMVIEWER_TOKEN_FILE"},
            )
        self.tokens.recheck(conn.token_name, method)

    async def _token_sweep(self, interval: float = TOKEN_SWEEP_S) -> None:
        """Every ``interval``: close the TCP connections whose token was revoked, so a
        connection that sends nothing (a subscriber, ``tail``) is cut too, not only the
        next request (which ``_authorize`` refuses at once)."""
        while not self._closing:
            await asyncio.sleep(interval)
            names = {c.token_name for c in self._conns.values() if c.remote and c.token_name}
            if not names:
                continue
            try:
                gone = {n for n in names if self.tokens.revoked(n)}
            except Exception as exc:  # a busy store: look again next round
                log.debug("token sweep skipped: %s", exc)
                continue
            for conn in [c for c in self._conns.values() if c.remote and c.token_name in gone]:
                err = protocol.app_error(
                    "token_revoked", f"the token {conn.token_name!r} was revoked", {"retry": False}
                )
                self.counters["refused_tokens"] += 1
                with contextlib.suppress(Exception):
                    conn.write(protocol.error_response(None, err))
                conn.close()

    async def _touch_token(self, name: str) -> None:
        """Record when a token was last used (at hello, on the writer thread)."""
        from memviewer.store import api_tokens

        def touch() -> None:
            with self.service.store.write() as tx:
                api_tokens.touch(tx.conn, name, time.time())

        try:
            await self.writes.run(touch)
        except Exception as exc:  # a busy store: the use is not recorded, the hello stands
            log.debug("could not record the use of token %s: %s", name, exc)

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
        if self.service.record_sink == self.records.submit:
            self.service.record_sink = None  # in-process recalls (the viewer) write directly again
        report: dict[str, Any] = {"abandoned_episodes": [], "open_episodes": []}
        self.last_close_report = report
        loop = asyncio.get_running_loop()
        if self._server is not None:
            self._server.close()
        if self._tcp is not None:
            self._tcp.close()
        for source in self.sources:  # no new writes from them once the queue drains
            try:
                await source.stop()
            except Exception:
                log.exception("stopping source %s failed", source.kind)
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
        self.records.close()  # what waits for a quiet moment goes now, before the writer stops
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
        self._socket.release()
        if self._stopped is not None:
            self._stopped.set()
        log.info("hub stopped (%d open episodes left open)", len(report["open_episodes"]))
        return report

    def _open_episodes(self) -> list[str]:
        """Ids of the episodes still open (writer thread: after the last publish)."""
        from memviewer.store import repos

        with self.service.store.read() as conn:
            return repos.open_episode_ids(conn)

    # -- dispatch: which method runs where ---------------------------------------------
    def _read_fns(self) -> dict[str, Callable[[dict[str, Any]], Any]]:
        """The fast reads a connection thread runs itself (``threaded.FAST_READS``)."""
        if self._read_table is None:
            self._read_table = {
                protocol.SESSIONS: lambda p: self.service.sessions(**p),
                protocol.SESSION: lambda p: self.service.session(p["session_id"]),
                protocol.SEARCH: self._search,
            }
        return self._read_table

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

    def _reader(self, fn: Callable[[dict[str, Any]], Any]) -> Handler:
        """A read method on the reader pool; the recall log entries it makes wait for its answer.

        A search or recall hands its recall log entry to the one writer (``HubRecords.submit``).
        Queued at once, the entry's commit (SQLAlchemy statements, then an fsync) ran beside
        the end of the search, its encoding and its write, and they shared one interpreter
        lock: 2–3 ms of a 5 ms search. The entries are held until the answer is written
        (``HeldRecords``), then queued; none is dropped (a cancelled request queues them too).
        """

        async def run(conn: Connection, params: dict[str, Any]) -> Any:
            assert self._loop is not None
            held = HeldRecords(conn.caller())
            try:
                result = await self._loop.run_in_executor(
                    self._reader_pool, self.records.hold, held, fn, params
                )
            except BaseException:
                self.records.release(held)  # an error or a cancelled request still logs
                raise
            if not held.items:
                held.closed = True
                return result
            return AfterAnswer(result, functools.partial(self.records.release, held))

        return run

    def _forget(self, conn: Connection) -> None:
        self.fanout.forget(conn)

    async def merge_keyword_index(self, above: int = 1) -> int:
        """Merge the keyword index down to one segment when it holds more than ``above``, in
        bounded writer jobs (``HubJobs.merge_keyword_index``); the segments left. The folder
        watcher's big-file import calls it."""
        return await self.jobs.merge_keyword_index(above)

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
            "indexing": self.start_indexer and self.jobs.indexer_status in ("not started", "running"),
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

    def _log_overload(self) -> None:
        n = self.counters["overloaded_requests"]
        if n in (1, 10, 100) or n % 1000 == 0:
            log.warning(
                "write queue full (%d bytes, %d commands waiting): %d publish requests pushed back so far",
                self.writes.pending_bytes,
                self.writes.pending_commands,
                n,
            )

    async def submit(
        self, commands: list[dict[str, Any]], *, nbytes: int | None = None
    ) -> list[dict[str, Any]]:
        """Publish commands from an in-process source (OTLP receiver…) through the same
        queue as ``publish``: group-committed with the agents' batches, answered after commit.
        ``nbytes``: their encoded size when the caller knows it (the OTLP queue's file), else
        they are encoded to learn it. Raises ``MemviewerError`` (retryable) when the hub is
        closing or the store failed."""
        if not commands:
            return []
        if self._closing or not self.writes.ready:
            raise MemviewerError("internal", "the hub is shutting down", data={"retry": True})
        try:
            size = nbytes if nbytes is not None else len(protocol.encode(commands))
            fut = self.writes.enqueue(commands, size)
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
            "listen": (
                f"{'tcp' if self.listen.plaintext else 'tls'}://{self.listen.host}:{self.listen_port}"
                if self.listen is not None and self.listen_port is not None
                else None
            ),
            "pid": os.getpid(),
            "uptime_s": round(time.monotonic() - self._started_at, 3) if self._started_at else 0.0,
            "connections": len(self._conns),
            "connections_by_role": _count_by(c.role for c in self._conns.values()),
            "connections_threaded": self.threads.serving if self.threads is not None else 0,
            **self.fanout.info(),
            "write_queue": self.writes.queued(),
            "write_pending": self.writes.info(),
            "recall_log_waiting": self.records.waiting(),
            "keyword_segments": self.jobs.keyword_segments,
            "dispatched_seq": self.fanout.dispatched,
            "pending_reorder": len(self.fanout.pending),
            "frame_limit": self.frame_limit,
            "counters": dict(self.counters),
            "refused_by_code": dict(self.refused_by_code),
            "last_refused": self.last_refused,
            "last_refusal": self.last_refusal,
            "spool_dir": str(self.spool_dir),
            "spool_ingested": list(self.jobs.spool_reports),
            "indexer": self.jobs.indexer_status,
            "sources": [source.status() for source in self.sources],
        }


def _count_by(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out
