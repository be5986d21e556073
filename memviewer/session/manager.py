"""The session / episode manager: the only code that changes memory.

Every operation validates, writes its rows and its events in one transaction
(via ``Store.write``), and the bus sees the events after commit. Operations
take caller-minted ids so that replays from a publisher's spool are no-ops.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from memviewer import ops
from memviewer.errors import (
    CONFLICT,
    EPISODE_NOT_FOUND,
    INTERNAL,
    INVALID_ARGUMENT,
    SESSION_NOT_FOUND,
    MemviewerError,
)
from memviewer.ids import new_id
from memviewer.logctx import log_context
from memviewer.session import compaction, import_plan, operations, records
from memviewer.session.bus import EventBus
from memviewer.session.chunked_import import ChunkedImport, import_chunks
from memviewer.session.fastpath import TurnBatchWriter
from memviewer.session.turn_rules import (
    check_r_task,
    closed_episode_error,
    closed_values,
    replayed_episode,
    replayed_turn,
    title_from,
    validate_episode_start,
    validate_turn,
)
from memviewer.session.turn_rules import opt_dict as _opt_dict
from memviewer.session.turn_rules import require_str as _require_str
from memviewer.session.turn_rules import timestamp as _ts
from memviewer.store import repos
from memviewer.store.db import Store, WriteTx, storage_failure
from memviewer.timeutil import now

log_session = logging.getLogger("memviewer.session")
log_episode = logging.getLogger("memviewer.episode")

RETENTIONS = ("compact", "keep_all")


class SessionManager:
    """Sessions, episodes and turns over a ``Store``, with an ``EventBus``."""

    def __init__(
        self,
        store: Store,
        *,
        classify: Callable[[str], Any] | None = None,
        retention: str = "compact",
        active_window: int = 100,
    ) -> None:
        self.store = store
        self.bus = EventBus()
        self._classify = classify
        self.retention = retention
        self.active_window = active_window
        # Recall log retention (``recall_log_max`` entries, ``recall_log_days``); the service sets them.
        self.recall_log_max = 5000
        self.recall_log_days = 30.0
        self.recall_log_mb = 64.0
        # The SQLite batch fast path (``session.fastpath``); off, every command of a batch
        # goes the portable way (the equivalence tests compare the two).
        self.fast_batches = True
        store.on_commit(self.bus.emit_all)

    @property
    def classifier(self) -> Callable[[str], Any] | None:
        """The intent classifier new episodes go through (``None``: intent ``unknown``)."""
        return self._classify

    @classifier.setter
    def classifier(self, classify: Callable[[str], Any] | None) -> None:
        # The service builds the manager, so callers that want another classifier (a fixed
        # one in tests, an LLM-backed one chosen later) swap it here; episodes already
        # started keep the intent they were given.
        self._classify = classify

    # -- sessions -----------------------------------------------------------
    def open_session(
        self,
        *,
        session_id: str | None = None,
        agent: str = "",
        scope: str | None = None,
        scope_id: str | None = None,
        title: str = "",
        meta: dict[str, Any] | None = None,
        source: str | None = None,
        lineage_id: str | None = None,
        root_session_id: str | None = None,
        thread_id: str | None = None,
        parent_session_id: str | None = None,
        retention: str | None = None,
        active_window: int | None = None,
        ts: Any = None,
    ) -> dict[str, Any]:
        """Create the session, or return the existing one unchanged (idempotent)."""
        sid = _require_str("session_id", session_id or new_id("s-"), allow_empty=False)
        _require_str("agent", agent)
        meta = _opt_dict("meta", meta)
        retention = retention or self.retention
        if retention not in RETENTIONS:
            raise MemviewerError(INVALID_ARGUMENT, f"retention must be one of {RETENTIONS}")
        window = self.active_window if active_window is None else active_window
        if not isinstance(window, int) or isinstance(window, bool) or window < 2:
            raise MemviewerError(INVALID_ARGUMENT, "active_window must be an integer >= 2")
        scope = scope or ("agent" if not scope_id else "user")
        scope_id = scope_id if scope_id is not None else agent
        t = _ts(ts)
        with log_context(session_id=sid), self.store.write() as tx:
            existing = repos.get_session(tx.conn, sid)
            if existing is not None:
                return repos.session_public(existing)
            row = {
                "id": sid,
                "agent": agent,
                "scope": scope,
                "scope_id": scope_id or "",
                "title": title or "",
                "started_at": t,
                "last_seen_at": t,
                "closed_at": None,
                "status": "open",
                "source": source,
                "lineage_id": lineage_id,
                "root_session_id": root_session_id,
                "thread_id": thread_id,
                "parent_session_id": parent_session_id,
                "retention": retention,
                "active_window": window,
                "meta": meta,
            }
            repos.insert_session(tx.conn, row)
            tx.append_event(
                "session.started",
                sid,
                None,
                {
                    "agent": agent,
                    "scope": row["scope"],
                    "scope_id": row["scope_id"],
                    "title": row["title"],
                    "source": source,
                },
                ts=t,
            )
            log_session.info("session.opened %s agent=%s", sid, agent)
            return repos.session_public(row)

    def _session(self, tx: WriteTx, session_id: str) -> dict[str, Any]:
        _require_str("session_id", session_id, allow_empty=False)
        row = repos.get_session(tx.conn, session_id)
        if row is None:
            raise MemviewerError(SESSION_NOT_FOUND, f"unknown session {session_id!r}")
        return row

    def close_session(self, session_id: str, *, ts: Any = None) -> dict[str, Any]:
        t = _ts(ts)
        with log_context(session_id=session_id), self.store.write() as tx:
            row = self._session(tx, session_id)
            if row["status"] != "open":
                return repos.session_public(row)
            self._abandon_open_episodes(tx, session_id, "session_closed", t)
            repos.update_session(tx.conn, session_id, status="closed", closed_at=t, last_seen_at=t)
            tx.append_event("session.closed", session_id, None, {}, ts=t)
            log_session.info("session.closed %s", session_id)
            row.update(status="closed", closed_at=t, last_seen_at=t)
            return repos.session_public(row)

    def delete_session(self, session_id: str, *, ts: Any = None) -> dict[str, Any]:
        """Delete a session for good: its row, episodes and turns (and so its keyword rows)
        in one transaction; the ``session.deleted`` event carries the turn ids so the
        vector index drops their rows and the session's summary on its next pass."""
        t = _ts(ts)
        with log_context(session_id=session_id), self.store.write() as tx:
            self._session(tx, session_id)  # session_not_found for an unknown id
            removed = repos.delete_session(tx.conn, session_id)
            tx.append_event("session.deleted", session_id, None, removed, ts=t)
        log_session.info("session.deleted %s (%d turns)", session_id, removed["turns"])
        return {"session_id": session_id, "turns": removed["turns"], "episodes": removed["episodes"]}

    def set_session_agent(self, session_id: str, agent: str, *, ts: Any = None) -> dict[str, Any]:
        """Name a session's agent after it was opened (the OTLP receiver learns it late: an
        exporter sends a chat span before the agent span that names it). An agent-scoped
        session whose scope id was the old name follows the new one; the
        ``session.agent_changed`` event tells the indexer to re-read the session's rows."""
        _require_str("agent", agent, allow_empty=False)
        t = _ts(ts)
        with log_context(session_id=session_id), self.store.write() as tx:
            row = self._session(tx, session_id)
            if row["agent"] == agent:
                return repos.session_public(row)
            changes: dict[str, Any] = {"agent": agent}
            if row["scope"] == "agent" and row["scope_id"] == row["agent"]:
                changes["scope_id"] = agent
            repos.update_session(tx.conn, session_id, **changes)
            payload = {
                "agent": agent,
                "previous_agent": row["agent"],
                "scope": row["scope"],
                "scope_id": changes.get("scope_id", row["scope_id"]),
                "scope_changed": "scope_id" in changes,
            }
            tx.append_event("session.agent_changed", session_id, None, payload, ts=t)
            row.update(changes)
        log_session.info("session.agent_changed %s %s -> %s", session_id, payload["previous_agent"], agent)
        return repos.session_public(row)

    def prune_idle(self, cutoff: float) -> list[str]:
        """Close open sessions last seen before ``cutoff`` (epoch seconds)."""
        t = now()
        pruned: list[str] = []
        with self.store.write() as tx:
            for sid in repos.open_session_ids(tx.conn, cutoff):
                self._abandon_open_episodes(tx, sid, "idle_pruned", t)
                repos.update_session(tx.conn, sid, status="pruned", closed_at=t)
                tx.append_event("session.idle_pruned", sid, None, {"cutoff": cutoff}, ts=t)
                pruned.append(sid)
        if pruned:
            log_session.info("session.pruned %d idle sessions", len(pruned))
        return pruned

    def shutdown(self, episode_ids: list[str] | None = None, *, ts: Any = None) -> list[str]:
        """Close open episodes as abandoned (reason ``shutdown``; sessions stay open).

        ``episode_ids``: only these (an agent ending its own, the ``shutdown`` publish
        command); ids that are unknown or already closed are skipped, so a replay is a
        no-op. ``None`` (in-process callers only) means every open episode. The hub never
        calls this when it stops: the hub is not the agent.
        """
        t = _ts(ts)
        with self.store.write() as tx:
            if episode_ids is None:
                ids = repos.open_episode_ids(tx.conn)
            else:
                ids = []
                for eid in dict.fromkeys(episode_ids):
                    ep = repos.get_episode(tx.conn, eid)
                    if ep is not None and ep.get("status") == "open":
                        ids.append(eid)
            for eid in ids:
                self._close_episode(tx, repos.get_episode(tx.conn, eid), "abandoned", t, reason="shutdown")
        log_session.info("session.shutdown: %d open episodes abandoned", len(ids))
        return ids

    def _abandon_open_episodes(self, tx: WriteTx, session_id: str, reason: str, t: float) -> None:
        for eid in repos.open_episode_ids(tx.conn, session_id):
            self._close_episode(tx, repos.get_episode(tx.conn, eid), "abandoned", t, reason=reason)

    # -- episodes -----------------------------------------------------------
    def start_episode(
        self,
        session_id: str,
        user_message: str,
        *,
        episode_id: str | None = None,
        turn_id: str | None = None,
        meta: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        ts: Any = None,
    ) -> dict[str, Any]:
        """Open an episode whose first turn is the user's message."""
        v = validate_episode_start(session_id, user_message, episode_id, meta, metadata)
        eid = v.episode_id
        with self.store.read() as conn:  # replay: no classification, no write
            existing = repos.get_episode(conn, eid)
        if existing is not None:
            return replayed_episode(existing, session_id)
        intent = self._intent(user_message)
        t = _ts(ts)
        with log_context(session_id=session_id, episode_id=eid), self.store.write() as tx:
            session = self._session(tx, session_id)
            if session["status"] != "open":
                raise MemviewerError(CONFLICT, f"session {session_id!r} is {session['status']}")
            row = repos.new_episode_row(eid, session_id, t, intent, v.meta)
            repos.insert_episode(tx.conn, row)
            tx.append_event(
                "episode.started",
                session_id,
                eid,
                {"intent": intent, "user_message": user_message},
                ts=t,
            )
            updates: dict[str, Any] = {"last_seen_at": max(t, session["last_seen_at"])}
            if not session["title"]:
                updates["title"] = title_from(user_message)
            repos.update_session(tx.conn, session_id, **updates)
            session.update(updates)
            turn = self._insert_turn(
                tx,
                session,
                eid,
                "user",
                user_message,
                turn_id or new_id("t-"),
                metadata=v.metadata,
                tool_calls=None,
                tool_call_id=None,
                t=t,
            )
            log_episode.info("episode.begun %s intent=%s", eid, intent["kind"])
            out = repos.episode_public(row)
            out["first_turn"] = turn
            return out

    def _intent(self, message: str) -> dict[str, Any]:
        if self._classify is None:
            return {"kind": "unknown", "confidence": 0.0, "rule_id": "none", "source": "none"}
        try:
            r = self._classify(message)
        except MemviewerError:
            raise
        except Exception as exc:  # classification must never block an episode
            log_session.warning("intent classifier failed: %s", exc)
            return {"kind": "unknown", "confidence": 0.0, "rule_id": "none", "source": "fallback"}
        out = {"kind": r.kind, "confidence": float(r.confidence), "rule_id": r.rule_id, "source": r.source}
        if getattr(r, "error", None):
            out["error"] = r.error
        return out

    def _episode(self, tx: WriteTx, episode_id: str) -> dict[str, Any]:
        _require_str("episode_id", episode_id, allow_empty=False)
        row = repos.get_episode(tx.conn, episode_id)
        if row is None:
            raise MemviewerError(EPISODE_NOT_FOUND, f"unknown episode {episode_id!r}")
        return row

    def add_turn(
        self,
        episode_id: str,
        role: str,
        content: str,
        *,
        turn_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        tool_calls: list[Any] | None = None,
        tool_call_id: str | None = None,
        ts: Any = None,
    ) -> dict[str, Any]:
        args = validate_turn(episode_id, role, content, turn_id, metadata, tool_calls, tool_call_id, ts)
        tid, t = args.turn_id, args.ts
        with log_context(episode_id=episode_id), self.store.write() as tx:
            existing = repos.get_turn(tx.conn, tid)
            if existing is not None:  # replay of an acknowledged command
                return replayed_turn(existing, episode_id)
            episode = self._episode(tx, episode_id)
            if episode["status"] != "open":
                raise closed_episode_error(episode)
            session = self._session(tx, episode["session_id"])
            with log_context(session_id=session["id"]):
                turn = self._insert_turn(
                    tx,
                    session,
                    episode_id,
                    role,
                    content,
                    tid,
                    metadata=args.metadata,
                    tool_calls=tool_calls,
                    tool_call_id=tool_call_id,
                    t=t,
                )
                if t > session["last_seen_at"]:
                    repos.update_session(tx.conn, session["id"], last_seen_at=t)
            return turn

    def _insert_turn(
        self,
        tx: WriteTx,
        session: dict[str, Any],
        episode_id: str,
        role: str,
        content: str,
        turn_id: str,
        *,
        metadata: dict[str, Any] | None,
        tool_calls: list[Any] | None,
        tool_call_id: str | None,
        t: float,
    ) -> dict[str, Any]:
        row = repos.new_turn_row(
            turn_id,
            session["id"],
            episode_id,
            repos.next_index(tx.conn, session["id"]),
            role,
            content,
            t,
            tool_calls=tool_calls,
            tool_call_id=tool_call_id,
            meta=metadata,
        )
        repos.insert_turn(tx.conn, row)
        public = repos.turn_public(row)
        tx.append_event("episode.turn_added", session["id"], episode_id, {"turn": public}, ts=t)
        log_episode.debug("turn_added %s role=%s", turn_id, role)
        if compaction.needs_compaction(tx.conn, session):
            compaction.compact(tx, session, t)
            fresh = repos.get_turn(tx.conn, turn_id)
            if fresh is not None:
                public = repos.turn_public(fresh)
        return public

    def finalize_episode(
        self, episode_id: str, r_task: float | None = None, *, ts: Any = None
    ) -> dict[str, Any]:
        check_r_task(r_task)
        t = _ts(ts)
        with log_context(episode_id=episode_id), self.store.write() as tx:
            ep = self._episode(tx, episode_id)
            if ep["status"] == "closed":
                if ep["closed_by"] == "finalized":
                    return repos.episode_public(ep)
                raise MemviewerError(CONFLICT, f"episode {episode_id!r} was abandoned")
            return self._close_episode(tx, ep, "finalized", t, r_task=r_task)

    def abandon_episode(
        self, episode_id: str, reason: str | None = None, *, ts: Any = None
    ) -> dict[str, Any]:
        if reason is not None:
            _require_str("reason", reason)
        t = _ts(ts)
        with log_context(episode_id=episode_id), self.store.write() as tx:
            ep = self._episode(tx, episode_id)
            if ep["status"] == "closed":
                if ep["closed_by"] == "abandoned":
                    return repos.episode_public(ep)
                raise MemviewerError(CONFLICT, f"episode {episode_id!r} was finalized")
            return self._close_episode(tx, ep, "abandoned", t, reason=reason)

    def _close_episode(
        self,
        tx: WriteTx,
        ep: dict[str, Any] | None,
        closed_by: str,
        t: float,
        *,
        r_task: float | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        if ep is None:
            raise MemviewerError(INTERNAL, "episode vanished inside its transaction")
        values, payload = closed_values(ep, closed_by, t, r_task=r_task, reason=reason)
        repos.update_episode(tx.conn, ep["id"], **values)
        kind = "episode.finalized" if closed_by == "finalized" else "episode.abandoned"
        if closed_by == "abandoned":
            # Subscribers of episode.finalized see every close (with closed_by),
            # as in the reference bus; episode.abandoned is the specific signal.
            tx.append_event("episode.finalized", ep["session_id"], ep["id"], dict(payload), ts=t)
        tx.append_event(kind, ep["session_id"], ep["id"], payload, ts=t)
        log_episode.info("episode.%s %s", closed_by, ep["id"])
        ep = dict(ep)
        ep.update(values)
        return repos.episode_public(ep)

    # -- the recall log and LLM calls (``session.records``) ------------------------
    def record_recall(self, *, ts: Any = None, **args: Any) -> dict[str, Any]:
        """Store one recall log entry (``memviewer.recall_log``), emit ``recall.performed``
        and prune what retention no longer keeps. Idempotent by ``recall_id``."""
        keep = records.RecallLogLimits(self.recall_log_max, self.recall_log_days, self.recall_log_mb)
        return records.record_recall(self.store, keep, args, ts)

    def record_llm_call(self, *, ts: Any = None, **args: Any) -> dict[str, Any]:
        """Store one LLM call (``memviewer.context.calls``) and emit ``llm_call.recorded``.
        Idempotent by ``call_id``; the session need not exist (a call is kept, not refused)."""
        return records.record_llm_call(self.store, args, ts)

    # -- batches (the hub's publish path) -------------------------------------
    #: The ops a hub accepts (``OPERATIONS``, below: declared in ``memviewer.ops``).
    OPS = tuple(ops.OPS)

    def apply(self, command: dict[str, Any]) -> dict[str, Any]:
        """Run one protocol command ``{"op": ..., ...}`` through the operation table."""
        op, entry, args = operations.lookup(OPERATIONS, command)
        try:
            return entry.handler(self, args)
        except (TypeError, ValueError, OverflowError) as exc:  # a value no column can hold
            if storage_failure(exc) is not None:
                raise
            raise MemviewerError(INVALID_ARGUMENT, f"{op}: {_short_error(exc)}") from None

    def apply_batch(self, commands: list[Any]) -> list[dict[str, Any]]:
        """Apply commands in order in one transaction; each fails alone (savepoints).

        Returns one ``{"ok": result}`` or ``{"error": {code, message}}`` per
        command. Everything is durable when this returns. On SQLite (unless
        ``fast_batches`` is off), ``add_turn``, ``start_episode``, ``finalize_episode``
        and ``record_llm_call`` take the batch fast path (``session.fastpath``).
        """
        results: list[dict[str, Any]] = []
        with self.store.write() as tx:
            fast = (
                TurnBatchWriter(
                    tx,
                    load_episode=self._episode,
                    load_session=self._session,
                    portable=self.apply,
                    classify=self._intent,
                )
                if self.store.is_sqlite and self.fast_batches
                else None
            )
            for cmd in commands:
                try:
                    if fast is not None and isinstance(cmd, dict) and cmd.get("op") in fast.OPS:
                        results.append({"ok": fast.apply(cmd)})
                        continue
                    if fast is not None:
                        fast.flush()
                    with self.store.write():
                        results.append({"ok": self.apply(cmd)})
                except MemviewerError as exc:
                    results.append({"error": exc.to_dict()})
                except Exception as exc:  # never let one command sink the batch...
                    if storage_failure(exc) is not None:
                        raise  # ...unless the store failed: then nothing is stored or acknowledged
                    op = cmd.get("op") if isinstance(cmd, dict) else None
                    if isinstance(exc, TypeError | ValueError | OverflowError):
                        results.append(
                            {"error": {"code": INVALID_ARGUMENT, "message": f"{op}: {_short_error(exc)}"}}
                        )
                        continue
                    log_session.exception("command failed")
                    results.append({"error": {"code": INTERNAL, "message": _short_error(exc)}})
            if fast is not None:
                fast.flush()
        return results

    # -- imports -------------------------------------------------------------
    def import_session(
        self,
        session: dict[str, Any],
        turns: list[dict[str, Any]],
        episodes: list[dict[str, Any]] | None = None,
        *,
        origin: str | None = None,
        replace: bool = False,
        keep_missing: bool = False,
    ) -> dict[str, Any]:
        """Store a whole session history as the importer has it; idempotent by turn id.

        ``turns`` are in projection order (archived first) and carry ``id``,
        ``role``, ``content``, ``timestamp``, ``archived`` and optional
        ``is_compaction_summary``/``replaced_count``/``tool_calls``/``meta``.
        Every field is type- and range-checked first (``importcheck``), so a bad
        file fails with ``invalid_argument`` and stores nothing.

        The import is authoritative: existing turns keep their row and get the
        file's position and flags; turns (and episodes) of the session that the
        import no longer holds are removed, so an edited file leaves no stale text.
        ``origin`` (``praisonai:/abs/a.json``) is recorded in ``session.imported``.
        A session that exists from another origin (published live, or imported
        from another file) is refused with ``conflict`` unless ``replace`` is set
        or the import would change nothing; one imported without an origin (older
        versions, direct calls) may be updated by any. Emits ``session.started``
        for a new session and ``session.imported``.

        ``keep_missing`` (the folder watcher): the file is PraisonAI's window, not the
        history, so stored turns it no longer holds are kept, marked archived, in their
        place among the file's turns (``ImportPlan.build``), counted as ``kept_turns``.
        """
        return import_plan.import_session(
            self.store,
            self.import_row,
            session,
            turns,
            episodes,
            origin=origin,
            replace=replace,
            keep_missing=keep_missing,
        )

    def import_row(self, session: dict[str, Any], t: float) -> dict[str, Any]:
        """The ``sessions`` row an import writes for ``session`` (defaults filled in)."""
        return {
            "id": session["id"],
            "agent": session.get("agent") or "",
            "scope": session.get("scope") or "agent",
            "scope_id": session.get("scope_id") or "",
            "title": session.get("title") or "",
            "started_at": session.get("started_at") or t,
            "last_seen_at": session.get("last_seen_at") or session.get("started_at") or t,
            "closed_at": session.get("closed_at"),
            "status": session.get("status") or "closed",
            "source": session.get("source"),
            "lineage_id": session.get("lineage_id"),
            "root_session_id": session.get("root_session_id"),
            "thread_id": session.get("thread_id"),
            "parent_session_id": session.get("parent_session_id"),
            "retention": session.get("retention") or self.retention,
            "active_window": session.get("active_window") or self.active_window,
            "meta": session.get("meta"),
        }

    def import_session_chunks(
        self,
        session: dict[str, Any],
        chunks: Iterable[list[dict[str, Any]]],
        *,
        origin: str | None = None,
        replace: bool = False,
    ) -> dict[str, Any]:
        """``import_session`` for a history too big to hold: one transaction per chunk.

        The rules (what a Ctrl-C leaves, how a re-run continues) are in
        ``memviewer.session.chunked_import``.
        """
        return import_chunks(self.store, self.import_row, session, chunks, origin=origin, replace=replace)

    def chunked_import(
        self,
        session: dict[str, Any],
        *,
        origin: str | None = None,
        replace: bool = False,
        keep_missing: bool = False,
    ) -> ChunkedImport:
        """The same import driven a chunk at a time by a caller whose chunks arrive one by one
        (the folder watcher hands each to the writer thread as its own job)."""
        return ChunkedImport(
            self.store, self.import_row, session, origin=origin, replace=replace, keep_missing=keep_missing
        )


def _shutdown(m: SessionManager, args: dict[str, Any]) -> dict[str, Any]:
    # An agent's end: only the episodes it names, never all of them.
    ids = args["episode_ids"]
    if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
        raise MemviewerError(INVALID_ARGUMENT, "shutdown: episode_ids must be a list of episode ids")
    return {"abandoned": m.shutdown(ids, ts=args.get("ts"))}


#: Every op a hub accepts -> its arguments (``memviewer.ops``) and the call that runs it.
OPERATIONS: dict[str, operations.Operation[SessionManager]] = operations.table(
    {
        "open_session": lambda m, a: m.open_session(**a),
        "start_episode": lambda m, a: m.start_episode(**a),
        "add_turn": lambda m, a: m.add_turn(**a),
        "finalize_episode": lambda m, a: m.finalize_episode(**a),
        "abandon_episode": lambda m, a: m.abandon_episode(**a),
        "close_session": lambda m, a: m.close_session(**a),
        "delete_session": lambda m, a: m.delete_session(**a),
        "set_session_agent": lambda m, a: m.set_session_agent(**a),
        "record_recall": lambda m, a: m.record_recall(**a),
        "record_llm_call": lambda m, a: m.record_llm_call(**a),
        "shutdown": _shutdown,
    }
)


def _short_error(exc: BaseException) -> str:
    """The driver's own words for an error, without SQLAlchemy's SQL statement and parameters
    (they repeat the caller's data and say nothing a caller can act on)."""
    orig = getattr(exc, "orig", None)
    return f"{type(orig or exc).__name__}: {orig or exc}".split("\n[SQL:")[0][:500]
