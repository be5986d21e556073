"""How far the vector index is behind SQLite, and when it should catch up (an ETA).

Read without LanceDB (the watermark lives in ``lance/state.json``), so ``import``,
``doctor``, the viewer and ``recall`` can report it cheaply. The rate is the one the
last catch-up pass measured (``rate_turns_s`` in the state, written by the indexer).

A lag is not always news: a turn published a moment ago waits for the hub's next poll
and batch. Lag whose oldest waiting turn is younger than ``timing.CATCH_UP_GRACE_S`` is
*catching up* (``within_grace``): reported in the numbers, never as a warning. Who
embeds a home (``Embedding``) is decided by ``memviewer.wire.embedding.who_embeds``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from memviewer import paths
from memviewer.index import timing

STATE_FILE = "state.json"  # memviewer.index.lance.STATE_FILE (not imported: that pulls LanceDB)


def read_state(home: Path) -> dict[str, Any]:
    """The indexer's saved state, or {} when there is none (or it is being replaced)."""
    try:
        state = json.loads((paths.lance_dir(Path(home)) / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def eta_seconds(lag: int, rate: Any) -> float | None:
    """Seconds until ``lag`` turns are embedded at ``rate`` turns/s (None: no rate known yet)."""
    if lag <= 0:
        return 0.0
    if not isinstance(rate, int | float) or isinstance(rate, bool) or rate <= 0:
        return None
    return round(lag / float(rate), 1)


def within_grace(oldest_ts: float | None, now: float | None = None) -> bool:
    """Whether a lag whose oldest waiting turn is stamped ``oldest_ts`` is still the
    indexer's normal delay (``timing.CATCH_UP_GRACE_S``). A stamp as far in the future (a
    publisher's clock ahead of ours) is not: a wrong clock never hides a lag for long."""
    if oldest_ts is None:
        return False
    age = (time.time() if now is None else now) - oldest_ts
    return -timing.CATCH_UP_GRACE_S < age < timing.CATCH_UP_GRACE_S


def index_lag(home: Path, conn: Any) -> dict[str, Any]:
    """``{"lag": turns not embedded, "turn_num": watermark, "rate_turns_s", "eta_s",
    "waiting_s": age of the oldest waiting turn (None: none waits), "within_grace"}``.

    ``conn`` is a read connection of the home's store (the counts are in ``store``).
    """
    from memviewer.store.index_progress import oldest_after, turns_after

    state = read_state(home)
    watermark = int(state.get("turn_num", 0) or 0)
    lag = turns_after(conn, watermark)
    rate = state.get("rate_turns_s")
    oldest = oldest_after(conn, watermark) if lag else None
    now = time.time()
    return {
        "lag": lag,
        "turn_num": watermark,
        "rate_turns_s": rate if isinstance(rate, int | float) else None,
        "eta_s": eta_seconds(lag, rate),
        "waiting_s": None if oldest is None else round(max(0.0, now - oldest), 1),
        "within_grace": lag > 0 and within_grace(oldest, now),
    }


CATCH_UP_PID = "catch-up.pid"  # in the lance folder: a `reindex --catch-up` process at work


def catch_up_pid(home: Path) -> int | None:
    """The pid of a live background ``memviewer reindex --catch-up`` for this home, if any."""
    import os

    try:
        pid = int((paths.lance_dir(Path(home)) / CATCH_UP_PID).read_text(encoding="ascii").strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid
