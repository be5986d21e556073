"""One client connection and its subscription, as the hub's loop thread holds them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from memviewer.store.events import EventRecord
from memviewer.wire import protocol

log = logging.getLogger("memviewer.hub")


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

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[dict[str, Any]] = []
        self.closed = False  # released: later entries are queued directly


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
