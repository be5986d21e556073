"""One client connection and its subscription, as the hub's loop thread holds them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from memviewer import recall_log
from memviewer.events import EventRecord
from memviewer.wire import protocol

log = logging.getLogger("memviewer.hub")


def peer_credentials(writer: asyncio.StreamWriter) -> dict[str, int]:
    """The peer's pid and uid of a Unix socket (``SO_PEERCRED``, Linux); {} elsewhere."""
    sock = writer.get_extra_info("socket")
    option = getattr(socket, "SO_PEERCRED", None)
    if sock is None or option is None or sock.family != socket.AF_UNIX:
        return {}
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", raw)
    except OSError:
        return {}
    return {"pid": pid, "uid": uid}


class Connection:
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
        self.sub: Subscription | None = None
        self.closed = False
        self.requests = 0
        # Writes from the loop and from this connection's serving thread (``threaded``):
        # one at a time, in order; ``tail`` holds what the thread could not send at once.
        self.wlock = threading.Lock()
        self.tail: list[bytes] = []
        self.tsock: socket.socket | None = None  # the serving thread's copy of the socket
        self.peer = peer_credentials(writer)  # {"pid", "uid"} from the kernel, {} where unknown
        self.remote = False  # accepted on the TCP listener: a token is required (``wire.auth``)
        self.token_name: str | None = None  # the token its hello presented, once accepted

    def caller(self) -> dict[str, Any]:
        """Who is on this connection as the hub knows it (for the recall log's ``caller``):
        the kernel's peer pid/uid, the hello's client name and the connection number."""
        if self.remote:
            return {"via": "tcp", "connection": self.id, "client": self.client, "token": self.token_name}
        return {"via": "socket", "connection": self.id, "client": self.client, **self.peer}

    def write(self, data: bytes) -> None:
        with self.wlock:
            if self.tail:
                self._flush_tail_locked()
            if not self.closed and not self.writer.is_closing():
                self.writer.write(data)

    def _flush_tail_locked(self) -> None:
        tail, self.tail = self.tail, []
        if not self.closed and not self.writer.is_closing():
            for chunk in tail:
                self.writer.write(chunk)

    def send_direct(self, data: bytes) -> bool:
        """The serving thread: write ``data`` to the socket now when nothing is queued
        before it. True: all of it went out; False: the rest waits in ``tail`` (in order)
        for the loop to write (``flush_tail``). Raises OSError when the client is gone."""
        sock = self.tsock
        with self.wlock:
            if self.closed or self.writer.is_closing() or sock is None:
                raise ConnectionResetError("the connection is closed")
            if not self.tail and self.buffered() == 0:
                try:
                    sent = sock.send(data)
                except (BlockingIOError, InterruptedError):
                    sent = 0
                if sent == len(data):
                    return True
                data = data[sent:]
            self.tail.append(data)
            return False

    async def flush_tail(self) -> bool:
        """Loop: write what the serving thread left in ``tail`` and wait for the client to
        read it (back-pressure). False when the connection is gone."""
        with self.wlock:
            self._flush_tail_locked()
        await self.drain()
        return not self.closed

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
        sock = self.tsock
        if sock is not None:  # wake the serving thread out of its poll; writes still flush
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RD)
        if self.sub is not None:
            self.sub.stop()
        for task in list(self.tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            self.writer.close()


class Subscription:
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
        conn: Connection,
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


class Deferred:
    """A result whose response must be written before ``then()`` runs (subscribe ack, then events)."""

    def __init__(self, result: Any, then: Callable[[], None]) -> None:
        self.result = result
        self.then = then


class AfterAnswer:
    """A result whose ``then()`` must run once its response is written, or the request
    ends otherwise (cancelled, the connection gone): it releases held recall log entries."""

    def __init__(self, result: Any, then: Callable[[], None]) -> None:
        self.result = result
        self.then = then


class HeldRecords:
    """The recall log entries one read request made, held until its answer is written."""

    def __init__(self, caller: dict[str, Any] | None = None) -> None:
        self.lock = threading.Lock()
        self.items: list[recall_log.Entry] = []  # built when queued (``HubRecords.queue``)
        self.closed = False  # released: later entries are queued directly
        self.caller = caller  # the request's connection (``Connection.caller``), stamped on each


def event_frame(ev: EventRecord) -> bytes:
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
