"""The background indexer's thread: woken by the event bus, batching, polling, stopping.

The bus listener only sets a flag, so the writer thread never waits for embeddings. A
woken thread waits up to ``BATCH_WAIT_S`` for about ``BATCH_TURNS`` turns, then runs one
pass; an idle one polls SQLite every ``POLL_S`` for rows other processes committed and,
every ``IDLE_TICK_S``, retries a failed pass, runs a due integrity check and compacts.
A failed pass never ends the thread: its error is kept (``last_error``, and the owner
file's note for other processes) until a pass succeeds.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from memviewer.index.catch_up import sql_heads
from memviewer.index.timing import BATCH_TURNS, BATCH_WAIT_S, POLL_S
from memviewer.index.turn_rows import IndexerStopping

if TYPE_CHECKING:
    from memviewer.index.lance import LanceIndex
    from memviewer.session.bus import EventBus
    from memviewer.store.db import Store

log = logging.getLogger("memviewer.index")

THREAD_NAME = "memviewer-indexer"
IDLE_TICK_S = 5.0  # an idle indexer wakes this often: optimize, retry a failed pass


class Host(Protocol):
    """What the thread drives (the ``Indexer``)."""

    @property
    def index(self) -> LanceIndex: ...

    @property
    def store(self) -> Store: ...

    def background_pass(self) -> None:
        """One catch-up pass under the locks; raises what the pass raised."""

    def maybe_optimize(self) -> None: ...

    def verify_due(self) -> bool:
        """Whether the integrity check is due (a pass runs it)."""
        ...


class Runner:
    """The thread, its wake and stop flags, and the error of the last failed pass."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.wake = threading.Event()
        self.stop = threading.Event()
        self.last_error: str | None = None
        self._pending = 0
        self._thread: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, bus: EventBus | None) -> None:
        self.stop.clear()
        if bus is not None:
            self._unsubscribe = bus.on_any(self._on_event)
        self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
        self._thread.start()

    def close(self, timeout: float) -> None:
        """Unsubscribe, ask the thread to stop and wait for it (at most ``timeout``)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._thread is not None:
            self.stop.set()
            self.wake.set()
            self._thread.join(timeout)
            self._thread = None

    def _on_event(self, _event: Any) -> None:
        """Runs in the writer's thread after commit: only signal, never block."""
        self._pending += 1
        self.wake.set()

    def _run(self) -> None:
        self._safe_pass()
        last_tick = time.monotonic()
        while not self.stop.is_set():
            if not self.wake.wait(timeout=POLL_S):
                if self.last_error is None and self._behind_sqlite():
                    self._safe_pass()  # another process (a CLI import) committed rows
                if time.monotonic() - last_tick < IDLE_TICK_S:
                    continue
                last_tick = time.monotonic()
                self._idle_tick()
                continue
            deadline = time.monotonic() + BATCH_WAIT_S
            while self._pending < BATCH_TURNS and time.monotonic() < deadline and not self.stop.is_set():
                time.sleep(0.01)
            self.wake.clear()
            self._pending = 0
            if self.stop.is_set():
                break
            self._safe_pass()
            self.host.maybe_optimize()

    def _idle_tick(self) -> None:
        index = self.host.index
        if not index.owns():  # a probe (doctor, a CLI) raced the claim at start:
            index.claim_owner()  # take it now, so CLI imports leave indexing to us
        if self.last_error is not None:  # a failed pass (full disk…) is retried on
            self._safe_pass()  # its own, not left until the next turn arrives
        elif self.host.verify_due():  # the integrity check is due
            self._safe_pass()
        self.host.maybe_optimize()

    def _safe_pass(self) -> None:
        try:
            self.host.background_pass()
            if self.last_error is not None:
                self.host.index.set_owner_note({"pid": os.getpid()})
            self.last_error = None
        except IndexerStopping as exc:  # nothing half-written: the watermark marks the last batch
            log.info("background indexer: %s", exc)
        except Exception as exc:  # keep the thread alive; the next event retries
            self.last_error = f"{type(exc).__name__}: {exc}"
            self.host.index.set_owner_note({"pid": os.getpid(), "error": self.last_error})
            log.exception("background indexing failed")

    def _behind_sqlite(self) -> bool:
        """Rows or events committed (by any process) that the watermark does not cover."""
        try:
            state = self.host.index.load_state()
            num, seq = sql_heads(self.host.store)
        except Exception:  # noqa: BLE001 - a poll must never kill the thread
            return False
        return num > int(state.get("turn_num", 0)) or seq > int(state.get("event_seq", 0))


def exit_past_busy_indexer(say: Callable[[str], None]) -> None:
    """End the process at once when the background indexer is still inside a model call.

    For a process that is done (``serve`` after the hub closed, the viewer after it quit):
    everything durable is committed and closed by then; a thread still in native code would
    otherwise be torn down by the interpreter's exit, which aborts the process
    ("terminate called without an active exception", SIGABRT). The index is derived: the next
    start embeds what that call did not finish."""
    if not any(t.name == THREAD_NAME and t.is_alive() for t in threading.enumerate()):
        return
    say("the indexer was mid-call; the next start embeds what it did not finish")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
