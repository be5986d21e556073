"""Wait for another process's background indexer (a hub) instead of writing the index.

A blocking ``sync`` in a process that does not own the index leaves the writing to the
owner and returns once the owner's watermark in ``state.json`` covers every committed
row (so ``import`` still returns only once its turns are recallable). It gives up with an
error when the owner keeps failing or stalls, and takes over when the owner stops.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memviewer.errors import INTERNAL, MemviewerError
from memviewer.index.catch_up import sql_heads

if TYPE_CHECKING:
    from memviewer.index.lance import LanceIndex
    from memviewer.store.db import Store

Progress = Callable[[int, int, str], None]

OWNER_WAIT_POLL_S = 0.1
#: A process waiting for the hub's indexer gives up when the hub neither writes nor
#: catches up for this long, or keeps failing for ``OWNER_ERROR_GRACE_S``.
OWNER_STALL_S = 30.0
OWNER_ERROR_GRACE_S = 15.0


def wait_for_owner(
    index: LanceIndex,
    store: Store,
    owner: dict[str, Any],
    progress: Progress | None,
    *,
    notice: Callable[[str], None],
    take_over: Callable[[], dict[str, Any]],
) -> dict[str, Any]:
    """Wait until the owner's watermark reaches the current heads; ``take_over`` if it stops.

    Once the watermark is there, taking the write lock once means the pass that got
    there (summaries included) is done.
    """
    started = time.monotonic()
    target_num, target_seq = sql_heads(store)
    first = int(index.load_state().get("turn_num", 0))
    pid = owner.get("pid", "?")
    notice(f"the hub (pid {pid}) indexes the new turns; waiting for it...")
    last_key: tuple[int, int] | None = None
    last_move = time.monotonic()
    while True:
        owner_now = index.owner()
        if owner_now is None:  # the hub stopped: this process may write again
            return take_over()
        state = index.load_state()
        num, seq = int(state.get("turn_num", 0)), int(state.get("event_seq", 0))
        if num >= target_num and seq >= target_seq:
            with index.write_lock():
                pass
            index.refresh()
            return {
                "added_turns": 0,
                "updated_turns": 0,
                "summaries": 0,
                "indexed_by": f"background indexer (pid {pid})",
                "turn_num": num,
                "seconds": round(time.monotonic() - started, 3),
            }
        if progress is not None and target_num > first:
            progress(max(0, min(num, target_num) - first), target_num - first, "turns")
        now = time.monotonic()
        if (num, seq) != last_key or index.write_busy():
            last_key, last_move = (num, seq), now
        _give_up_if_stuck(pid, owner_now.get("error"), now - last_move)
        time.sleep(OWNER_WAIT_POLL_S)


def _give_up_if_stuck(pid: Any, error: Any, still_for: float) -> None:
    """Raise when the owner has neither written nor caught up for too long."""
    if error and still_for > OWNER_ERROR_GRACE_S:
        raise MemviewerError(
            INTERNAL,
            f"the sessions are stored, but the hub's indexer (pid {pid}) fails: {error}",
            hint="fix the cause (see `memviewer doctor`); the hub retries on its own",
        )
    if still_for > OWNER_STALL_S:
        raise MemviewerError(
            INTERNAL,
            f"the sessions are stored, but the hub's indexer (pid {pid}) has not "
            f"indexed them in {OWNER_STALL_S:.0f} s",
            hint="`memviewer doctor` shows the index lag; restarting the hub catches up",
        )
