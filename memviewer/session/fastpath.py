"""The SQLite fast path for runs of ``add_turn`` inside one publish batch.

The portable path costs about a dozen SQLAlchemy statements per turn, and
statement building, not SQLite, dominated the hub's profile. Here each turn is
checked against per-batch caches (episode, session, next index, active count)
and written with two prepared statements on the raw driver connection, inside
its own SAVEPOINT, so a failing turn still fails alone. The session's
``last_seen_at`` is touched once per batch. Semantics match
``SessionManager.add_turn`` (same validation helpers, same events); a turn
that triggers compaction hands over to ``compaction.compact``.
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Any

from memviewer.session import compaction
from memviewer.store import repos
from memviewer.store.db import WriteTx, storage_failure
from memviewer.store.events import EventRecord

if TYPE_CHECKING:
    from memviewer.session.manager import SessionManager

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


class TurnBatchWriter:
    def __init__(self, manager: SessionManager, tx: WriteTx) -> None:
        from memviewer.session.manager import (  # local: manager imports this module lazily
            closed_episode_error,
            replayed_turn,
            validate_turn,
        )

        self._validate = validate_turn
        self._replayed = replayed_turn
        self._closed = closed_episode_error
        self.manager = manager
        self.tx = tx
        self.raw: sqlite3.Connection = tx.conn.connection.driver_connection  # type: ignore[assignment]
        self._episodes: dict[str, dict[str, Any]] = {}
        self._sessions: dict[str, dict[str, Any]] = {}
        self._next_idx: dict[str, int] = {}
        self._active: dict[str, int] = {}
        self._seen: dict[str, float] = {}

    def _episode(self, episode_id: str) -> dict[str, Any]:
        ep = self._episodes.get(episode_id)
        if ep is None:
            ep = self.manager._episode(self.tx, episode_id)
            self._episodes[episode_id] = ep
        return ep

    def _session(self, session_id: str) -> dict[str, Any]:
        s = self._sessions.get(session_id)
        if s is None:
            s = self.manager._session(self.tx, session_id)
            self._sessions[session_id] = s
            cur = self.raw.execute("SELECT MAX(idx) FROM turns WHERE session_id = ?", (session_id,))
            top = cur.fetchone()[0]
            self._next_idx[session_id] = 0 if top is None else int(top) + 1
            cur = self.raw.execute(
                "SELECT COUNT(*) FROM turns WHERE session_id = ? AND archived = 0"
                " AND is_compaction_summary = 0",
                (session_id,),
            )
            self._active[session_id] = int(cur.fetchone()[0])
        return s

    def add_turn(self, cmd: dict[str, Any]) -> dict[str, Any]:
        args = {k: v for k, v in cmd.items() if k not in ("op", "cid")}
        unknown = set(args) - {
            "episode_id",
            "role",
            "content",
            "turn_id",
            "metadata",
            "tool_calls",
            "tool_call_id",
            "ts",
        }
        if unknown or "episode_id" not in args or "role" not in args or "content" not in args:
            return self.manager.apply(cmd)  # the portable path words the argument error
        v = self._validate(
            args["episode_id"],
            args["role"],
            args["content"],
            args.get("turn_id"),
            args.get("metadata"),
            args.get("tool_calls"),
            args.get("tool_call_id"),
            args.get("ts"),
        )
        episode_id = args["episode_id"]
        if self.raw.execute("SELECT 1 FROM turns WHERE id = ?", (v.turn_id,)).fetchone():
            existing = repos.get_turn(self.tx.conn, v.turn_id)
            assert existing is not None
            return self._replayed(existing, episode_id)
        ep = self._episode(episode_id)
        if ep["status"] != "open":
            raise self._closed(ep)
        session = self._session(ep["session_id"])
        sid = session["id"]
        idx = self._next_idx[sid]
        row = repos.new_turn_row(
            v.turn_id,
            sid,
            episode_id,
            idx,
            args["role"],
            args["content"],
            v.ts,
            tool_calls=args.get("tool_calls"),
            tool_call_id=args.get("tool_call_id"),
            meta=v.metadata,
        )
        public = repos.turn_public(row)
        tx = self.tx
        seq = tx.next_seq
        self.raw.execute("SAVEPOINT mv_turn")
        try:
            self.raw.execute(
                _INSERT_TURN,
                (
                    row["id"],
                    sid,
                    episode_id,
                    idx,
                    row["role"],
                    row["content"],
                    row["timestamp"],
                    _json(row["tool_calls"]),
                    row["tool_call_id"],
                    _json(row["meta"]),
                ),
            )
            payload = {"turn": public}
            self.raw.execute(
                _INSERT_EVENT, (seq, "episode.turn_added", v.ts, sid, episode_id, json.dumps(payload))
            )
        except BaseException as exc:
            if storage_failure(exc) is None:  # else the whole transaction rolls back
                self.raw.execute("ROLLBACK TO mv_turn")
                self.raw.execute("RELEASE mv_turn")
            raise
        self.raw.execute("RELEASE mv_turn")
        tx.next_seq = seq + 1
        tx.events.append(
            EventRecord(
                seq=seq,
                kind="episode.turn_added",
                ts=v.ts,
                session_id=sid,
                episode_id=episode_id,
                payload=payload,
            )
        )
        self._next_idx[sid] = idx + 1
        self._active[sid] += 1
        if v.ts > self._seen.get(sid, session["last_seen_at"]):
            self._seen[sid] = v.ts
        if session["retention"] == "compact" and self._active[sid] > int(session["active_window"]):
            self.flush()
            compaction.compact(tx, session, v.ts)
            fresh = repos.get_turn(tx.conn, v.turn_id)
            if fresh is not None:
                public = repos.turn_public(fresh)
        return public

    def flush(self) -> None:
        """Write deferred session touches and forget the caches."""
        for sid, ts in self._seen.items():
            self.raw.execute(
                "UPDATE sessions SET last_seen_at = ? WHERE id = ? AND last_seen_at < ?", (ts, sid, ts)
            )
        self._seen.clear()
        self._episodes.clear()
        self._sessions.clear()
        self._next_idx.clear()
        self._active.clear()
