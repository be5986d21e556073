"""Reads behind "how far behind is the vector index" (import, doctor, stats, recall).

The vector index's watermark is the largest ``turns.num`` it embedded (``num`` only
grows), so the lag is one range count on the primary key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, func, select, tuple_

from memviewer.store.tables import Turn

T = Turn.__table__


def turns_after(conn: Connection, num: int) -> int:
    """How many turns have ``num`` above ``num`` (not embedded yet)."""
    return int(conn.execute(select(func.count()).select_from(T).where(T.c.num > int(num))).scalar() or 0)


def turns_at(conn: Connection, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], dict[str, Any]]:
    """The turns at (session_id, idx), with their ``num``; missing keys are left out."""
    if not keys:
        return {}
    rows = conn.execute(select(T).where(tuple_(T.c.session_id, T.c.idx).in_(list(keys)))).mappings()
    return {(r["session_id"], int(r["idx"])): dict(r) for r in rows}
