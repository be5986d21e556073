"""How far the vector index is behind SQLite, and when it should catch up (an ETA).

Read without LanceDB (the watermark lives in ``lance/state.json``), so ``import``,
``doctor``, the viewer and ``recall`` can report it cheaply. The rate is the one the
last catch-up pass measured (``rate_turns_s`` in the state, written by the indexer).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memviewer import paths
from memviewer.words import plural

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


def index_lag(home: Path, conn: Any) -> dict[str, Any]:
    """``{"lag": turns not embedded, "turn_num": watermark, "rate_turns_s", "eta_s"}``.

    ``conn`` is a read connection of the home's store (the count is in ``store``).
    """
    from memviewer.store.index_progress import turns_after

    state = read_state(home)
    watermark = int(state.get("turn_num", 0) or 0)
    lag = turns_after(conn, watermark)
    rate = state.get("rate_turns_s")
    return {
        "lag": lag,
        "turn_num": watermark,
        "rate_turns_s": rate if isinstance(rate, int | float) else None,
        "eta_s": eta_seconds(lag, rate),
    }


def describe(lag: dict[str, Any]) -> str:
    """``"1,234 turns not embedded yet (about 40 s)"`` for people."""
    eta = lag.get("eta_s")
    when = "" if eta is None else f" (about {_human_seconds(float(eta))})"
    return f"{plural(lag['lag'], 'turn')} not embedded yet{when}"


def _human_seconds(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


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
