"""The publisher an agent embeds: standard library only, never blocks the agent.

```python
from memviewer.client import Publisher

with Publisher() as pub:
    sid = pub.open_session(agent="my-agent", scope="user", scope_id="u42")
    eid = pub.start_episode(sid, "fix the flaky test")
    pub.add_turn(eid, "assistant", "Reading the log…")
    pub.finalize_episode(eid)
    pub.close_session(sid)
    pub.flush(timeout=10.0)
```

Every call mints its ids (UUIDv7), stamps the time, validates the obvious
(``ValueError`` at call time), queues the command and returns. A background
thread sends the queue in ``publish`` batches and counts a command as done
only when the hub acknowledged it (durable in SQLite). While no hub answers,
commands go to a spool file (fsync'd, one JSON line each) that is replayed in
order on reconnect; the ids make replays idempotent. ``close()`` leaves what
is still unsent in the spool, where a hub picks it up when it starts.

A hub stopping or restarting never closes the agent's episodes; the agent's own
end does: ``close()`` (also run at exit) sends one ``shutdown`` command naming
the episodes this publisher started and did not finalize, and the hub abandons
those. A command the hub refuses (say ``conflict``) is never retried and never
silent: it is logged, kept in ``refusals`` (``take_refusals()`` empties it),
passed to ``on_refusal``, and ``flush()`` returns False until it was taken.

The publisher talks only to the hub that serves its home: ``hello`` names the
home, and a hub that serves another one (or a socket of another user) is
refused with one error line; commands wait in the spool meanwhile.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import socket
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memviewer import paths
from memviewer.ids import new_id
from memviewer.wire import protocol, trust
from memviewer.wire.spool import SpoolFile, cid_of
from memviewer.wire.syncclient import HubUnavailable, RpcConnection

__all__ = ["Publisher", "ROLES"]

log = logging.getLogger("memviewer.client")

ROLES = ("user", "assistant", "tool", "system")
FRAME_OVERHEAD = 128  # bytes around the command list in a publish frame
MAX_REFUSALS_KEPT = 10_000  # refusals beyond this are counted (``refused``), not kept
HOME_LOCK = "hub.owner"  # in the home: the socket of the hub serving it (see wire.probe)
_open_publishers: weakref.WeakSet[Publisher] = weakref.WeakSet()


def _close_all_at_exit() -> None:
    for pub in list(_open_publishers):
        with contextlib.suppress(Exception):
            pub.close(timeout=2.0)


atexit.register(_close_all_at_exit)


def _refusal(lsn: int, line: bytes, error: Any) -> dict[str, Any]:
    """What ``refusals`` holds for one refused command: its cid, op, the hub's error, the command."""
    try:
        command = json.loads(line)
    except ValueError:
        command = None
    op = command.get("op") if isinstance(command, dict) else None
    if isinstance(command, dict):
        command.pop("cid", None)
    return {"cid": lsn, "op": op, "error": error, "command": command}


def _check_str(name: str, value: Any, *, empty_ok: bool = True) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, not {type(value).__name__}")
    if not empty_ok and not value.strip():
        raise ValueError(f"{name} must not be empty")


def _check_dict(name: str, value: Any) -> None:
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"{name} must be a dict or None")


class Publisher:
    """Asynchronous, durable publishing of sessions, episodes and turns to the hub."""

    def __init__(
        self,
        socket_path: str | Path | None = None,
        spool_dir: str | Path | None = None,
        *,
        home: str | Path | None = None,
        on_refusal: Callable[[dict[str, Any]], None] | None = None,
        max_batch: int = 500,
        max_queue: int = 10_000,
        client_name: str = "memviewer.client",
        connect_timeout: float = 2.0,
        request_timeout: float = 60.0,
        max_backoff: float = 2.0,
    ) -> None:
        self.home = Path(home).expanduser() if home else paths.default_home()
        # No socket chosen: the home's own default one, after the one named in <home>/hub.owner.
        self._follow_owner = socket_path is None and not os.environ.get("MEMVIEWER_SOCKET")
        self.socket_path = Path(socket_path) if socket_path else paths.default_socket(self.home)
        self.spool_dir = Path(spool_dir) if spool_dir else paths.spool_dir(self.home)
        self.on_refusal = on_refusal
        self.max_batch = max(1, int(max_batch))
        self.max_queue = max(1, int(max_queue))
        self.client_name = client_name
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.max_backoff = max_backoff

        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[tuple[int, bytes]] = deque()  # (lsn, command line), oldest first
        self._next_lsn = 1
        self._acked = 0  # every lsn <= this one is resolved (acknowledged, or failed for good)
        self._spool: SpoolFile | None = None
        self._spool_pos = 0  # offset of the first spooled line not yet acknowledged
        self._spool_end = 0  # bytes written to the spool
        self._inflight_spool_end: int | None = None  # spool offset after the batch in flight
        self._split_until = 0  # send one command per request up to this lsn (isolate a bad one)
        self._conn: RpcConnection | None = None
        self._frame_limit = protocol.DEFAULT_FRAME_LIMIT
        self._stopping = False
        self._closed = False
        self._last_connect_failed = False

        self.errors = 0
        self.dropped = 0
        self._dropped_lsns: set[int] = set()
        self._spool_failed = False
        self.error_log: deque[dict[str, Any]] = deque(maxlen=200)
        self.refusals: list[dict[str, Any]] = []  # refused commands not yet taken (take_refusals)
        self.refused = 0  # every command refused so far (taken or not)
        self._first_untaken: int | None = None  # lowest cid among ``refusals``
        self._open_episodes: dict[str, str | None] = {}  # started here, not ended: id -> session
        self.hub_refused: str | None = None  # why the last hub found was not used (another home…)
        self._logged_refusal: str | None = None
        self.acked_commands = 0
        self.sent_batches = 0
        self.spooled_commands = 0
        self.connects = 0

        _open_publishers.add(self)
        self._thread = threading.Thread(target=self._run, name="memviewer-publisher", daemon=True)
        self._thread.start()

    # -- the API an agent calls -------------------------------------------------
    def open_session(
        self,
        agent: str = "",
        scope: str | None = None,
        scope_id: str | None = None,
        meta: dict[str, Any] | None = None,
        *,
        session_id: str | None = None,
        title: str | None = None,
        source: str | None = None,
        lineage_id: str | None = None,
        root_session_id: str | None = None,
        thread_id: str | None = None,
        parent_session_id: str | None = None,
        retention: str | None = None,
        active_window: int | None = None,
        ts: float | None = None,
    ) -> str:
        """Queue ``open_session`` and return the session id (minted unless given)."""
        _check_str("agent", agent)
        _check_dict("meta", meta)
        if retention is not None and retention not in ("compact", "keep_all"):
            raise ValueError("retention must be 'compact' or 'keep_all'")
        if active_window is not None and (
            not isinstance(active_window, int) or isinstance(active_window, bool) or active_window < 2
        ):
            raise ValueError("active_window must be an integer >= 2")
        sid = session_id or new_id("s-")
        _check_str("session_id", sid, empty_ok=False)
        self._enqueue(
            "open_session",
            session_id=sid,
            agent=agent,
            scope=scope,
            scope_id=scope_id,
            meta=meta,
            title=title,
            source=source,
            lineage_id=lineage_id,
            root_session_id=root_session_id,
            thread_id=thread_id,
            parent_session_id=parent_session_id,
            retention=retention,
            active_window=active_window,
            ts=ts,
        )
        return sid

    def start_episode(
        self,
        session_id: str,
        user_message: str,
        *,
        episode_id: str | None = None,
        turn_id: str | None = None,
        meta: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        ts: float | None = None,
    ) -> str:
        """Queue an episode whose first turn is ``user_message``; an empty message is a ValueError."""
        _check_str("session_id", session_id, empty_ok=False)
        _check_str("user_message", user_message, empty_ok=False)
        _check_dict("meta", meta)
        _check_dict("metadata", metadata)
        eid = episode_id or new_id("e-")
        self._enqueue(
            "start_episode",
            session_id=session_id,
            user_message=user_message,
            episode_id=eid,
            turn_id=turn_id or new_id("t-"),
            meta=meta,
            metadata=metadata,
            ts=ts,
        )
        return eid

    def add_turn(
        self,
        episode_id: str,
        role: str,
        content: str,
        *,
        metadata: dict[str, Any] | None = None,
        tool_calls: list[Any] | None = None,
        tool_call_id: str | None = None,
        turn_id: str | None = None,
        ts: float | None = None,
    ) -> str:
        """Queue one message of the episode; returns the turn id."""
        _check_str("episode_id", episode_id, empty_ok=False)
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, not {role!r}")
        _check_str("content", content)
        _check_dict("metadata", metadata)
        if tool_calls is not None and not isinstance(tool_calls, list):
            raise ValueError("tool_calls must be a list or None")
        if tool_call_id is not None:
            _check_str("tool_call_id", tool_call_id)
        tid = turn_id or new_id("t-")
        self._enqueue(
            "add_turn",
            episode_id=episode_id,
            role=role,
            content=content,
            turn_id=tid,
            metadata=metadata,
            tool_calls=tool_calls,
            tool_call_id=tool_call_id,
            ts=ts,
        )
        return tid

    def finalize_episode(
        self, episode_id: str, r_task: float | None = None, *, ts: float | None = None
    ) -> None:
        _check_str("episode_id", episode_id, empty_ok=False)
        if r_task is not None and (isinstance(r_task, bool) or not isinstance(r_task, int | float)):
            raise ValueError("r_task must be a number or None")
        self._enqueue("finalize_episode", episode_id=episode_id, r_task=r_task, ts=ts)

    def abandon_episode(self, episode_id: str, reason: str | None = None, *, ts: float | None = None) -> None:
        _check_str("episode_id", episode_id, empty_ok=False)
        if reason is not None:
            _check_str("reason", reason)
        self._enqueue("abandon_episode", episode_id=episode_id, reason=reason, ts=ts)

    def close_session(self, session_id: str, *, ts: float | None = None) -> None:
        _check_str("session_id", session_id, empty_ok=False)
        self._enqueue("close_session", session_id=session_id, ts=ts)

    def record_recall(
        self,
        query: str,
        results: list[dict[str, Any]],
        *,
        session_id: str | None = None,
        episode_id: str | None = None,
        params: dict[str, Any] | None = None,
        source: str = "agent",
        diagnostics: dict[str, Any] | None = None,
        recall_id: str | None = None,
        ts: float | None = None,
    ) -> str:
        """Queue a recall the agent made with its own memory, for memviewer's recall log.

        ``results`` are what came back, best first: ``{"turn_id": ...}`` (a memviewer
        turn) or ``{"text": ...}``, each with an optional ``score`` and ``rank``.
        Returns the recall id (minted unless given); a replay with the same id is a no-op.
        """
        _check_str("query", query)
        if not isinstance(results, list):
            raise ValueError("results must be a list of dicts")
        for i, item in enumerate(results):
            if not isinstance(item, dict):
                raise ValueError(f"results[{i}] must be a dict")
            if not (item.get("turn_id") or item.get("text")):
                raise ValueError(f"results[{i}] needs a 'turn_id' or a 'text'")
            score = item.get("score")
            if score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
                raise ValueError(f"results[{i}].score must be a number")
        for name, value in (("session_id", session_id), ("episode_id", episode_id), ("source", source)):
            if value is not None:
                _check_str(name, value, empty_ok=False)
        _check_dict("params", params)
        _check_dict("diagnostics", diagnostics)
        rid = recall_id or new_id("r-")
        self._enqueue(
            "record_recall",
            recall_id=rid,
            query=query,
            results=results,
            session_id=session_id,
            episode_id=episode_id,
            params=params,
            source=source,
            diagnostics=diagnostics,
            ts=ts,
        )
        return rid

    def publish(self, command: dict[str, Any]) -> None:
        """Queue a raw protocol command ``{"op": ..., ...}`` (ids must already be in it)."""
        if not isinstance(command, dict) or not isinstance(command.get("op"), str):
            raise ValueError("a command is a dict with an 'op'")
        args = {k: v for k, v in command.items() if k not in ("op", "cid")}
        self._enqueue(command["op"], _keep_none=True, **args)

    # -- delivery ------------------------------------------------------------------
    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until every command queued so far was stored by the hub.

        True only when all of them were stored. False on timeout, and False when one
        of them was refused (or dropped) and is still in ``refusals``: take it with
        ``take_refusals()`` to acknowledge it.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            target = self._next_lsn - 1
            self._cond.notify_all()
            while self._acked < target:
                if deadline is None:
                    self._cond.wait(1.0)
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 1.0))
            return self._first_untaken is None or self._first_untaken > target

    def take_refusals(self) -> list[dict[str, Any]]:
        """The refused commands reported since the last call (oldest first), and forget them.

        Each is ``{"cid", "op", "error": {"code", "message"}, "command": {...}}``.
        """
        with self._cond:
            out, self.refusals = self.refusals, []
            self._first_untaken = None
            return out

    def open_episodes(self) -> list[str]:
        """Episodes this publisher started and has not finalized or abandoned."""
        with self._cond:
            return list(self._open_episodes)

    def close(self, timeout: float = 5.0, *, end_episodes: bool = True) -> bool:
        """The agent's end: abandon its open episodes, flush (bounded), stop the sender,
        and leave anything unsent in the spool (the next hub applies it).

        ``end_episodes``: send one ``shutdown`` command naming the episodes this
        publisher started and did not end (False: leave them open, e.g. another
        publisher of the same agent carries on). When the hub is known to be
        unreachable, the flush waits at most one second: the commands are safe in
        the spool either way. True when everything was stored.
        """
        if self._closed:
            return True
        with self._cond:
            ending = list(self._open_episodes) if end_episodes else []
        if ending:
            self._enqueue("shutdown", episode_ids=ending)
        start = time.monotonic()
        while True:
            ok = self.flush(0.1)
            waited = time.monotonic() - start
            if ok or waited >= timeout or (self._last_connect_failed and waited >= min(1.0, timeout)):
                break
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            conn = self._conn
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=10.0)
        with self._cond:
            self._closed = True
            leftover = self._unacked_lines_locked()
            kept = None
            try:
                if self._spool is not None:
                    spool, self._spool = self._spool, None
                    kept = spool.finish(leftover)
                elif leftover:
                    kept = SpoolFile(self.spool_dir).finish(leftover)
            except OSError as exc:
                log.error(
                    "publisher closed: %d unsent commands lost, the spool is not writable (%s)",
                    len(leftover),
                    exc,
                )
                self.dropped += len(leftover)
                self.errors += len(leftover)
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        _open_publishers.discard(self)
        if kept is not None:
            log.warning("publisher closed with %d unsent commands left in %s", len(leftover), kept)
        return ok and not leftover

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def stats(self) -> dict[str, Any]:
        with self._cond:
            return {
                "connected": self._conn is not None,
                "queued": len(self._queue),
                "spool_bytes_pending": max(0, self._spool_end - self._spool_pos),
                "spool_file": str(self._spool.path) if self._spool else None,
                "enqueued": self._next_lsn - 1,
                "acked": self._acked,
                "acked_commands": self.acked_commands,
                "sent_batches": self.sent_batches,
                "spooled_commands": self.spooled_commands,
                "errors": self.errors,
                "refused": self.refused,
                "refusals_untaken": len(self.refusals),
                "open_episodes": len(self._open_episodes),
                "hub_refused": self.hub_refused,
                "connects": self.connects,
                "dropped": self.dropped,
            }

    # -- internals -------------------------------------------------------------------
    def _enqueue(self, op: str, _keep_none: bool = False, **args: Any) -> None:
        if self._closed:
            raise RuntimeError("this Publisher is closed")
        if args.get("ts") is None:
            args["ts"] = time.time()
        cmd = {"op": op, **{k: v for k, v in args.items() if _keep_none or v is not None}}
        try:
            body = protocol.dumps(cmd).encode("utf-8")
        except (TypeError, ValueError, RecursionError) as exc:
            raise ValueError(f"{op}: arguments are not JSON-serialisable: {exc}") from None
        # The hub refuses a frame nested deeper than MAX_DEPTH; a command sits 3 levels down.
        if body.count(b"[") + body.count(b"{") > protocol.MAX_DEPTH - 3:
            problem = protocol.check_value(cmd, surrogates=False, max_depth=protocol.MAX_DEPTH - 3)
            if problem:
                raise ValueError(f"{op}: the command {problem}")
        if len(body) + FRAME_OVERHEAD > protocol.DEFAULT_FRAME_LIMIT:
            raise ValueError(
                f"{op}: command is {len(body)} bytes, above the hub frame limit "
                f"({protocol.DEFAULT_FRAME_LIMIT} bytes)"
            )
        with self._cond:
            self._track_locked(op, args)
            lsn = self._next_lsn
            self._next_lsn += 1
            self._queue.append((lsn, b'{"cid":%d,' % lsn + body[1:]))
            if len(self._queue) > self.max_queue and not self._spill_locked():
                # hub down and the disk refuses the spool: drop the newest command rather than grow
                self._queue.pop()
                self._dropped_lsns.add(lsn)
                self.dropped += 1
                self.errors += 1
                item = {
                    "cid": lsn,
                    "op": op,
                    "error": {"code": "internal", "message": "dropped: queue full and spool not writable"},
                    "command": cmd,
                }
                self.error_log.append(item)
                self._add_refusal_locked(item)
                dropped_item: dict[str, Any] | None = item
            else:
                dropped_item = None
            self._cond.notify_all()
        if dropped_item is not None:
            self._report_refusals([dropped_item])

    def _track_locked(self, op: str, args: dict[str, Any]) -> None:
        """Remember the episodes this agent has open (``close()`` ends exactly those)."""
        if op == "start_episode" and isinstance(args.get("episode_id"), str):
            self._open_episodes[args["episode_id"]] = args.get("session_id")
        elif op in ("finalize_episode", "abandon_episode"):
            self._open_episodes.pop(args.get("episode_id"), None)  # type: ignore[arg-type]
        elif op == "close_session":
            sid = args.get("session_id")
            for eid in [e for e, s in self._open_episodes.items() if s == sid]:
                del self._open_episodes[eid]
        elif op == "shutdown" and isinstance(args.get("episode_ids"), list):
            for eid in args["episode_ids"]:
                self._open_episodes.pop(eid, None)

    def _add_refusal_locked(self, item: dict[str, Any]) -> None:
        self.refused += 1
        if len(self.refusals) < MAX_REFUSALS_KEPT:
            self.refusals.append(item)
        cid = item.get("cid")
        if isinstance(cid, int) and (self._first_untaken is None or cid < self._first_untaken):
            self._first_untaken = cid

    def _report_refusals(self, items: list[dict[str, Any]]) -> None:
        """The callback, outside the lock (it may call back into the publisher)."""
        if self.on_refusal is None:
            return
        for item in items:
            try:
                self.on_refusal(item)
            except Exception:
                log.exception("the on_refusal callback failed")

    def _unacked_lines_locked(self) -> list[bytes]:
        lines: list[bytes] = []
        if self._spool is not None and self._spool_pos < self._spool_end:
            spooled, _ = self._spool.read(self._spool_pos)
            lines += [ln for ln in spooled if (cid_of(ln) or 0) > self._acked]
        lines += [ln for lsn, ln in self._queue if lsn > self._acked]
        return lines

    def _spill_locked(self) -> bool:
        """Move the in-memory queue to the spool (durable, keeps the order); False if the disk refused."""
        lines = [ln for lsn, ln in self._queue if lsn > self._acked]
        if not lines:
            self._queue.clear()
            return True
        try:
            if self._spool is None:
                self._spool = SpoolFile(self.spool_dir)
            self._spool_end += self._spool.append(lines)
        except OSError as exc:
            if not self._spool_failed:
                log.error(
                    "cannot write the spool in %s (%s); keeping commands in memory", self.spool_dir, exc
                )
            self._spool_failed = True
            return False
        self._spool_failed = False
        self._queue.clear()
        self.spooled_commands += len(lines)
        return True

    def _has_work_locked(self) -> bool:
        return bool(self._queue) or self._spool_pos < self._spool_end

    def _next_batch(self) -> list[tuple[int, bytes]]:
        """The oldest unacknowledged commands: the spool first, then the queue."""
        limit = 1 if self._acked < self._split_until else self.max_batch
        budget = self._frame_limit - FRAME_OVERHEAD
        with self._cond:
            if self._spool is not None and self._spool_pos < self._spool_end:
                lines, _ = self._spool.read(self._spool_pos, limit)
                batch: list[tuple[int, bytes]] = []
                size, end = 0, self._spool_pos
                for ln in lines:
                    lsn = cid_of(ln)
                    if lsn is None or lsn <= self._acked:  # torn line, or sent before a reconnect
                        end += len(ln) + 1
                        continue
                    if batch and size + len(ln) + 1 > budget:
                        break
                    batch.append((lsn, ln))
                    size += len(ln) + 1
                    end += len(ln) + 1
                if not batch:
                    self._advance_spool_locked(end)
                    return []
                self._inflight_spool_end = end
                return batch
            batch, size = [], 0
            for lsn, ln in self._queue:
                if len(batch) >= limit or (batch and size + len(ln) + 1 > budget):
                    break
                batch.append((lsn, ln))
                size += len(ln) + 1
            self._inflight_spool_end = None
            return batch

    def _advance_spool_locked(self, end: int) -> None:
        self._spool_pos = end
        if self._spool is not None and self._spool_pos >= self._spool_end:
            self._spool.truncate()
            self._spool_pos = self._spool_end = 0

    def _candidates(self) -> list[Path]:
        """Sockets to try: the one named in ``<home>/hub.owner`` (a hub started with
        ``--socket`` elsewhere) when none was chosen, then ``socket_path``."""
        out: list[Path] = []
        if self._follow_owner:
            with contextlib.suppress(OSError, UnicodeDecodeError):
                fd = os.open(self.home / HOME_LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    lines = os.read(fd, 4096).decode("utf-8").splitlines()
                finally:
                    os.close(fd)
                if len(lines) > 1 and lines[1].strip() and Path(lines[1].strip()) != self.socket_path:
                    out.append(Path(lines[1].strip()))
        return [*out, self.socket_path]

    def _connect(self) -> None:
        candidates = self._candidates()
        for i, sock in enumerate(candidates):
            try:
                self._connect_to(sock)
                return
            except OSError:
                if i == len(candidates) - 1:
                    raise

    def _connect_to(self, sock: Path) -> None:
        conn = RpcConnection(sock, timeout=self.connect_timeout)  # UntrustedPath: another user's
        try:
            hello = conn.call(
                protocol.HELLO,
                {"protocol": protocol.PROTOCOL_VERSION, "role": "publisher", "client": self.client_name},
            )
            problem = trust.hello_home_problem(hello, self.home, sock)
            if problem is not None:  # one home, one hub: never publish into another home
                raise trust.ForeignHub(problem)
        except BaseException:
            conn.close()
            raise
        limit = hello.get("frame_limit") if isinstance(hello, dict) else None
        ok = isinstance(limit, int) and limit > 1024
        self._frame_limit = int(limit) if ok else protocol.DEFAULT_FRAME_LIMIT  # type: ignore[arg-type]
        conn.settimeout(self.request_timeout)
        with self._cond:
            self._conn = conn
        self.connects += 1
        self.hub_refused = self._logged_refusal = None
        log.info("publisher connected to %s", sock)

    def _drop_conn(self) -> None:
        with self._cond:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _send(self, batch: list[tuple[int, bytes]]) -> list[Any]:
        assert self._conn is not None
        conn = self._conn
        payload = b'{"commands":[' + b",".join(ln for _, ln in batch) + b"]}"
        result = conn.call_raw(protocol.PUBLISH, payload)
        self.sent_batches += 1
        results = result.get("results") if isinstance(result, dict) else None
        if not isinstance(results, list):
            raise protocol.RpcError(protocol.INTERNAL_ERROR, f"malformed publish result: {result!r}")
        return results

    def _resolve(
        self,
        batch: list[tuple[int, bytes]],
        results: list[Any] | None,
        failure: protocol.RpcError | None = None,
    ) -> None:
        """Mark the batch done: acknowledged, or failed for good (never retried)."""
        failed: list[dict[str, Any]] = []
        if failure is not None:
            failed = [_refusal(lsn, ln, failure.to_dict()) for lsn, ln in batch]
        else:
            assert results is not None
            if len(results) != len(batch):
                log.warning("hub returned %d results for %d commands", len(results), len(batch))
            for (lsn, ln), res in zip(batch, results, strict=False):
                if isinstance(res, dict) and "error" in res:
                    failed.append(_refusal(lsn, ln, res["error"]))
            for lsn, ln in batch[len(results) :]:  # no result at all: not stored, say so
                failed.append(_refusal(lsn, ln, {"code": "internal", "message": "the hub sent no result"}))
        for item in failed:
            err = item["error"] if isinstance(item["error"], dict) else {}
            log.warning(
                "hub refused command %d (%s): %s: %s",
                item["cid"],
                item["op"],
                err.get("code"),
                err.get("message"),
            )
        with self._cond:
            last = batch[-1][0]
            self._acked = max(self._acked, last)
            while self._acked + 1 in self._dropped_lsns:  # dropped commands count as resolved
                self._dropped_lsns.discard(self._acked + 1)
                self._acked += 1
            if self._inflight_spool_end is not None and self._spool is not None:
                self._advance_spool_locked(self._inflight_spool_end)
                self._inflight_spool_end = None
            while self._queue and self._queue[0][0] <= self._acked:
                self._queue.popleft()
            self.acked_commands += len(batch)
            self.errors += len(failed)
            self.error_log.extend(failed)
            for item in failed:
                self._add_refusal_locked(item)
            self._cond.notify_all()
        self._report_refusals(failed)

    def _pause(self, seconds: float) -> None:
        with self._cond:
            if not self._stopping:
                self._cond.wait(seconds)

    def _run(self) -> None:
        while True:
            try:
                self._loop()
                return
            except Exception:  # a bug here must not silently stop delivery
                log.exception("publisher sender failed; restarting it")
                self._drop_conn()
                self._pause(0.5)

    def _loop(self) -> None:
        backoff = 0.05
        while True:
            with self._cond:
                while not self._stopping and not self._has_work_locked():
                    self._cond.wait()
                if self._stopping:
                    return
            if self._conn is None:
                try:
                    self._connect()  # backoff is reset by a batch that gets through, not here:
                    self._last_connect_failed = False  # a hub that accepts, then drops, is throttled
                except (OSError, protocol.RpcError) as exc:
                    if isinstance(exc, trust.UntrustedPath | trust.ForeignHub):
                        self.hub_refused = str(exc)
                        if self._logged_refusal != str(exc):  # one line per distinct reason
                            log.error("not publishing there: %s; spooling to %s", exc, self.spool_dir)
                            self._logged_refusal = str(exc)
                    elif not self._last_connect_failed:
                        log.info("no hub on %s (%s); spooling to %s", self.socket_path, exc, self.spool_dir)
                    self._last_connect_failed = True
                    with self._cond:
                        self._spill_locked()
                    self._pause(backoff)
                    backoff = min(backoff * 2, self.max_backoff)
                    continue
            batch = self._next_batch()
            if not batch or self._stopping:
                continue
            size = sum(len(ln) for _, ln in batch)
            if len(batch) == 1 and size + FRAME_OVERHEAD > self._frame_limit:
                self._resolve(
                    batch,
                    None,
                    protocol.app_error(
                        "invalid_argument", f"command is {size} bytes, above the hub frame limit"
                    ),
                )
                continue
            try:
                results = self._send(batch)
            except (OSError, HubUnavailable):
                log.info("hub connection lost; will resend %d commands", len(batch))
                self._drop_conn()
                with self._cond:
                    self._spill_locked()
                self._pause(backoff)
                backoff = min(backoff * 2, self.max_backoff)
                continue
            except protocol.RpcError as exc:
                if exc.app_code == "internal":  # the hub's fault (disk, shutdown): retry later
                    log.warning("hub could not apply a batch (%s); retrying", exc.message)
                    self._drop_conn()
                    with self._cond:
                        self._spill_locked()
                    self._pause(backoff)
                    backoff = min(backoff * 2, self.max_backoff)
                elif len(batch) > 1:  # find the bad command: resend one per request
                    self._split_until = batch[-1][0]
                else:
                    self._resolve(batch, None, exc)
                continue
            backoff = 0.05
            self._resolve(batch, results)
