"""JSON-RPC over a connection: accepting it, reading its frames, dispatching, answering.

``RpcServer`` is the part of the hub that knows frames and answers, not what the methods
do: a subclass (``wire.hub.Hub``) names its methods (``_build_handlers``), admits a
``publish`` by its frame's size (``_admit_publish``) and forgets a closed connection's
subscription (``_forget``). Everything here runs on the loop thread but the two answer
encoders, which the connection threads (``threaded``) share.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from memviewer.errors import MemviewerError
from memviewer.wire import fastjson, protocol
from memviewer.wire.connection import AfterAnswer, Connection, Deferred
from memviewer.wire.group_commit import Results
from memviewer.wire.hub_params import check_params
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

Handler = Callable[[Connection, dict[str, Any]], Awaitable[Any]]


class RpcServer(abc.ABC):
    """Connections and their frames; the methods are the subclass's."""

    def __init__(
        self,
        counters: dict[str, int],
        *,
        frame_limit: int,
        max_inflight: int,
        max_connections: int,
        stall_timeout: float,
    ) -> None:
        self.counters = counters
        self.frame_limit = frame_limit
        self.max_inflight = max_inflight
        self.max_connections = max_connections
        self.stall_timeout = stall_timeout
        self.threads: ThreadedReads | None = None  # connection threads (made by the subclass's start)
        self._conns: dict[int, Connection] = {}
        self._next_conn = 0
        self._closing = False
        self._handler_table: dict[str, tuple[bool, Handler]] | None = None

    # -- what the subclass provides ---------------------------------------------------
    @abc.abstractmethod
    def _build_handlers(self) -> dict[str, tuple[bool, Handler]]:
        """``{method: (inline, handler)}``; an inline one is answered before the next frame is read."""

    @abc.abstractmethod
    def _admit_publish(
        self, commands: list[Any], frame_bytes: int, conn: Connection
    ) -> asyncio.Future[Results] | None:
        """Queue a publish's commands for the writer (None: nothing to write); raises ``RpcError``."""

    @abc.abstractmethod
    def _forget(self, conn: Connection) -> None:
        """A connection closed: drop what the subclass keeps for it (its subscription)."""

    @abc.abstractmethod
    def _authorize(self, conn: Connection, method: str, params: dict[str, Any]) -> None:
        """A TCP connection's request: raise ``RpcError`` unless its token allows it."""

    @staticmethod
    async def _publish_results(pending: asyncio.Future[Results] | None) -> dict[str, Any]:
        """The answer to an admitted publish, once its batch is committed."""
        return {"results": await pending if pending is not None else []}

    # -- connections --------------------------------------------------------------------
    async def _handle(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, remote: bool = False
    ) -> None:
        """One accepted connection, until it closes (``asyncio.start_unix_server``'s callback;
        ``remote``: the TCP listener's, whose requests need a token)."""
        if self._closing:
            writer.close()
            return
        if len(self._conns) >= self.max_connections:
            await self._refuse(writer)
            return
        self._next_conn += 1
        conn = Connection(self._next_conn, reader, writer, self.max_inflight)
        conn.remote = remote
        self._conns[conn.id] = conn
        self.counters["connections_total"] += 1
        try:
            if await self._read_frames(conn, reader) == EOF:
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
            self._forget(conn)

    async def _refuse(self, writer: asyncio.StreamWriter) -> None:
        """Past the cap a client hears why and is let go: bounded file descriptors, so one
        misbehaving process cannot starve the store (SQLite, LanceDB) of fds."""
        self.counters["refused_connections"] += 1
        refused = self.counters["refused_connections"]
        if refused in (1, 10, 100) or refused % 1000 == 0:
            log.warning(
                "connection refused: %d open (limit %d); %d refused so far",
                len(self._conns),
                self.max_connections,
                refused,
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

    async def _read_frames(self, conn: Connection, reader: asyncio.StreamReader) -> str:
        """Read and handle frames until the connection ends: ``EOF`` when the client shut its
        side (or the hub stops), ``CLOSE`` when it must be closed at once."""
        partial = 0  # bytes of an unfinished frame seen at the last quiet period
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
                    return CLOSE
                partial = held
                continue
            except asyncio.IncompleteReadError as exc:  # EOF: closed or half-closed
                if exc.partial.strip():
                    await self._frame(conn, exc.partial)
                return EOF
            except asyncio.LimitOverrunError:
                self.counters["protocol_errors"] += 1
                await conn.send(
                    protocol.error_response(
                        None,
                        RpcError(
                            protocol.INVALID_REQUEST,
                            f"frame larger than the {self.frame_limit}-byte limit; closing the connection",
                            {"reason": "frame_too_large", "limit": self.frame_limit},
                        ),
                    )
                )
                await self._drain_frame(reader)
                return CLOSE
            except (ConnectionError, OSError):
                return CLOSE
            partial = 0
            if self.threads is not None and self.threads.wants(conn, line, reader):
                # From here a thread reads, runs and answers this connection's frames.
                outcome = await self.threads.serve(conn, line)
                if outcome == STALLED:
                    self.counters["stalled_connections"] += 1
                if outcome in (STALLED, TOO_LARGE, CLOSE):
                    return CLOSE
                assert outcome == EOF
                return EOF
            await self._frame(conn, line)
            del line  # not held while the next frame arrives
        return EOF

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

    # -- one frame ----------------------------------------------------------------------
    async def _frame(self, conn: Connection, line: bytes) -> None:
        """Decode, check and dispatch one frame (connection threads hand theirs here too)."""
        conn.requests += 1
        try:
            msg = protocol.decode(line)
        except RpcError as err:
            self.counters["protocol_errors"] += 1
            await self._send_error(conn, None, err)
            return
        try:
            req_id, method, params, is_note = protocol.parse_request(msg)
        except RpcError as err:
            self.counters["protocol_errors"] += 1
            await self._send_error(conn, protocol.request_id_of(msg), err)
            return
        if conn.remote:
            try:
                self._authorize(conn, method, params)
            except RpcError as err:  # answered (a note too: the client must learn why), then closed
                self.counters["refused_tokens"] += 1
                await conn.send(protocol.error_response(req_id, err))
                conn.close()
                return
            except Exception as exc:  # the store could not be read: not now, never unchecked
                log.warning("cannot check the token of connection %d: %s", conn.id, exc)
                busy = protocol.app_error(
                    "internal", f"cannot check the token now: {exc}; try again", {"retry": True}
                )
                await conn.send(protocol.error_response(req_id, busy))
                conn.close()
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

    async def _send_error(self, conn: Connection, req_id: Any, err: RpcError) -> None:
        """Answer a malformed frame; a TCP connection that has not said hello with a valid
        token is closed after it (garbage from someone without a token gets one answer)."""
        await conn.send(protocol.error_response(req_id, err))
        if conn.remote and conn.token_name is None:
            conn.close()

    def _handlers(self) -> dict[str, tuple[bool, Handler]]:
        if self._handler_table is None:
            self._handler_table = self._build_handlers()
        return self._handler_table

    async def _answer(
        self, conn: Connection, req_id: Any, is_note: bool, coro: Awaitable[Any], release: bool = False
    ) -> None:
        """Await a handler and send its answer; then run what waits for it (``Deferred``,
        ``AfterAnswer``) and give the in-flight slot back."""
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


def raise_fd_limit(connections: int) -> None:
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
