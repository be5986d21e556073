"""The hub's tunable limits and intervals, in one value (``Hub(limits=HubLimits(...))``).

One frozen value instead of sixteen keyword arguments: the defaults are what
``memviewer serve`` runs with, and a test or benchmark changes only the field it needs
(``HubLimits(max_connections=3)``).
"""

from __future__ import annotations

from dataclasses import dataclass

from memviewer.wire import group_commit, recall_buffer

KEYWORD_UPKEEP_INTERVAL_S = 30.0  # how often an idle hub looks at the keyword index's segments


@dataclass(frozen=True)
class HubLimits:
    """Bounds on what a hub holds and how often its background jobs run."""

    frame_limit: int | None = None  # bytes a frame may hold; None: the settings' (or the protocol's)
    subscriber_queue: int | None = None  # events a subscriber may lag; None: the settings' (or 10,000)
    history_page: int = 500  # events a subscription's history is read by
    max_group_commands: int = 2000  # commands one group commit holds at most
    max_pending_bytes: int = group_commit.MAX_PENDING_BYTES  # the write queue, by frame bytes...
    max_pending_commands: int = group_commit.MAX_PENDING_COMMANDS  # ...and by commands
    max_inflight: int = 16  # requests one connection may have in flight
    readers: int = 4  # reads run at once (the reader pool and the connection threads)
    threaded_connections: int = 32  # connections served by a thread of their own at once
    max_connections: int = 512  # open connections; past it a client is answered and let go
    stall_timeout: float = 60.0  # seconds half a frame may sit still (twice) before the close
    spool_scan_interval: float = 30.0  # seconds between looks for dead publishers' spools
    foreign_poll_interval: float = 0.5  # seconds between looks for another process's commits
    recall_log_quiet_s: float = recall_buffer.QUIET_S  # recall log entries wait for this quiet...
    recall_log_max_wait_s: float = recall_buffer.MAX_WAIT_S  # ...but never longer than this
    keyword_upkeep_interval: float = KEYWORD_UPKEEP_INTERVAL_S  # between keyword index merges
