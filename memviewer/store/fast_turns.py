"""The raw SQLite statements of the batch fast path (``memviewer.session.fastpath``).

The portable path builds about a dozen SQLAlchemy statements per turn; statement
building, not SQLite, dominated the hub's profile. These few prepared statements
on the driver connection do the same writes. Each command's rows and events go in
under their own SAVEPOINT (``command``), so one failing command still fails alone. JSON
columns hold the text SQLAlchemy's ``JSON`` type writes (``json.dumps``; ``None`` is the
JSON ``null``, not SQL NULL), so a row is the same whichever path wrote it.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator, Mapping
from typing import Any

from memviewer.events import EventRecord
from memviewer.store.db import WriteTx, storage_failure

_INSERT_TURN = (
    "INSERT INTO turns (id, session_id, episode_id, idx, role, content, timestamp, archived,"
    " is_compaction_summary, replaced_count, tool_calls, tool_call_id, meta)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, 0, ?, ?, ?)"
)
_INSERT_EVENT = (
    "INSERT INTO events (seq, kind, ts, session_id, episode_id, payload) VALUES (?, ?, ?, ?, ?, ?)"
)


def sa_json(value: Any) -> str:
    """A JSON column's value as SQLAlchemy's ``JSON`` type (``none_as_null=False``) writes it."""
    return json.dumps(value)


class RawTurnStatements:
    """Reads and writes for a run of turns inside one write transaction."""

    def __init__(self, tx: WriteTx) -> None:
        self.tx = tx
        self.raw: sqlite3.Connection = tx.conn.connection.driver_connection  # type: ignore[assignment]

    @contextlib.contextmanager
    def command(self) -> Iterator[None]:
        """One command's writes under a SAVEPOINT: a failing command leaves no row and gives
        its event numbers back (as ``Store.write`` nested does); a failure of the store
        itself leaves the rollback to the whole transaction."""
        tx = self.tx
        mark, seq_mark = len(tx.events), tx.next_seq
        self.raw.execute("SAVEPOINT mv_cmd")
        try:
            yield
        except BaseException as exc:
            del tx.events[mark:]
            tx.next_seq = seq_mark
            if storage_failure(exc) is None:
                self.raw.execute("ROLLBACK TO mv_cmd")
                self.raw.execute("RELEASE mv_cmd")
            raise
        self.raw.execute("RELEASE mv_cmd")

    def append_event(
        self, kind: str, session_id: str | None, episode_id: str | None, payload: dict[str, Any], ts: float
    ) -> None:
        """``WriteTx.append_event`` in one prepared statement (same row, same seq, same record)."""
        tx = self.tx
        seq = tx.next_seq
        self.raw.execute(_INSERT_EVENT, (seq, kind, ts, session_id, episode_id, sa_json(payload)))
        tx.next_seq = seq + 1
        tx.events.append(EventRecord(seq, kind, ts, session_id, episode_id, payload))

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

    def insert_turn_row(self, row: Mapping[str, Any]) -> None:
        """The turn row (its event and savepoint are the caller's: ``append_event``, ``command``)."""
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
                sa_json(row["tool_calls"]),
                row["tool_call_id"],
                sa_json(row["meta"]),
            ),
        )

    def touch_last_seen(self, session_id: str, ts: float) -> None:
        self.raw.execute(
            "UPDATE sessions SET last_seen_at = ? WHERE id = ? AND last_seen_at < ?", (ts, session_id, ts)
        )
