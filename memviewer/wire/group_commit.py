"""The one writer: every write of the hub runs on a single thread, and publishes that
queue up while a batch is being applied are committed together.

``enqueue`` queues a request's commands and returns a future; the pump takes whatever
queued meanwhile (up to ``max_group_commands``) into one ``apply_batch`` (one
transaction, a savepoint per command) and resolves each request's future with its own
slice of the results only after that call returned, i.e. once the batch is durable. A
failure of the store itself (``MemviewerError``: full disk, I/O error) fails every
request of the group with a retryable error and stores nothing.

The queue is bounded: what waits for the writer (queued, plus the batch being
applied) may hold at most ``max_pending_bytes`` of request frames and
``max_pending_commands`` commands. A request that does not fit is refused at once with
a retryable error (``overloaded``, see ``docs/protocol.md``), never queued and never
dropped in silence: the sender keeps it and sends it again. A request arriving at an
empty queue is always taken, however large, so a frame under the frame limit can
always get through.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from memviewer.errors import MemviewerError
from memviewer.wire import protocol
from memviewer.wire.hub_service import HubService

log = logging.getLogger("memviewer.hub")

Results = list[dict[str, Any]]
PUMP_STOP_TIMEOUT_S = 30.0  # close() waits this long for the queued publishes to be written
# The bound of the pending writes. 32 MiB of frames is 32 full-size (1 MiB) publishes, or
# about 200 default Publisher batches of 500 ordinary turns: seconds of writer work, far
# more than group commit needs to keep the writer busy, and it keeps the hub's memory flat
# however many clients flood it.
MAX_PENDING_BYTES = 32 * 1024 * 1024
MAX_PENDING_COMMANDS = 50_000
# One transaction takes at most this many bytes of requests (and max_group_commands
# commands): a group of large turns is written in several commits, so the copies SQLite
# and the event log make of one batch stay small. Ordinary batches never reach it.
MAX_GROUP_BYTES = 8 * 1024 * 1024
RETRY_AFTER_MS_MIN = 50
RETRY_AFTER_MS_MAX = 2_000


class _Pending:
    """One request waiting for the writer: its commands, their size on the wire, its answer."""

    __slots__ = ("commands", "nbytes", "future")

    def __init__(self, commands: list[Any], nbytes: int, future: asyncio.Future[Results]) -> None:
        self.commands = commands
        self.nbytes = nbytes
        self.future = future


class GroupCommitWriter:
    """The writer thread, the publish queue and the pump that group-commits it."""

    def __init__(
        self,
        service: HubService,
        counters: dict[str, int],
        *,
        max_group_commands: int,
        max_pending_bytes: int = MAX_PENDING_BYTES,
        max_pending_commands: int = MAX_PENDING_COMMANDS,
        max_group_bytes: int = MAX_GROUP_BYTES,
    ) -> None:
        if max_pending_bytes < 1 or max_pending_commands < 1:
            raise ValueError("max_pending_bytes and max_pending_commands must be >= 1")
        self.service = service
        self.counters = counters
        self.max_group_commands = max_group_commands
        self.max_pending_bytes = max_pending_bytes
        self.max_pending_commands = max_pending_commands
        self.max_group_bytes = max_group_bytes
        # What waits for the writer: queued requests plus the batch being applied (loop thread).
        self.pending_bytes = 0
        self.pending_commands = 0
        self.peak_pending_bytes = 0
        self.last_batch_s = 0.0
        self.refused_by_code: dict[str, int] = {}
        self.last_refused: dict[str, Any] | None = None  # the last command the store refused
        self.last_refusal: dict[str, Any] | None = None  # the store's last failure (full disk…)
        self.executor: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[_Pending | None] | None = None
        self._pump: asyncio.Task[None] | None = None

    # -- lifecycle -----------------------------------------------------------------------
    def open(self, loop: asyncio.AbstractEventLoop) -> None:
        """The writer thread and the queue (writes may run; publishes wait for ``start_pump``)."""
        self._loop = loop
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="memviewer-writer")
        self._queue = asyncio.Queue()

    def start_pump(self) -> asyncio.Task[None]:
        self._pump = asyncio.create_task(self._run_pump(), name="memviewer-hub-writer")
        return self._pump

    async def drain_and_stop(self) -> None:
        """Write everything queued so far, then stop the pump (bounded wait)."""
        if self._queue is None or self._pump is None:
            return
        self._queue.put_nowait(None)
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(self._pump), timeout=PUMP_STOP_TIMEOUT_S)

    async def shutdown(self) -> None:
        """Wait for the writer thread's last job (a spool ingestion…); no write after this."""
        if self.executor is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.executor.shutdown, True)

    def abandon(self) -> None:
        """A start that failed: let the thread go without waiting."""
        if self.executor is not None:
            self.executor.shutdown(wait=False)

    # -- writes ----------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self._queue is not None and self._loop is not None

    def queued(self) -> int:
        """Requests waiting for the writer."""
        return self._queue.qsize() if self._queue is not None else 0

    def info(self) -> dict[str, Any]:
        return {
            "pending_bytes": self.pending_bytes,
            "pending_commands": self.pending_commands,
            "peak_pending_bytes": self.peak_pending_bytes,
            "max_pending_bytes": self.max_pending_bytes,
            "max_pending_commands": self.max_pending_commands,
        }

    def overloaded(self, n_commands: int, nbytes: int) -> protocol.RpcError | None:
        """The push-back error when a request of this size does not fit now, else None."""
        if self.pending_commands == 0:
            return None  # an idle writer takes anything the frame limit let through
        if (
            self.pending_bytes + nbytes <= self.max_pending_bytes
            and self.pending_commands + n_commands <= self.max_pending_commands
        ):
            return None
        retry_ms = int(min(RETRY_AFTER_MS_MAX, max(RETRY_AFTER_MS_MIN, self.last_batch_s * 1000)))
        return protocol.app_error(
            "internal",
            f"the hub's write queue is full ({self.pending_commands} commands, {self.pending_bytes} bytes "
            f"waiting); nothing of this request was stored: send it again in {retry_ms} ms",
            {
                "reason": "overloaded",
                "retry": True,
                "retry_after_ms": retry_ms,
                "pending_bytes": self.pending_bytes,
                "pending_commands": self.pending_commands,
                "limit_bytes": self.max_pending_bytes,
                "limit_commands": self.max_pending_commands,
            },
        )

    def enqueue(
        self, commands: list[Any], nbytes: int = 0, *, bounded: bool = True
    ) -> asyncio.Future[Results]:
        """Queue one request's commands (``nbytes`` on the wire); the future gets their
        results once committed. Raises the ``overloaded`` ``RpcError`` when the request
        does not fit (``bounded=False``: the hub's own small writes, always taken)."""
        assert self._queue is not None and self._loop is not None, "open() first"
        if bounded:
            refused = self.overloaded(len(commands), nbytes)
            if refused is not None:
                self.counters["overloaded_requests"] += 1
                self.counters["overloaded_commands"] += len(commands)
                raise refused
        fut: asyncio.Future[Results] = self._loop.create_future()
        self.pending_bytes += nbytes
        self.pending_commands += len(commands)
        self.peak_pending_bytes = max(self.peak_pending_bytes, self.pending_bytes)
        self._queue.put_nowait(_Pending(commands, nbytes, fut))
        return fut

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the writer thread, in turn with the publish batches."""
        assert self._loop is not None and self.executor is not None, "open() first"
        return await self._loop.run_in_executor(self.executor, fn, *args)

    async def _run_pump(self) -> None:
        """Apply queued publishes in order; everything queued meanwhile is one group commit."""
        assert self._queue is not None and self._loop is not None
        q = self._queue
        while True:
            first = await q.get()
            if first is None:
                return
            group = [first]
            n = len(first.commands)
            size = first.nbytes
            stop = False
            while n < self.max_group_commands and size < self.max_group_bytes and not q.empty():
                item = q.get_nowait()
                if item is None:
                    stop = True
                    break
                group.append(item)
                n += len(item.commands)
                size += item.nbytes
            commands = [c for p in group for c in p.commands]
            started = time.monotonic()
            try:
                results = await self._loop.run_in_executor(self.executor, self.service.apply_batch, commands)
            except MemviewerError as exc:  # the store failed (full disk…): retryable, nothing stored
                log.error("a publish batch was not applied: %s", exc.message)
                self.counters["refused_batches"] += 1
                self.last_refusal = {"at": time.time(), "message": exc.message, **exc.data}
                err = protocol.app_error(exc.code, f"batch not applied: {exc.message}", exc.data)
                for p in group:
                    if not p.future.done():
                        p.future.set_exception(err)
            except Exception as exc:
                log.exception("a publish batch failed as a whole")
                err = protocol.app_error("internal", f"batch not applied: {exc}", {"retry": True})
                for p in group:
                    if not p.future.done():
                        p.future.set_exception(err)
            else:
                self.counters["group_commits"] += 1
                self.counters["published_commands"] += len(commands)
                self.count_refusals(commands, results)
                i = 0
                for p in group:
                    if not p.future.done():
                        p.future.set_result(results[i : i + len(p.commands)])
                    i += len(p.commands)
            finally:
                self.last_batch_s = time.monotonic() - started
                self.pending_bytes -= size
                self.pending_commands -= n
                # the batch's memory goes now, not when the next request arrives
                del group, commands
                first = item = None
            if stop:
                return

    def count_refusals(self, commands: list[Any], results: Results, where: str = "publish") -> None:
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
