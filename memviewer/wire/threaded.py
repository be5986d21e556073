"""Reader connections served by one thread: it reads a frame, runs the read and writes the answer.

Through the event loop a ``search`` crossed three hand-offs inside the hub (the loop reads the
frame, a reader thread runs it, the loop encodes and writes the answer): on a shared machine
each is a wake-up waiting for a time slice. At its first fast read (``FAST_READS``) with
nothing else already read from it, a connection is handed to a thread of its own
(``HubLimits(threaded_connections=)`` at most, 32 by default; beyond that the loop serves it as
before). From then on that thread reads the connection's frames straight from the socket:

* a fast read is decoded, checked, run (at most ``HubLimits(readers=)`` at once, like the reader
  pool) and encoded on the thread, and the answer is written to the socket by the same
  thread when nothing is queued before it; otherwise (a big answer, a client not reading)
  the rest goes out through the loop's transport in order and the thread waits until the
  client has read it, so it reads no further frame meanwhile (back-pressure, as the loop's
  ``drain``). Its recall log entries are queued for the writer after the answer is written.
* every other frame (``publish``, ``subscribe``, ``hello``, ``recall``, a malformed frame …)
  is handed to the loop's ``RpcServer._frame`` exactly as the loop would have read it, and the
  thread waits until the loop has taken it (admitted, or answered when it is answered in
  order): the writer, ordering, refusals and counters stay the loop's.
* frame limit, the stalled half frame, EOF with an unterminated last frame and the hub's
  stop behave as on the loop (docs/protocol.md).

Every write to a connection, the loop's and the thread's, goes through its ``wlock`` in order
(``Connection.send_direct`` / ``write``), so an event and an answer never interleave.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from memviewer.wire import protocol
from memviewer.wire.connection import Connection, HeldRecords
from memviewer.wire.hub_params import check_params
from memviewer.wire.hub_records import HubRecords
from memviewer.wire.protocol import RpcError

log = logging.getLogger("memviewer.hub")

# After an oversized frame the hub reads the rest of it away (bounded), so a client
# still writing gets to read the error instead of a broken pipe (the loop's path too).
DRAIN_FRAMES = 16  # read at most this many frame limits of the rest
DRAIN_TIMEOUT_S = 5.0


class ServingHub(Protocol):
    """What a serving thread needs from its hub (``wire.hub.Hub``; no import back up)."""

    _closing: bool
    _loop: asyncio.AbstractEventLoop | None
    frame_limit: int
    stall_timeout: float
    records: HubRecords  # holds a read's recall log entries until its answer is written

    def _frame(self, conn: Connection, line: bytes) -> Coroutine[Any, Any, None]: ...
    def _read_fns(self) -> dict[str, Callable[[dict[str, Any]], Any]]: ...
    def _count(self, counter: str) -> None: ...
    def _error_answer(self, req_id: Any, exc: BaseException) -> bytes: ...
    def _result_answer(self, req_id: Any, result: Any) -> bytes: ...


FAST_READS = frozenset({protocol.SEARCH, protocol.SESSIONS, protocol.SESSION})
CHUNK = 256 * 1024

# What a serving thread reports when its connection ends (the loop's ``_handle`` goes on).
EOF = "eof"  # the client shut down its side: wait for the rest, as on the loop
CLOSE = "close"  # gone, broken, or the hub stops: close now
STALLED = "stalled"  # half a frame held for two stall periods
TOO_LARGE = "too_large"  # a frame over the limit (answered, the rest read away)


def peek_method(line: bytes) -> str | None:
    """The method a frame names, if it is a well-formed request (None otherwise)."""
    try:
        msg = protocol.decode(line)
        _req_id, method, _params, _is_note = protocol.parse_request(msg)
    except RpcError:
        return None
    return method


class ThreadedReads:
    """The serving threads of a hub's reader connections (created by ``Hub.start``)."""

    def __init__(self, hub: ServingHub, limit: int, readers: int) -> None:
        self.hub = hub
        self.limit = limit
        self.pool = concurrent.futures.ThreadPoolExecutor(max(1, limit), thread_name_prefix="memviewer-conn")
        self.running = threading.Semaphore(max(1, readers))  # reads at once, like the reader pool
        self.serving = 0  # connections served by a thread now (loop thread only)
        self._busy = 0  # fast reads between their start and their recall log hand-off
        self._busy_lock = threading.Lock()

    # -- loop side ---------------------------------------------------------------------
    def wants(self, conn: Connection, line: bytes, reader: asyncio.StreamReader) -> bool:
        """Loop: hand this connection to a thread now? Only at a fast read with nothing
        else read from the connection yet (the thread then reads the socket itself)."""
        if self.serving >= self.limit or self.hub._closing or conn.closed or conn.remote:
            return False
        buffered = getattr(reader, "_buffer", None)
        if buffered is None or len(buffered) or reader.at_eof():
            return False
        if conn.writer.get_extra_info("socket") is None:
            return False
        return peek_method(line) in FAST_READS

    async def serve(self, conn: Connection, first: bytes) -> str:
        """Loop: stop reading ``conn`` on the loop and let a thread serve it until it ends."""
        transport = conn.writer.transport
        assert isinstance(transport, asyncio.ReadTransport)
        transport.pause_reading()  # no byte more enters the StreamReader: the thread reads
        try:
            fileno = conn.writer.get_extra_info("socket").fileno()
            conn.tsock = socket.socket(fileno=os.dup(fileno))
        except OSError as exc:
            log.warning("connection %d cannot be handed to a thread: %s", conn.id, exc)
            return CLOSE
        self.serving += 1
        try:
            return await asyncio.wrap_future(self.pool.submit(self._run, conn, first))
        finally:
            self.serving -= 1

    def busy(self) -> int:
        return self._busy

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    # -- the serving thread ----------------------------------------------------------
    def _run(self, conn: Connection, first: bytes) -> str:
        sock = conn.tsock
        assert sock is not None
        try:
            return self._serve(conn, sock, first)
        except Exception:
            log.exception("connection %d: its serving thread failed", conn.id)
            return CLOSE
        finally:
            with conn.wlock:
                conn.tsock = None
            sock.close()

    def _serve(self, conn: Connection, sock: socket.socket, first: bytes) -> str:
        hub = self.hub
        if not self._one(conn, first):
            return CLOSE
        buf = bytearray()
        partial = 0  # bytes of an unfinished frame at the last quiet period
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        stall_ms = max(1, int(hub.stall_timeout * 1000))
        while True:
            if hub._closing or conn.closed:
                return CLOSE
            newline = buf.find(b"\n")
            if newline > hub.frame_limit or (newline < 0 and len(buf) > hub.frame_limit):
                return self._too_large(conn, sock, buf, newline >= 0)
            if newline >= 0:
                line = bytes(buf[: newline + 1])
                del buf[: newline + 1]
                partial = 0
                if not self._one(conn, line):
                    return CLOSE
                continue
            if not poller.poll(stall_ms):
                if buf and len(buf) == partial:
                    log.warning(
                        "connection %d held half a frame for %.0f s; closing it",
                        conn.id,
                        2 * hub.stall_timeout,
                    )
                    return STALLED
                partial = len(buf)
                continue
            try:
                chunk = sock.recv(CHUNK)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                return CLOSE
            if not chunk:  # EOF (or the hub woke us to close: the loop checks which)
                if conn.closed or hub._closing:
                    return CLOSE
                if buf.strip() and not self._one(conn, bytes(buf)):
                    return CLOSE
                return EOF
            buf += chunk

    def _too_large(self, conn: Connection, sock: socket.socket, buf: bytearray, complete: bool) -> str:
        """Answer the frame-limit error, read the rest of the frame away (bounded), close."""
        hub = self.hub
        self._on_loop(hub._count, "protocol_errors")
        error = protocol.error_response(
            None,
            RpcError(
                protocol.INVALID_REQUEST,
                f"frame larger than the {hub.frame_limit}-byte limit; closing the connection",
                {"reason": "frame_too_large", "limit": hub.frame_limit},
            ),
        )
        buf.clear()
        if not self._send(conn, error) or complete:
            return TOO_LARGE
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        budget = DRAIN_FRAMES * hub.frame_limit
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        while budget > 0:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(max(1, int(left * 1000))):
                break
            try:
                chunk = sock.recv(64 * 1024)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                break
            if not chunk or b"\n" in chunk:
                break
            budget -= len(chunk)
        return TOO_LARGE

    def _one(self, conn: Connection, line: bytes) -> bool:
        """One frame: a fast read here, anything else on the loop. False: stop serving."""
        try:
            msg = protocol.decode(line)
            req_id, method, params, is_note = protocol.parse_request(msg)
        except RpcError:
            return self._via_loop(conn, line)  # the loop answers and counts the error
        fn = self.hub._read_fns().get(method) if method in FAST_READS else None
        if fn is None:
            return self._via_loop(conn, line)
        try:
            check_params(method, params)
        except RpcError:
            return self._via_loop(conn, line)
        del msg, line
        return self._read(conn, req_id, is_note, fn, params)

    def _read(
        self,
        conn: Connection,
        req_id: Any,
        is_note: bool,
        fn: Callable[[dict[str, Any]], Any],
        params: dict[str, Any],
    ) -> bool:
        hub = self.hub
        with self._busy_lock:
            self._busy += 1
        if hub._closing:  # not started: the loop would not have read it either
            self._done(None)
            return False
        conn.requests += 1
        held = HeldRecords(conn.caller())
        try:
            with self.running:
                try:
                    result = hub.records.hold(held, fn, params)
                except BaseException as exc:  # noqa: BLE001 - every failure gets its answer
                    out = hub._error_answer(req_id, exc)
                else:
                    out = hub._result_answer(req_id, result)
            return is_note or self._send(conn, out)
        finally:
            self._done(held if held.items else None)
            if not held.items:
                held.closed = True

    def _done(self, held: HeldRecords | None) -> None:
        """The read is answered: hand its recall log entries to the writer (on the loop)."""
        if held is None:
            with self._busy_lock:
                self._busy -= 1
            return
        if not self._on_loop(self._release, held):
            with self._busy_lock:
                self._busy -= 1

    def _release(self, held: HeldRecords) -> None:
        try:
            self.hub.records.release(held)
        finally:
            with self._busy_lock:
                self._busy -= 1

    def _send(self, conn: Connection, data: bytes) -> bool:
        """Write one answer: straight to the socket, or the rest through the loop (waiting
        until the client read it). False when the client is gone."""
        try:
            if conn.send_direct(data):
                return True
        except OSError:
            return False
        return bool(self._wait(asyncio.run_coroutine_threadsafe(conn.flush_tail(), self._loop())))

    def _via_loop(self, conn: Connection, line: bytes) -> bool:
        """Hand a frame to the loop's own frame handling and wait until it has taken it."""
        fut = asyncio.run_coroutine_threadsafe(self.hub._frame(conn, line), self._loop())
        self._wait(fut)
        return not conn.closed

    def _wait(self, fut: concurrent.futures.Future[Any]) -> Any:
        loop = self._loop()
        while True:
            try:
                return fut.result(timeout=1.0)
            except concurrent.futures.TimeoutError:
                if loop.is_closed() or not loop.is_running():
                    fut.cancel()
                    return None
            except (concurrent.futures.CancelledError, Exception):
                return None

    def _on_loop(self, fn: Callable[..., Any], *args: Any) -> bool:
        try:
            self._loop().call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: the hub is gone
            return False
        return True

    def _loop(self) -> asyncio.AbstractEventLoop:
        loop = self.hub._loop
        assert loop is not None
        return loop
