"""The publisher's options and the state its threads share.

One lock guards all of it, with two conditions on it: callers, ``flush``, ``close`` and the
sender wait on ``cond``, the spooler on ``spool_cond``. Each thread's own bookkeeping lives
with its code (``sender.Sender``, ``spooler.Spooler``); what more than one of them reads or
changes is here, so every module sees the same numbers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memviewer.wire.spool_segments import Segment
from memviewer.wire.syncclient import RpcConnection
from memviewer.wire.tls import HubAddress

log = logging.getLogger("memviewer.client")  # one logger for the whole publisher, as documented

FRAME_OVERHEAD = 128  # bytes around the command list in a publish frame
MAX_REFUSALS_KEPT = 10_000  # refusals beyond this are counted (``refused``), not kept


@dataclass
class Options:
    """What the ``Publisher`` was built with (normalised); read by every thread."""

    home: Path
    socket_path: Path
    spool_dir: Path
    follow_owner: bool  # no socket chosen: try the one <home>/hub.owner names first
    on_refusal: Callable[[dict[str, Any]], None] | None
    max_batch: int
    max_queue: int
    max_queue_bytes: int
    sync_interval: float | None
    segment_bytes: int
    max_block: float
    client_name: str
    connect_timeout: float
    request_timeout: float
    max_backoff: float
    remote: HubAddress | None = None  # a hub on TCP (``tls://``): the only one tried

    @property
    def spill_at(self) -> int:
        """Queue length at which the spooler writes at once instead of waiting for the sync timer."""
        return max(1, self.max_queue // 2)

    @property
    def spill_bytes(self) -> int:
        return max(1, self.max_queue_bytes // 2)


class Shared:
    """The queue, the spool's segments, the acknowledgement mark, the handshakes of ``close``
    and the counters ``stats()`` reports."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        lock = threading.Lock()
        self.cond = threading.Condition(lock)  # callers, flush and the sender wait on this one
        self.spool_cond = threading.Condition(lock)  # the spooler waits on this one
        # Commands not yet in the spool, oldest first: (lsn, command line, time.monotonic() queued).
        self.mem: deque[tuple[int, bytes, float]] = deque()
        self.mem_bytes = 0
        self.segments: list[Segment] = []  # the spool, oldest first; the last one is appended to
        self.next_lsn = 1
        self.acked = 0  # every lsn <= this one is resolved (acknowledged, or failed for good)
        self.dropped_lsns: set[int] = set()
        self.conn: RpcConnection | None = None  # the sender's connection (None: no hub now)
        self.hub_down = False  # the last connect or send failed: spool everything at once
        self.waiting_callers = 0  # callers waiting for room in the in-memory queue
        self.spool_failed = False
        self.stopping = False  # close(): the sender stops
        self.closed = False  # close(): no new command
        self.handover = False  # close(): the spooler writes what is left, then stops
        self.spool_done = False
        self.kept_files: list[Path] = []

        self.errors = 0
        self.dropped = 0
        self.error_log: deque[dict[str, Any]] = deque(maxlen=200)
        self.refusals: list[dict[str, Any]] = []  # refused commands not yet taken (take_refusals)
        self.refused = 0  # every command refused so far (taken or not)
        self.first_untaken: int | None = None  # lowest cid among ``refusals``
        self.hub_refused: str | None = None  # why the last hub found was not used (another home…)
        self.acked_commands = 0
        self.sent_batches = 0
        self.spooled_commands = 0
        self.spool_writes = 0
        self.spool_syncs = 0
        self.adopted_commands = 0
        self.adopted_files = 0
        self.caller_waits = 0
        self.caller_wait_max = 0.0
        self.durable_lag_max = 0.0  # worst time from a call returning to its command being on disk
        self.not_durable_at_close = 0  # commands close() left to the spooler unwritten (its wait expired)
        self.connects = 0

    def pause(self, seconds: float) -> None:
        """Sleep ``seconds`` (new commands do not cut a back-off short; ``close`` does)."""
        deadline = time.monotonic() + seconds
        with self.cond:
            while not self.stopping:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.cond.wait(left)

    def set_hub_down(self) -> None:
        with self.cond:
            self.hub_down = True
            self.spool_cond.notify()

    def add_refusal_locked(self, item: dict[str, Any]) -> None:
        self.refused += 1
        if len(self.refusals) < MAX_REFUSALS_KEPT:
            self.refusals.append(item)
        cid = item.get("cid")
        if isinstance(cid, int) and (self.first_untaken is None or cid < self.first_untaken):
            self.first_untaken = cid

    def report_refusals(self, items: list[dict[str, Any]]) -> None:
        """The callback, outside the lock (it may call back into the publisher)."""
        on_refusal = self.opts.on_refusal
        if on_refusal is None:
            return
        for item in items:
            try:
                on_refusal(item)
            except Exception:
                log.exception("the on_refusal callback failed")
