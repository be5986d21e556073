"""The raw SQLite statements of the batch fast path (``memviewer.session.fastpath``).

The portable path builds about a dozen SQLAlchemy statements per turn; statement
building, not SQLite, dominated the hub's profile. These few prepared statements
on the driver connection do the same writes. Each turn and its event go in under
their own SAVEPOINT, so one failing turn still fails alone.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from memviewer.store.db import WriteTx, storage_failure

_INSERT_TURN = (
    "INSERT INTO turns (id, session_id, episode_id, idx, role, content, timestamp, archived,"
    " is_compaction_summary, replaced_count, tool_calls, tool_call_id, meta)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, 0, ?, ?, ?)"
)
_INSERT_EVENT = (
    "INSERT INTO events (seq, kind, ts, session_id, episode_id, payload) VALUES (?, ?, ?, ?, ?, ?)"
)


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


class RawTurnStatements:
    """Reads and writes for a run of turns inside one write transaction."""

    def __init__(self, tx: WriteTx) -> None:
        self.raw: sqlite3.Connection = tx.conn.connection.driver_connection  # type: ignore[assignment]

    def next_index(self, session_id: str) -> int:
        top = self.raw.execute("SELECT MAX(idx) FROM turns WHERE session_id = ?", (session_id,)).fetchone()[0]
        return 0 if top is None else int(top) + 1

    def active_count(self, session_id: str) -> int:
        cur = self.raw.execute(
            "SELECT COUNT(*) FROM turns WHERE session_id = ? AND archived = 0 AND is_compaction_summary = 0",
            (session_id,),
        )
        return int(cur.fetchone()[0])

    def has_turn(self, turn_id: str) -> bool:
        return self.raw.execute("SELECT 1 FROM turns WHERE id = ?", (turn_id,)).fetchone() is not None

    def insert_turn(
        self, row: Mapping[str, Any], *, seq: int, kind: str, ts: float, payload: dict[str, Any]
    ) -> None:
        """The turn row and its event, together or not at all."""
        self.raw.execute("SAVEPOINT mv_turn")
        try:
            self.raw.execute(
                _INSERT_TURN,
                (
                    row["id"],
                    row["session_id"],
                    row["episode_id"],
                    row["idx"],
                    row["role"],
                    row["content"],
                    row["timestamp"],
                    _json(row["tool_calls"]),
                    row["tool_call_id"],
                    _json(row["meta"]),
                ),
            )
            self.raw.execute(
                _INSERT_EVENT,
                (seq, kind, ts, row["session_id"], row["episode_id"], json.dumps(payload)),
            )
        except BaseException as exc:
            if storage_failure(exc) is None:  # else the whole transaction rolls back
                self.raw.execute("ROLLBACK TO mv_turn")
                self.raw.execute("RELEASE mv_turn")
            raise
        self.raw.execute("RELEASE mv_turn")

    def touch_last_seen(self, session_id: str, ts: float) -> None:
        self.raw.execute(
            "UPDATE sessions SET last_seen_at = ? WHERE id = ? AND last_seen_at < ?", (ts, session_id, ts)
        )
