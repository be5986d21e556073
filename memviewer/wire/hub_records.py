"""The recall log's route through the hub to the one writer.

A search or recall served by the hub hands its recall log entry to ``submit`` (the
service's ``record_sink``). On a thread serving a request the entry is held until the
answer is written (``hold`` / ``release``, a connection's ``HeldRecords``): queued at once,
its commit shared the interpreter with the end of the search, its encoding and its write
(2–3 ms of a 5 ms search). Released entries wait in a ``RecallLogBuffer`` for a quiet
moment and go to the writer as one request; the writer's answer for each is counted
(``recall_log_written`` / ``recall_log_failed``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from memviewer import recall_log
from memviewer.errors import MemviewerError
from memviewer.wire import recall_buffer
from memviewer.wire.connection import HeldRecords
from memviewer.wire.group_commit import GroupCommitWriter

log = logging.getLogger("memviewer.hub")


class HubRecords:
    """Recall log entries from the hub's reads to its writer (``open`` on the loop first)."""

    def __init__(
        self, writes: GroupCommitWriter, counters: dict[str, int], *, quiet_s: float, max_wait_s: float
    ) -> None:
        self.writes = writes
        self.counters = counters
        self.quiet_s = quiet_s
        self.max_wait_s = max_wait_s
        self.buffer: recall_buffer.RecallLogBuffer | None = None  # entries waiting (on the loop)
        self.closed = False  # set on close once answered reads have queued their entries
        self.writing = 0  # entries handed to the writer, not yet committed (or refused)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._held = threading.local()  # a reader thread's HeldRecords while it serves a request

    def open(self, loop: asyncio.AbstractEventLoop) -> None:
        """Entries from now on wait on ``loop`` (the hub's) for a quiet moment."""
        self._loop = loop
        self.buffer = recall_buffer.RecallLogBuffer(
            loop, self._write, quiet_s=self.quiet_s, max_wait_s=self.max_wait_s
        )

    def close(self) -> None:
        """Loop thread, before the writer stops: no entry from now on; what waits goes now."""
        self.closed = True
        if self.buffer is not None:
            self.buffer.flush()

    def waiting(self) -> int:
        """Entries not yet in the store (``stats``: ``recall_log_waiting``): those waiting for a
        quiet moment and those the writer is committing, so 0 means every entry queued so far
        is written or counted as failed."""
        return (len(self.buffer) if self.buffer is not None else 0) + self.writing

    def submit(self, command: recall_log.Entry) -> None:
        """Any thread: queue a recall log entry for the one writer (answered without waiting).

        On a reader thread serving a request the entry is held until the answer is written
        (``hold``); an entry handed over as a function (a search's) is built then, on the
        loop thread, so its cost is off the request's path. Anywhere else it is built now.
        """
        loop = self._loop
        if loop is None or self.closed:
            raise MemviewerError("internal", "the hub is stopping; the recall log entry is not written")
        held: HeldRecords | None = getattr(self._held, "records", None)
        if held is not None:
            with held.lock:
                if not held.closed:
                    held.items.append(command)
                    return
        caller = held.caller if held is not None else {"via": "hub", "pid": os.getpid()}
        loop.call_soon_threadsafe(self.queue, recall_log.built(command), caller)

    def hold(self, held: HeldRecords, fn: Callable[[dict[str, Any]], Any], params: dict[str, Any]) -> Any:
        """Reader thread: run ``fn`` with its recall log entries going into ``held``."""
        self._held.records = held
        try:
            return fn(params)
        finally:
            self._held.records = None

    def release(self, held: HeldRecords) -> None:
        """Loop thread: queue the held entries; any entry arriving later goes straight on."""
        with held.lock:
            held.closed = True
            items, held.items = held.items, []
        for command in items:
            self.queue(command, held.caller)

    def queue(self, entry: recall_log.Entry, caller: dict[str, Any] | None = None) -> None:
        """Loop thread: the entry waits in the buffer for a quiet moment (``recall_buffer``);
        ``caller`` (the request's connection) replaces any the entry names."""
        try:
            command = recall_log.built(entry)
        except Exception:  # a search's entry is built here; a bug in it must not stop the loop
            self.counters["recall_log_failed"] += 1
            log.exception("a recall log entry could not be built")
            return
        if caller is not None:
            command["caller"] = caller
        if self.closed or not self.writes.ready or self.buffer is None:
            self.counters["recall_log_failed"] += 1
            log.warning("recall log entry %s not written: the hub is stopping", command.get("recall_id"))
            return
        self.buffer.add(command)

    def _write(self, commands: list[dict[str, Any]]) -> None:
        """Loop thread: the waiting entries to the one writer, one request (one transaction)."""
        fut = self.writes.enqueue(commands, bounded=False)  # the hub's own small writes
        ids = [c.get("recall_id") for c in commands]
        self.writing += len(ids)
        fut.add_done_callback(functools.partial(self._done, ids))

    def _done(self, recall_ids: list[Any], fut: asyncio.Future[list[dict[str, Any]]]) -> None:
        self.writing -= len(recall_ids)
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
