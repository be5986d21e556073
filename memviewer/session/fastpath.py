"""The SQLite fast path for runs of ``add_turn`` inside one publish batch.

The portable path costs about a dozen SQLAlchemy statements per turn, and
statement building, not SQLite, dominated the hub's profile. Here each turn is
checked against per-batch caches (episode, session, next index, active count)
and written by ``store.fast_turns`` (prepared statements on the driver
connection, a SAVEPOINT per turn, so a failing turn still fails alone). The session's
``last_seen_at`` is touched once per batch. Semantics match
``SessionManager.add_turn`` (same validation helpers, same events); a turn
that triggers compaction hands over to ``compaction.compact``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memviewer.session import compaction
from memviewer.session.turn_rules import closed_episode_error, replayed_turn, validate_turn
from memviewer.store import repos
from memviewer.store.db import WriteTx
from memviewer.store.events import EventRecord
from memviewer.store.fast_turns import RawTurnStatements

RowLoader = Callable[[WriteTx, str], dict[str, Any]]


class TurnBatchWriter:
    """Per-batch caches over ``RawTurnStatements``.

    ``load_episode`` / ``load_session`` fetch (and check) a row the way the manager
    does; ``portable`` applies a command the portable way (used to word argument
    errors exactly as ``SessionManager.add_turn`` does).
    """

    def __init__(
        self,
        tx: WriteTx,
        *,
        load_episode: RowLoader,
        load_session: RowLoader,
        portable: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> None:
        self.tx = tx
        self.sql = RawTurnStatements(tx)
        self._load_episode = load_episode
        self._load_session = load_session
        self._portable = portable
        self._episodes: dict[str, dict[str, Any]] = {}
        self._sessions: dict[str, dict[str, Any]] = {}
        self._next_idx: dict[str, int] = {}
        self._active: dict[str, int] = {}
        self._seen: dict[str, float] = {}

    def _episode(self, episode_id: str) -> dict[str, Any]:
        ep = self._episodes.get(episode_id)
        if ep is None:
            ep = self._load_episode(self.tx, episode_id)
            self._episodes[episode_id] = ep
        return ep

    def _session(self, session_id: str) -> dict[str, Any]:
        s = self._sessions.get(session_id)
        if s is None:
            s = self._load_session(self.tx, session_id)
            self._sessions[session_id] = s
            self._next_idx[session_id] = self.sql.next_index(session_id)
            self._active[session_id] = self.sql.active_count(session_id)
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
            return self._portable(cmd)  # the portable path words the argument error
        v = validate_turn(
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
        if self.sql.has_turn(v.turn_id):
            existing = repos.get_turn(self.tx.conn, v.turn_id)
            assert existing is not None
            return replayed_turn(existing, episode_id)
        ep = self._episode(episode_id)
        if ep["status"] != "open":
            raise closed_episode_error(ep)
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
        payload = {"turn": public}
        self.sql.insert_turn(row, seq=seq, kind="episode.turn_added", ts=v.ts, payload=payload)
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
            self.sql.touch_last_seen(sid, ts)
        self._seen.clear()
        self._episodes.clear()
        self._sessions.clear()
        self._next_idx.clear()
        self._active.clear()
