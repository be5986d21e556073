"""Condition waits for tests: poll a predicate with a deadline instead of sleeping and hoping."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_for(cond: Callable[[], T], timeout: float = 20.0, what: str = "condition", every: float = 0.02) -> T:
    """Return ``cond()``'s first truthy value; fail naming ``what`` if the deadline passes first."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def hub_subscribers(sock: Path) -> int:
    """How many live subscriptions the hub on ``sock`` holds (its public ``stats``)."""
    from memviewer.wire.remote import RemoteService

    with RemoteService(sock) as remote:
        return len(remote.stats()["hub"]["subscribers"])


def wait_subscribed(sock: Path, n: int = 1, timeout: float = 20.0) -> None:
    """Wait until the hub has registered ``n`` subscriptions: from then on they are live."""
    wait_for(lambda: hub_subscribers(sock) >= n, timeout, f"{n} subscriber(s) on {sock}")
