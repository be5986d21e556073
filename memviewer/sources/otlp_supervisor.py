"""The hub's side of the OTLP receiver's process (``otlp_child``): start it, hear it, restart it.

The hub keeps the listening socket (a restarted child serves the same port at once) and the
queue's drain; the child's pipe tells it each queued file (``DurableQueue.adopt``, then the
drain wakes) and the child's counters. A child that ends while the hub serves is counted
(``process_restarts``), reported (the source's last error; not connected until it is back)
and started again, at most ``MAX_RESTARTS`` times in ``RESTART_WINDOW_S``; then the source
stays not connected (``memviewer doctor`` fails on it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing as mp
import time
from typing import Any, Protocol

from memviewer.sources import otlp_child
from memviewer.sources.otlp_queue import DurableQueue
from memviewer.sources.status import SourceStatus

log = logging.getLogger("memviewer.sources.otlp")

READY_S = 60.0  # a fresh interpreter importing the receiver on a loaded machine
STOP_S = 2.75  # the child's own stop is bounded by ``otlp_server.STOP_S``; then it is killed
MAX_RESTARTS = 5
RESTART_WINDOW_S = 60.0


class Receiver(Protocol):
    """What the supervisor needs of ``otlp_http.OtlpReceiver`` (no import back up to it);
    its class is what the child runs."""

    queue: DurableQueue | None
    state: SourceStatus

    def wake_drain(self) -> None: ...


class Supervisor:
    def __init__(self, receiver: Receiver, sock: Any, config: dict[str, Any]) -> None:
        self.rx = receiver
        self.sock = sock
        self.config = config
        self.proc: Any = None
        self.conn: Any = None
        self.last: dict[str, Any] = {}  # the child's latest status
        self.restarts: list[float] = []
        self.stopping = False
        self.served = False  # a child was ready once: one that ends later is started again
        self._ready: asyncio.Future[Any] | None = None
        self._restart: asyncio.Task[None] | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        ctx = mp.get_context("spawn")
        mine, theirs = ctx.Pipe(duplex=True)
        proc = ctx.Process(
            target=otlp_child.main,
            args=(type(self.rx), self.sock, theirs, self.config),
            name="memviewer-otlp",
            daemon=True,
        )
        with otlp_child.without_cwd_on_path():
            proc.start()
        theirs.close()
        self.proc, self.conn, self.last = proc, mine, {}
        self._ready = loop.create_future()
        loop.add_reader(mine.fileno(), self._readable, mine)
        loop.add_reader(proc.sentinel, self._exited, proc)
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), READY_S)
        except TimeoutError:
            raise RuntimeError(f"the OTLP receiver process did not start in {READY_S:g} s") from None

    def _readable(self, conn: Any) -> None:
        try:
            while conn.poll():
                self._message(conn.recv())
        except (EOFError, OSError):
            asyncio.get_running_loop().remove_reader(conn.fileno())

    def _message(self, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "queued":
            queue = self.rx.queue
            assert queue is not None
            queue.adopt(queue.folder / message[1], int(message[2]))
            self.rx.wake_drain()
        elif kind == "status":
            self.last = message[1]
        elif kind == "ready" and self._ready is not None and not self._ready.done():
            self.served = True
            self._ready.set_result(message[1])

    def pending(self, n: int) -> None:
        """What waits to be stored, for the child's 429 bound."""
        if self.conn is not None:
            with contextlib.suppress(OSError, ValueError):
                self.conn.send(("pending", n))

    def _exited(self, proc: Any) -> None:
        loop = asyncio.get_running_loop()
        with contextlib.suppress(Exception):
            loop.remove_reader(proc.sentinel)
        if proc is not self.proc:
            return
        # the sentinel closes as the child exits, a moment before it can be reaped: wait for
        # that moment (microseconds; bounded) so the exit code is known, not None
        proc.join(1.0)
        self._readable(self.conn)  # what it said before it ended (a batch queued, then killed)
        with contextlib.suppress(Exception):
            loop.remove_reader(self.conn.fileno())
        self.conn.close()
        self.conn = None
        if self._ready is not None and not self._ready.done():
            self._ready.set_exception(RuntimeError(f"the OTLP receiver process ended (exit {proc.exitcode})"))
        if self.stopping or not self.served:  # a first start that failed: ``start`` raises
            return
        st = self.rx.state
        for name, n in (self.last.get("counters") or {}).items():  # the dead child's counts stay
            st.count(name, n)
        self.last = {}
        st.count("process_restarts")
        st.connected = False
        now = time.monotonic()
        self.restarts = [t for t in self.restarts if now - t < RESTART_WINDOW_S] + [now]
        if len(self.restarts) > MAX_RESTARTS:
            times = len(self.restarts)
            st.error(f"the OTLP receiver process ended (exit {proc.exitcode}) {times} times: stopped")
            log.error("OTLP receiver process ended again (exit %s): not restarted", proc.exitcode)
            return
        st.error(f"the OTLP receiver process ended (exit {proc.exitcode}); started again")
        log.error("OTLP receiver process %s ended (exit %s): starting it again", proc.pid, proc.exitcode)
        self._restart = asyncio.create_task(self._again(), name="memviewer-otlp-restart")

    async def _again(self) -> None:
        try:
            await self.start()
        except Exception as exc:  # noqa: BLE001 - reported in the status, the hub serves on
            self.rx.state.error(f"the OTLP receiver process did not start again: {exc}")
            log.error("OTLP receiver process did not start again: %s", exc)
            return
        self.rx.state.connected = True
        self.pending(self.rx.queue.pending_bytes if self.rx.queue is not None else 0)

    async def stop(self) -> None:
        """The child answers what it is answering and ends; killed past ``STOP_S``."""
        self.stopping = True
        if self._restart is not None:
            self._restart.cancel()
            with contextlib.suppress(BaseException):
                await self._restart
        proc = self.proc
        if proc is None:
            return
        if self.conn is not None:
            with contextlib.suppress(OSError, ValueError):
                self.conn.send(("stop",))
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, proc.join, STOP_S)
        if proc.is_alive():
            log.warning("OTLP receiver process %s did not stop in %.1f s: killed", proc.pid, STOP_S)
            proc.kill()
            await loop.run_in_executor(None, proc.join, 1.0)
        if self.conn is not None:  # its last status (the answers it gave while stopping)
            self._readable(self.conn)
            with contextlib.suppress(Exception):
                loop.remove_reader(self.conn.fileno())
            self.conn.close()
            self.conn = None
        with contextlib.suppress(Exception):
            loop.remove_reader(proc.sentinel)

    def status(self) -> dict[str, Any]:
        alive = self.proc is not None and self.proc.is_alive()
        return {
            "pid": self.proc.pid if self.proc is not None else None,
            "alive": alive,
            "restarts": self.rx.state.counters.get("process_restarts", 0),
        }
