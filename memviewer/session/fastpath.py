"""The SQLite fast path for a publish batch's hot commands.

``add_turn``, ``start_episode``, ``finalize_episode`` and ``record_llm_call`` (what the
Publisher and, a chat span at a time, the OTLP receiver send) skip SQLAlchemy: the
portable path costs about a dozen built statements a command, and statement building,
not SQLite, dominated the writer's profile. Each command is checked against per-batch
caches (episode, session, next index, active count) kept across these four, and written
by ``store.fast_batch`` (prepared statements on the driver connection, a SAVEPOINT per
command, so a failing command still fails alone and gives its event numbers back). The
session's ``last_seen_at`` is touched once per run. Semantics match ``SessionManager``
(the same validation helpers in ``turn_rules``, the same rows, events and errors;
``tests/test_fastpath.py`` compares the tables); a turn that triggers compaction hands
over to ``compaction.compact``. Any other command flushes the caches first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from memviewer import ops
from memviewer.errors import CONFLICT, MemviewerError
from memviewer.ids import new_id
from memviewer.logctx import log_context
from memviewer.session import compaction
from memviewer.session.turn_rules import (
    check_r_task,
    closed_episode_error,
    closed_values,
    replayed_episode,
    replayed_turn,
    require_str,
    timestamp,
    title_from,
    validate_episode_start,
    validate_turn,
)
from memviewer.store import repos
from memviewer.store.db import WriteTx
from memviewer.store.fast_batch import RawBatchStatements

RowLoader = Callable[[WriteTx, str], dict[str, Any]]

log_episode = logging.getLogger("memviewer.episode")


def _args(cmd: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in cmd.items() if k not in ("op", "cid")}


class TurnBatchWriter:
    """Per-batch caches over ``RawBatchStatements``.

    ``load_episode`` / ``load_session`` fetch (and check) a row the way the manager
    does; ``portable`` applies a command the portable way (used to word argument
    errors exactly as ``SessionManager`` does); ``classify`` is the manager's intent step.
    """

    OPS = frozenset(("add_turn", "start_episode", "finalize_episode", "record_llm_call"))

    def __init__(
        self,
        tx: WriteTx,
        *,
        load_episode: RowLoader,
        load_session: RowLoader,
        portable: Callable[[dict[str, Any]], dict[str, Any]],
        classify: Callable[[str], dict[str, Any]],
    ) -> None:
        self.tx = tx
        self.sql = RawBatchStatements(tx)
        self._load_episode = load_episode
        self._load_session = load_session
        self._portable = portable
        self._classify = classify
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

    def apply(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """One of ``OPS``; raises what ``SessionManager.apply`` would raise."""
        op = cmd["op"]
        if ops.OPS[op].problem(_args(cmd)) is not None:
            return self._portable(cmd)  # the portable path words the argument error
        if op == "add_turn":
            return self.add_turn(cmd)
        if op == "start_episode":
            return self.start_episode(cmd)
        if op == "finalize_episode":
            return self.finalize_episode(cmd)
        return self.record_llm_call(cmd)

    def add_turn(self, cmd: dict[str, Any]) -> dict[str, Any]:
        args = _args(cmd)
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
        return self._write_turn(
            session,
            episode_id,
            v.turn_id,
            args["role"],
            args["content"],
            v.ts,
            tool_calls=args.get("tool_calls"),
            tool_call_id=args.get("tool_call_id"),
            meta=v.metadata,
        )

    def _write_turn(
        self,
        session: dict[str, Any],
        episode_id: str,
        turn_id: str,
        role: str,
        content: str,
        ts: float,
        *,
        tool_calls: list[Any] | None,
        tool_call_id: str | None,
        meta: dict[str, Any] | None,
        before: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """A turn row and its event (``before``: the command's other writes, in the same
        savepoint), the caches moved on, then compaction when the window overflows."""
        sid = session["id"]
        idx = self._next_idx[sid]
        row = repos.new_turn_row(
            turn_id,
            sid,
            episode_id,
            idx,
            role,
            content,
            ts,
            tool_calls=tool_calls,
            tool_call_id=tool_call_id,
            meta=meta,
        )
        public = repos.turn_public(row)
        compacts = session["retention"] == "compact" and self._active[sid] + 1 > int(session["active_window"])
        if compacts:  # compaction reads the store: the deferred touches go first, the caches go
            self.flush()
        with self.sql.command():  # compaction too: a failing one leaves no turn (as Store.write)
            if before is not None:
                before()
            self.sql.insert_turn_row(row)
            self.sql.append_event("episode.turn_added", sid, episode_id, {"turn": public}, ts)
            if compacts:
                compaction.compact(self.tx, session, ts)
                fresh = repos.get_turn(self.tx.conn, turn_id)
                if fresh is not None:
                    public = repos.turn_public(fresh)
        if not compacts:  # after a compaction the counts are read again from the store
            self._next_idx[sid] = idx + 1
            self._active[sid] += 1
        if ts > self._seen.get(sid, session["last_seen_at"]):
            self._seen[sid] = ts  # a conditional UPDATE later: never moves last_seen back
        return public

    def start_episode(self, cmd: dict[str, Any]) -> dict[str, Any]:
        args = _args(cmd)
        session_id, user_message = args["session_id"], args["user_message"]
        v = validate_episode_start(
            session_id, user_message, args.get("episode_id"), args.get("meta"), args.get("metadata")
        )
        eid = v.episode_id
        if eid in self._episodes or self.sql.has_episode(eid):  # replay: no classification, no write
            return replayed_episode(self._episode(eid), session_id)
        intent = self._classify(user_message)
        t = timestamp(args.get("ts"))
        with log_context(session_id=session_id, episode_id=eid):
            session = self._session(session_id)
            if session["status"] != "open":
                raise MemviewerError(CONFLICT, f"session {session_id!r} is {session['status']}")
            row = repos.new_episode_row(eid, session_id, t, intent, v.meta)
            title = None if session["title"] else title_from(user_message)

            def episode_rows() -> None:
                self.sql.insert_episode(row)
                self.sql.append_event(
                    "episode.started", session_id, eid, {"intent": intent, "user_message": user_message}, t
                )
                if title is not None:
                    self.sql.set_title(session_id, title)

            turn = self._write_turn(
                session,
                eid,
                args.get("turn_id") or new_id("t-"),
                "user",
                user_message,
                t,
                tool_calls=None,
                tool_call_id=None,
                meta=v.metadata,
                before=episode_rows,
            )
            if title is not None:
                session["title"] = title
            self._episodes[eid] = row
            log_episode.info("episode.begun %s intent=%s", eid, intent["kind"])
        out = repos.episode_public(row)
        out["first_turn"] = turn
        return out

    def finalize_episode(self, cmd: dict[str, Any]) -> dict[str, Any]:
        args = _args(cmd)
        episode_id, r_task = args["episode_id"], args.get("r_task")
        check_r_task(r_task)
        t = timestamp(args.get("ts"))
        require_str("episode_id", episode_id, allow_empty=False)  # before the cache's lookup
        with log_context(episode_id=episode_id):
            ep = self._episode(episode_id)
            if ep["status"] == "closed":
                if ep["closed_by"] == "finalized":
                    return repos.episode_public(ep)
                raise MemviewerError(CONFLICT, f"episode {episode_id!r} was abandoned")
            values, payload = closed_values(ep, "finalized", t, r_task=r_task, reason=None)
            with self.sql.command():
                self.sql.update_episode(episode_id, values)
                self.sql.append_event("episode.finalized", ep["session_id"], episode_id, payload, t)
            ep.update(values)
            log_episode.info("episode.%s %s", "finalized", episode_id)
        return repos.episode_public(ep)

    def record_llm_call(self, cmd: dict[str, Any]) -> dict[str, Any]:
        from memviewer.context import calls

        args = _args(cmd)
        ts = args.pop("ts", None)
        values = calls.check_command(args)
        values["ts"] = timestamp(ts)
        with self.sql.command():
            if self.sql.write_llm_call(values):
                self.sql.append_event(
                    "llm_call.recorded",
                    values["session_id"],
                    values["episode_id"],
                    calls.recorded_payload(values),
                    values["ts"],
                )
        return {"call_id": values["id"]}

    def flush(self) -> None:
        """Write deferred session touches and forget the caches."""
        for sid, ts in self._seen.items():
            self.sql.touch_last_seen(sid, ts)
        self._seen.clear()
        self._episodes.clear()
        self._sessions.clear()
        self._next_idx.clear()
        self._active.clear()
