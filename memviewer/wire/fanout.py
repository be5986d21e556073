"""Fan-out: committed events to every subscriber, in seq order, with no gap.

``Store.on_commit`` calls ``on_commit`` on the writer thread after each commit; it
hands the events to the loop (``call_soon_threadsafe``). ``dispatch`` delivers them in
seq order to each subscriber's bounded queue; a hole in the seqs (another process
wrote) waits briefly, then is read from the store (``fill_gap``). ``watch_foreign``
polls the store's ``last_seq`` so commits made by another process (a CLI import into
this home) reach subscribers even while this hub writes nothing. ``feed`` is one
subscriber's task: history pages from the store, then live events (see
``connection.Subscription`` for the seam).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from memviewer.events import EventRecord
from memviewer.wire import protocol
from memviewer.wire.connection import Connection, Subscription, event_frame
from memviewer.wire.hub_service import HubService

log = logging.getLogger("memviewer.hub")

GAP_WAIT_S = 0.5  # how long a hole in the seqs may wait for its events before the store is read
LIVE_DRAIN_BYTES = 256 * 1024  # a live feed waits for the client once this much is buffered


class FanOut:
    """Subscribers, live dispatch, gap-fill and the foreign-commit watch (loop thread)."""

    def __init__(
        self,
        service: HubService,
        counters: dict[str, int],
        *,
        subscriber_queue: int,
        history_page: int,
        foreign_poll_interval: float,
        closed: threading.Event,
    ) -> None:
        self.service = service
        self.counters = counters
        self.subscriber_queue = subscriber_queue
        self.history_page = history_page
        self.foreign_poll_interval = foreign_poll_interval
        # Set when the hub stops (or, in a test, to hide commits as if another process made them).
        self.closed = closed
        self.subs: dict[int, Subscription] = {}
        self.dispatched = 0
        self.pending: dict[int, EventRecord] = {}
        self._next_sub = 0
        self._gap_timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._readers: Executor | None = None
        self._off_commit: Callable[[], None] | None = None

    # -- lifecycle -----------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop, readers: Executor) -> None:
        """Listen to the store's commits from its current ``last_seq`` on."""
        self._loop = loop
        self._readers = readers
        self._off_commit = self.service.store.on_commit(self.on_commit)
        self.dispatched = self.service.store.last_seq

    def stop(self) -> None:
        """No more dispatch: stop listening to the store and drop the gap timer."""
        self.closed.set()
        if self._off_commit is not None:
            self._off_commit()
            self._off_commit = None
        if self._gap_timer is not None:
            self._gap_timer.cancel()
            self._gap_timer = None

    def queued(self) -> int:
        """Events waiting in subscriber queues."""
        return sum(len(s.queue) for s in self.subs.values())

    def info(self) -> dict[str, Any]:
        return {
            "subscribers": [s.info() for s in self.subs.values()],
            "subscriber_queue_limit": self.subscriber_queue,
            "queued_events": self.queued(),
        }

    # -- subscriptions ---------------------------------------------------------------------
    def subscribe(
        self, conn: Connection, from_seq: int, kinds: frozenset[str] | None, session_id: str | None
    ) -> Subscription:
        """Register ``conn``'s subscription for live events (its feed starts with ``begin``)."""
        if conn.sub is not None:  # one subscription per connection: the new one replaces it
            conn.sub.stop()
            self.subs.pop(conn.sub.id, None)
        self._next_sub += 1
        sub = Subscription(self._next_sub, conn, from_seq, kinds, session_id, self.subscriber_queue)
        conn.sub = sub
        self.subs[sub.id] = sub  # registered for live events before history is read
        return sub

    def begin(self, sub: Subscription) -> None:
        """Start the feed (after the subscribe answer went out)."""
        sub.task = asyncio.ensure_future(self.feed(sub))

    def unsubscribe(self, conn: Connection) -> Subscription | None:
        sub = conn.sub
        if sub is None:
            return None
        sub.stop()
        self.subs.pop(sub.id, None)
        conn.sub = None
        return sub

    def forget(self, conn: Connection) -> None:
        """A closed connection's subscription leaves the fan-out."""
        if conn.sub is not None:
            self.subs.pop(conn.sub.id, None)

    # -- dispatch ----------------------------------------------------------------------------
    def on_commit(self, events: list[EventRecord]) -> None:
        """Writer thread, after commit: hand the events to the loop."""
        loop = self._loop
        if self.closed.is_set() or loop is None:
            return
        with contextlib.suppress(RuntimeError):  # loop already closed
            loop.call_soon_threadsafe(self.dispatch, events)

    def dispatch(self, events: list[EventRecord]) -> None:
        """Loop thread: deliver in seq order; a gap waits briefly, then is filled from the store."""
        for ev in events:
            if ev.seq > self.dispatched:
                self.pending[ev.seq] = ev
        subs = list(self.subs.values())
        while self.dispatched + 1 in self.pending:
            ev = self.pending.pop(self.dispatched + 1)
            self.dispatched = ev.seq
            self.counters["events_dispatched"] += 1
            if subs:
                frame = event_frame(ev)
                for sub in subs:
                    was = sub.state
                    sub.offer(ev, frame)
                    if sub.state == "lagged" and was != "lagged":
                        self.counters["lagged"] += 1
                        log.info("subscriber %d lagged at seq %d", sub.id, sub.cursor)
        if self.pending and self._gap_timer is None and self._loop is not None:
            self._gap_timer = self._loop.call_later(GAP_WAIT_S, self._fill_gap)

    def _fill_gap(self) -> None:
        self._gap_timer = None
        if not self.pending or self.closed.is_set():
            return
        lo, hi = self.dispatched, min(self.pending)
        log.info("event gap %d..%d not seen in-process (another writer?); reading it from the store", lo, hi)

        async def _fill() -> None:
            assert self._loop is not None
            try:
                missing = await self._loop.run_in_executor(
                    self._readers, self.service.events, lo, hi - lo - 1
                )
            except Exception:
                log.exception("could not read the event gap")
                missing = []
            self.dispatch(missing)
            if self.pending and self.dispatched + 1 not in self.pending and self.dispatched <= lo:
                first = min(self.pending)
                log.error("events %d..%d are not in the store; skipping them", self.dispatched + 1, first - 1)
                self.dispatched = first - 1
                self.dispatch([])

        asyncio.ensure_future(_fill())

    async def watch_foreign(self) -> None:
        """Events committed by another process (a CLI import into this home) reach the
        subscribers, and ``last_seq`` stays true, even while this hub writes nothing itself."""
        assert self._loop is not None
        store = self.service.store
        while True:
            await asyncio.sleep(self.foreign_poll_interval)
            try:
                last = await self._loop.run_in_executor(self._readers, store.refresh_last_seq)
                while last > self.dispatched and not self.closed.is_set():
                    seen = max(self.dispatched, max(self.pending, default=0))
                    if last <= seen:
                        break  # in flight from this hub's own writer: on_commit delivers it
                    page = await self._loop.run_in_executor(
                        self._readers, self.service.events, self.dispatched, self.history_page
                    )
                    if not page:
                        break
                    self.dispatch(page)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("could not read events written by another process")

    # -- one subscriber's feed -----------------------------------------------------------------
    async def feed(self, sub: Subscription) -> None:
        assert self._loop is not None
        conn = sub.conn
        kinds = sorted(sub.kinds) if sub.kinds else None
        try:
            while sub.state == "history":
                drops = sub.drops
                page = await self._loop.run_in_executor(
                    self._readers,
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
                        conn.write(event_frame(ev))
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
                    if conn.buffered() > LIVE_DRAIN_BYTES:
                        await conn.drain()
                await conn.drain()
                if conn.closed:
                    return
                sub.wakeup.clear()
                if not sub.queue and sub.state == "live":
                    await sub.wakeup.wait()
            if sub.state == "lagged":
                self.subs.pop(sub.id, None)
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
            self.subs.pop(sub.id, None)
