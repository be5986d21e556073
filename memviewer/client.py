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
(``ValueError`` at call time), appends the encoded command to a bounded
in-memory queue and returns: no call does file or socket I/O on the caller's
thread. Two background threads do it all:

* the **sender** owns the socket: it sends the oldest unacknowledged commands
  in ``publish`` batches and counts a command as done only when the hub
  acknowledged it (committed to SQLite);
* the **spooler** owns the spool (``<home>/spool``, segment files of one JSON
  line per command, see :mod:`memviewer.wire.spool_segments`): every command
  not acknowledged ``sync_interval`` seconds (default 0.05) after it was
  queued is appended and fsync'd in one group write, whether or not a hub
  answers; while no hub answers, or when the queue is half full, at once.

**The guarantee** (``sync_interval=0.05``): a command is on disk, fsync'd in
the spool or committed by the hub, at most ``sync_interval`` plus one group
write after the call that queued it returned (``stats()["durable_lag_max_s"]``
is the worst this publisher saw); a process kill after that loses nothing.
``flush()`` returning True means every command queued before it was stored
by the hub. ``sync_interval=None`` spools only while no hub answers or the
queue fills: faster, but a SIGKILL loses what the hub had not acknowledged.

A segment is deleted once every command in it was acknowledged (the one being
appended to is truncated), so the spool shrinks as it drains. The queue holds
at most ``max_queue`` commands / ``max_queue_bytes``; a call finding it full
waits for the spooler (a few ms, ``max_block`` at most) and, only when neither
the disk nor the hub takes anything, drops the command and reports it like a
refusal (never silently). ``close()`` has the spooler leave what is still unsent
in the spool (no I/O on the caller's thread there either; it waits for the
spooler, ``spool_timeout``), where a hub picks it up when it starts, or the
next Publisher on that spool folder replays it when it connects; the ids make
replays idempotent.

A hub stopping or restarting never closes the agent's episodes; the agent's own
end does: ``close()`` (also run at exit) sends one ``shutdown`` command naming
the episodes this publisher started and did not finalize, and the hub abandons
those. A command the hub refuses (say ``conflict``) is never retried and never
silent: it is logged, kept in ``refusals`` (``take_refusals()`` empties it),
passed to ``on_refusal``, and ``flush()`` returns False until it was taken. An
answer meaning "not now" (``RETRY_LATER_CODES``, or ``retry: true``) is not a
refusal: the command is resent after a back-off.

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
from memviewer.wire import protocol, spool, trust
from memviewer.wire.spool import cid_of
from memviewer.wire.spool_segments import Segment, split_lines
from memviewer.wire.syncclient import HubUnavailable, RpcConnection

__all__ = ["Publisher", "RETRY_LATER_CODES", "ROLES", "retry_later"]

log = logging.getLogger("memviewer.client")

ROLES = ("user", "assistant", "tool", "system")
FRAME_OVERHEAD = 128  # bytes around the command list in a publish frame
MAX_REFUSALS_KEPT = 10_000  # refusals beyond this are counted (``refused``), not kept
HOME_LOCK = "hub.owner"  # in the home: the socket of the hub serving it (see wire.probe)
WRITE_CHUNK = 1 << 20  # the spooler frees queue memory after each write of about this many bytes
READ_AT_LEAST = protocol.DEFAULT_FRAME_LIMIT + 4096  # one read always holds a whole command line

# The one table of "not now" answers: the hub is alive but cannot take the command yet (its
# write queue is full, the store is briefly unavailable). Such commands are kept and resent
# with back-off, never reported as refused. An error with ``retry: true`` (in the error or in
# its ``data``) is the same; a whole request answered ``internal`` (hub shutting down, disk
# trouble) too. Any other code is the command's own fault: a refusal, never resent.
RETRY_LATER_CODES = frozenset(
    {"busy", "overloaded", "unavailable", "rate_limited", "too_many_requests", "try_again", "retry_later"}
)
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


def retry_later(error: Any, *, whole_request: bool = False) -> bool:
    """True when ``error`` (an ``RpcError`` or an error object) means "resend later"."""
    if isinstance(error, protocol.RpcError):
        code: Any = error.app_code
        data: Any = error.data
        flag = False
    elif isinstance(error, dict):
        data = error.get("data") if isinstance(error.get("data"), dict) else {}
        code = error.get("code") if isinstance(error.get("code"), str) else data.get("code")
        flag = error.get("retry") is True
    else:
        return False
    if flag or (isinstance(data, dict) and data.get("retry") is True) or code in RETRY_LATER_CODES:
        return True
    return whole_request and code == "internal"


def _check_str(name: str, value: Any, *, empty_ok: bool = True) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, not {type(value).__name__}")
    if not empty_ok and not value.strip():
        raise ValueError(f"{name} must not be empty")


def _check_dict(name: str, value: Any) -> None:
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"{name} must be a dict or None")


class Publisher:
    """Asynchronous publishing of sessions, episodes and turns to the hub, on disk within
    ``sync_interval`` (see the module docstring for the exact guarantee)."""

    def __init__(
        self,
        socket_path: str | Path | None = None,
        spool_dir: str | Path | None = None,
        *,
        home: str | Path | None = None,
        on_refusal: Callable[[dict[str, Any]], None] | None = None,
        max_batch: int = 500,
        max_queue: int = 10_000,
        max_queue_bytes: int = 16 * 1024 * 1024,
        sync_interval: float | None = 0.05,
        segment_bytes: int = 4 * 1024 * 1024,
        max_block: float = 5.0,
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
        self.max_queue_bytes = max(1, int(max_queue_bytes))
        if sync_interval is not None and not (sync_interval >= 0):  # also refuses nan
            raise ValueError("sync_interval must be a number of seconds >= 0, or None")
        self.sync_interval = sync_interval
        self.segment_bytes = max(1, int(segment_bytes))
        self.max_block = max(0.0, float(max_block))
        self.client_name = client_name
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.max_backoff = max_backoff

        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # callers, flush and the sender wait on this one
        self._spool_cond = threading.Condition(lock)  # the spooler waits on this one
        # Commands not yet in the spool, oldest first: (lsn, command line, time.monotonic() queued).
        self._mem: deque[tuple[int, bytes, float]] = deque()
        self._mem_bytes = 0
        self._segments: list[Segment] = []  # the spool, oldest first; the last one is appended to
        self._next_lsn = 1
        self._acked = 0  # every lsn <= this one is resolved (acknowledged, or failed for good)
        self._inflight: tuple[Segment, int] | None = None  # segment and offset after the batch in flight
        self._split_until = 0  # send one command per request up to this lsn (isolate a bad one)
        self._conn: RpcConnection | None = None
        self._frame_limit = protocol.DEFAULT_FRAME_LIMIT
        self._stopping = False  # close(): the sender stops
        self._handover = False  # close(): the spooler writes what is left, then stops
        self._spool_done = False
        self._kept_files: list[Path] = []
        self._closed = False
        self._last_connect_failed = False
        self._hub_down = False  # the last connect or send failed: spool everything at once
        self._waiting_callers = 0  # callers waiting for room in the in-memory queue
        self._spool_retry_at = 0.0  # after a spool write failed: when to try again
        self._adopt_pending = False  # replay dead publishers' spool files at the next chance
        self._inflight_queued_at: float | None = None  # when the batch in flight (from memory) was queued

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
        self.spool_writes = 0
        self.spool_syncs = 0
        self.adopted_commands = 0
        self.adopted_files = 0
        self.caller_waits = 0
        self.caller_wait_max = 0.0
        self.durable_lag_max = 0.0  # worst time from a call returning to its command being on disk
        self.not_durable_at_close = 0  # commands close() left to the spooler unwritten (its wait expired)
        self.connects = 0

        _open_publishers.add(self)
        self._thread = threading.Thread(target=self._run, name="memviewer-publisher", daemon=True)
        self._spooler = threading.Thread(target=self._run_spooler, name="memviewer-spooler", daemon=True)
        self._thread.start()
        self._spooler.start()

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

    def record_llm_call(
        self,
        input: list[dict[str, Any]] | str,
        output: list[dict[str, Any]] | str | None = None,
        *,
        session_id: str | None = None,
        episode_id: str | None = None,
        model: str | None = None,
        provider: str | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        latency_ms: float | None = None,
        recall_ids: list[str] | None = None,
        in_prompt: list[str] | None = None,
        context_window: int | None = None,
        meta: dict[str, Any] | None = None,
        call_id: str | None = None,
        ts: float | None = None,
    ) -> str:
        """Queue one LLM call: the messages the model was sent (``input``, in order: ``{"role",
        "content"}`` or the OpenTelemetry ``{"role", "parts"}`` shape) and what it answered.

        ``recall_ids`` are the recalls (``record_recall``) whose results fed this prompt;
        ``in_prompt`` the turn or document ids the agent put into it (else memviewer matches
        recalled items by text). ``ts`` is when the request was sent. Input that is not a
        list of messages is stored as received and flagged, never refused. Returns the call id.
        """
        if not isinstance(input, list | str):
            raise ValueError("input must be a list of messages (or their JSON text)")
        if output is not None and not isinstance(output, list | str):
            raise ValueError("output must be a list of messages, their JSON text, or None")
        for name, value in (
            ("session_id", session_id),
            ("episode_id", episode_id),
            ("model", model),
            ("provider", provider),
        ):
            if value is not None:
                _check_str(name, value, empty_ok=False)
        for name, number in (
            ("input_tokens", input_tokens),
            ("output_tokens", output_tokens),
            ("context_window", context_window),
        ):
            if number is not None and (isinstance(number, bool) or not isinstance(number, int) or number < 0):
                raise ValueError(f"{name} must be a non-negative int or None")
        if latency_ms is not None and (
            isinstance(latency_ms, bool) or not isinstance(latency_ms, int | float)
        ):
            raise ValueError("latency_ms must be a number or None")
        for name, ids in (("recall_ids", recall_ids), ("in_prompt", in_prompt)):
            if ids is not None and (
                not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids)
            ):
                raise ValueError(f"{name} must be a list of ids or None")
        _check_dict("meta", meta)
        cid = call_id or new_id("c-")
        usage = {
            k: v
            for k, v in (("input_tokens", input_tokens), ("output_tokens", output_tokens))
            if v is not None
        }
        self._enqueue(
            "record_llm_call",
            call_id=cid,
            input=input,
            output=output,
            session_id=session_id,
            episode_id=episode_id,
            model=model,
            provider=provider,
            usage=usage or None,
            latency_ms=latency_ms,
            recall_ids=recall_ids,
            in_prompt=in_prompt,
            context_window=context_window,
            meta=meta,
            ts=ts,
        )
        return cid

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

    def close(self, timeout: float = 5.0, *, end_episodes: bool = True, spool_timeout: float = 10.0) -> bool:
        """The agent's end: abandon its open episodes, flush (bounded), stop the sender, and
        have the spooler leave anything unsent in the spool (the next hub or publisher
        applies it). True when everything was stored by the hub.

        ``end_episodes``: send one ``shutdown`` command naming the episodes this
        publisher started and did not end (False: leave them open, e.g. another
        publisher of the same agent carries on). ``timeout`` bounds the wait for the hub;
        when the hub is known to be unreachable it waits at most one second: the commands
        are safe in the spool either way.

        Like the publish calls, ``close`` does no file I/O on the caller's thread: the
        spooler thread writes and fsyncs what is left, and tidies the spool files, while
        the caller waits for it up to ``spool_timeout`` seconds. If that wait expires, the
        commands not yet on disk are named in a warning (``memviewer.client`` logger) and
        counted in ``stats()["not_durable_at_close"]``; the spooler goes on writing them
        (lost only if the process ends first), and ``close`` returns False.
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
            self._stopping = True  # the sender stops; the spooler carries on until the handover
            self._cond.notify_all()
            conn = self._conn
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=10.0)
        self._drop_conn()
        with self._cond:  # the rest is the spooler's: no new command from here on
            self._closed = True
            self._handover = True
            self._spool_cond.notify_all()
            deadline = time.monotonic() + max(0.0, spool_timeout)
            while not self._spool_done:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            done, kept, stored = self._spool_done, self._kept_files, self._acked >= self._next_lsn - 1
            pending = [lsn for lsn, _ln, _t in self._mem if lsn > self._acked] if not done else []
            self.not_durable_at_close = len(pending)
        if done:
            self._spooler.join(timeout=1.0)
        _open_publishers.discard(self)
        if pending:
            log.warning(
                "publisher closed after %.1f s with %d commands (cid %d..%d) not yet on disk: "
                "the spooler is still writing them to %s (lost if the process ends first)",
                spool_timeout,
                len(pending),
                pending[0],
                pending[-1],
                self.spool_dir,
            )
        if kept:
            log.warning(
                "publisher closed before a hub stored every command: they are kept in %s, and the "
                "next hub on this home (or the next publisher that reaches one) replays them",
                ", ".join(map(str, kept)),
            )
        return ok and done and stored

    def _spool_remainder(self) -> None:
        """Spooler thread, at ``close``: exactly the unacknowledged commands stay on disk."""
        with self._cond:
            leftover = [(lsn, ln) for lsn, ln, _ in self._mem if lsn > self._acked]
            segments = list(self._segments)
            acked = self._acked
        try:
            kept = self._leave_spool(segments, leftover, acked)
        except Exception:  # a bug: say so, and never leave close() waiting for a retry loop
            log.exception(
                "publisher spooler failed while closing; the spool in %s is as it was", self.spool_dir
            )
            kept = [seg.path for seg in segments]
        with self._cond:
            self._mem.clear()
            self._mem_bytes = 0
            self._segments = []
            self._kept_files = kept
            self._spool_done = True
            self._cond.notify_all()

    def _leave_spool(
        self, segments: list[Segment], leftover: list[tuple[int, bytes]], acked: int
    ) -> list[Path]:
        """``close``: exactly the unacknowledged commands stay on disk, in order; returns the files."""
        if leftover:
            try:
                seg = segments[-1] if segments and not segments[-1].sealed else None
                if seg is None:
                    seg = Segment(self.spool_dir)
                    segments.append(seg)
                nbytes = seg.write(leftover)
                seg.record(leftover, nbytes)
                seg.sync()
                self.spooled_commands += len(leftover)
            except OSError as exc:
                log.error(
                    "publisher closed: %d unsent commands lost, the spool is not writable (%s)",
                    len(leftover),
                    exc,
                )
                self.dropped += len(leftover)
                self.errors += len(leftover)
        kept: list[Path] = []
        for seg in segments:
            try:
                if seg.last <= acked:
                    seg.remove()
                elif seg.first is not None and seg.first > acked and not seg.sealed:
                    seg.release()  # nothing in it was acknowledged: leave it as it is
                    kept.append(seg.path)
                else:  # an acknowledged prefix (or a torn tail): keep exactly the rest
                    lines, _ = split_lines(seg.pread(0, seg.length))
                    path = seg.rewrite([ln for ln in lines if (cid_of(ln) or 0) > acked])
                    if path is not None:
                        kept.append(path)
            except OSError as exc:
                log.error("publisher closed: could not tidy the spool file %s (%s)", seg.path, exc)
                seg.release()
                kept.append(seg.path)
        return kept

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def stats(self) -> dict[str, Any]:
        with self._cond:
            active = self._segments[-1] if self._segments else None
            return {
                "connected": self._conn is not None,
                "queued": len(self._mem),
                "queued_bytes": self._mem_bytes,
                "spool_bytes_pending": sum(s.length - s.pos for s in self._segments if s.last > self._acked),
                "spool_bytes": sum(s.length for s in self._segments),
                "spool_files": len(self._segments),
                "spool_file": str(active.path) if active else None,
                "enqueued": self._next_lsn - 1,
                "acked": self._acked,
                "acked_commands": self.acked_commands,
                "sent_batches": self.sent_batches,
                "spooled_commands": self.spooled_commands,
                "spool_writes": self.spool_writes,
                "spool_syncs": self.spool_syncs,
                "sync_interval": self.sync_interval,
                "durable_lag_max_s": self.durable_lag_max,
                "not_durable_at_close": self.not_durable_at_close,
                "caller_waits": self.caller_waits,
                "caller_wait_max_s": self.caller_wait_max,
                "adopted_files": self.adopted_files,
                "adopted_commands": self.adopted_commands,
                "errors": self.errors,
                "refused": self.refused,
                "refusals_untaken": len(self.refusals),
                "open_episodes": len(self._open_episodes),
                "hub_refused": self.hub_refused,
                "connects": self.connects,
                "dropped": self.dropped,
            }

    # -- internals: the caller's side (no I/O) ------------------------------------------
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
        dropped_item: dict[str, Any] | None = None
        with self._cond:
            room = not self._full_locked(len(body)) or self._wait_for_room_locked(len(body))
            self._track_locked(op, args)
            lsn = self._next_lsn
            self._next_lsn += 1
            if room:
                line = b'{"cid":%d,' % lsn + body[1:]
                self._mem.append((lsn, line, time.monotonic()))
                self._mem_bytes += len(line)
                n = len(self._mem)
                if n == 1 or n == self._spill_at or self._mem_bytes >= self._spill_bytes:
                    self._spool_cond.notify()  # start the sync timer, or spill now
            else:  # neither the disk nor the hub takes it: report it, never block the agent for good
                self._dropped_lsns.add(lsn)
                self.dropped += 1
                self.errors += 1
                dropped_item = {
                    "cid": lsn,
                    "op": op,
                    "error": {
                        "code": "internal",
                        "message": "dropped: queue full and spool not writable"
                        if self._spool_failed
                        else f"dropped: queue full for {self.max_block:g} s",
                    },
                    "command": cmd,
                }
                self.error_log.append(dropped_item)
                self._add_refusal_locked(dropped_item)
            self._cond.notify_all()
        if dropped_item is not None:
            self._report_refusals([dropped_item])

    @property
    def _spill_at(self) -> int:
        return max(1, self.max_queue // 2)

    @property
    def _spill_bytes(self) -> int:
        return max(1, self.max_queue_bytes // 2)

    def _full_locked(self, size: int) -> bool:
        return bool(self._mem) and (
            len(self._mem) >= self.max_queue or self._mem_bytes + size > self.max_queue_bytes
        )

    def _wait_for_room_locked(self, size: int) -> bool:
        """The in-memory queue is full: wait (``max_block`` at most) while the spooler moves it
        to disk or the hub takes it. False when neither can (drop, and say so)."""
        start = time.monotonic()
        deadline = start + self.max_block
        self._waiting_callers += 1
        self.caller_waits += 1
        self._spool_cond.notify()
        try:
            while self._full_locked(size):
                if self._spool_failed and self._conn is None:
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True
        finally:
            self._waiting_callers -= 1
            self.caller_wait_max = max(self.caller_wait_max, time.monotonic() - start)

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

    # -- internals: the spooler thread (owns the spool files) ---------------------------
    def _run_spooler(self) -> None:
        while True:
            try:
                self._spool_loop()
                return
            except Exception:  # a bug here must not silently stop spooling
                log.exception("publisher spooler failed; restarting it")
                self._pause(0.5)

    def _spool_wait_locked(self) -> float | None:
        """0 when the in-memory queue is due for the spool now, else seconds until it is (None: never)."""
        if not self._mem:
            return None
        now = time.monotonic()
        if self._spool_failed and now < self._spool_retry_at:
            return self._spool_retry_at - now
        if (
            self._hub_down
            or self._waiting_callers
            or len(self._mem) >= self._spill_at
            or self._mem_bytes >= self._spill_bytes
        ):
            return 0.0
        if self.sync_interval is None:
            return None
        return max(0.0, self._mem[0][2] + self.sync_interval - now)

    def _compactable_locked(self) -> bool:
        return any(s.length and s.last <= self._acked for s in self._segments)

    def _spool_loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._handover:
                        break
                    compact = self._compactable_locked()
                    wait = self._spool_wait_locked()
                    if compact or wait == 0.0:
                        break
                    self._spool_cond.wait(wait)
                if self._handover:
                    done = self._spool_done
                else:
                    count = len(self._mem) if wait == 0.0 else 0
            if self._handover:
                if not done:
                    self._spool_remainder()
                return
            if compact:
                self._compact()
            if count:
                self._spool_due(count)

    def _compact(self) -> None:
        """Delete the segments whose every command was acknowledged; truncate the active one."""
        with self._cond:
            active = self._segments[-1] if self._segments else None
            done = [s for s in self._segments if s.length and s.last <= self._acked]
            removing = [s for s in done if s is not active]
            resetting = active if active is not None and active in done else None
            for seg in removing:
                self._segments.remove(seg)
        for seg in removing:
            seg.remove()
        if resetting is not None:
            try:
                resetting.reset()
            except OSError as exc:
                log.warning("cannot truncate the spool file %s (%s); starting a new one", resetting.path, exc)
                with self._cond:
                    resetting.sealed = True
                    if resetting.last <= self._acked and resetting in self._segments:
                        self._segments.remove(resetting)
                resetting.remove()
                return
            with self._cond:
                resetting.forget()

    def _spool_due(self, count: int) -> None:
        """Move the oldest ``count`` queued commands (those not acknowledged meanwhile) to the
        spool in chunks, then fsync once: one group commit."""
        remaining = count
        written: list[Segment] = []
        oldest: float | None = None
        while remaining > 0:
            with self._cond:
                seg = self._segments[-1] if self._segments else None
                fresh = seg is None or seg.sealed or seg.length >= self.segment_bytes
                room = min(WRITE_CHUNK, self.segment_bytes - (0 if fresh or seg is None else seg.length))
                take: list[tuple[int, bytes]] = []
                nbytes = scanned = last_scanned = 0
                for lsn, ln, queued_at in self._mem:
                    if scanned >= remaining or (take and nbytes + len(ln) + 1 > room):
                        break
                    scanned += 1
                    last_scanned = lsn
                    if oldest is None:
                        oldest = queued_at
                    if lsn > self._acked:
                        take.append((lsn, ln))
                        nbytes += len(ln) + 1
                if not scanned:
                    break
            if take:
                new: Segment | None = None
                try:
                    if fresh:
                        seg = new = Segment(self.spool_dir)
                    assert seg is not None
                    n = seg.write(take)
                except OSError as exc:
                    if new is not None:  # never registered: nothing else refers to it
                        new.remove()
                    elif not fresh and seg is not None:
                        seg.undo_torn_write()
                    self._spool_failure(exc)
                    return
            with self._cond:
                if take:
                    assert seg is not None
                    if fresh:
                        self._segments.append(seg)
                    seg.record(take, n)
                    if seg not in written:
                        written.append(seg)
                    self.spooled_commands += len(take)
                    self.spool_writes += 1
                while self._mem and self._mem[0][0] <= last_scanned:
                    self._mem_bytes -= len(self._mem.popleft()[1])
                self._cond.notify_all()  # room for waiting callers; work for the sender
            remaining -= scanned
        if not written:
            return
        try:
            for seg in written:
                seg.sync()
        except OSError as exc:
            self._spool_failure(exc)
            return
        with self._cond:
            self.spool_syncs += 1
            if self._spool_failed:
                log.info("the spool in %s is writable again", self.spool_dir)
            self._spool_failed = False
            if oldest is not None:
                self.durable_lag_max = max(self.durable_lag_max, time.monotonic() - oldest)

    def _spool_failure(self, exc: OSError) -> None:
        with self._cond:
            if not self._spool_failed:
                log.error(
                    "cannot write the spool in %s (%s); keeping commands in memory", self.spool_dir, exc
                )
            self._spool_failed = True
            self._spool_retry_at = time.monotonic() + 1.0
            self._cond.notify_all()  # a waiting caller may have to drop now

    # -- internals: the sender thread (owns the socket) ----------------------------------
    def _has_work_locked(self) -> bool:
        return bool(self._mem) or self._adopt_pending or any(s.last > self._acked for s in self._segments)

    def _next_batch(self) -> list[tuple[int, bytes]]:
        """The oldest unacknowledged commands: the spool first, then the in-memory queue."""
        limit = 1 if self._acked < self._split_until else self.max_batch
        budget = self._frame_limit - FRAME_OVERHEAD
        with self._cond:
            self._inflight = None
            self._inflight_queued_at = None
            acked = self._acked
            seg = next((s for s in self._segments if s.last > acked), None)
            if seg is None:
                batch: list[tuple[int, bytes]] = []
                size = 0
                for lsn, ln, queued_at in self._mem:
                    if len(batch) >= limit or (batch and size + len(ln) + 1 > budget):
                        break
                    if lsn <= acked:
                        continue
                    if not batch:
                        self._inflight_queued_at = queued_at
                    batch.append((lsn, ln))
                    size += len(ln) + 1
                return batch
            start = seg.start_for(acked + 1)
            end_of_data = seg.length
        # Read outside the lock: only this thread advances ``_acked``, so the spooler cannot
        # remove or truncate a segment that still holds unacknowledged commands.
        data = seg.pread(start, min(end_of_data - start, max(budget, READ_AT_LEAST)))
        lines, ends = split_lines(data)
        batch, size, end = [], 0, start
        for ln, stop in zip(lines, ends, strict=True):
            cid = cid_of(ln)
            if cid is None or cid <= acked:  # acknowledged straight from memory
                end = start + stop
                continue
            if len(batch) >= limit or (batch and size + len(ln) + 1 > budget):
                break
            batch.append((cid, ln))
            size += len(ln) + 1
            end = start + stop
        with self._cond:
            if not batch:
                seg.pos = max(seg.pos, end if lines else end_of_data)
                return []
            self._inflight = (seg, end)
        return batch

    def _send(self, lines: list[bytes]) -> list[Any]:
        assert self._conn is not None
        conn = self._conn
        payload = b'{"commands":[' + b",".join(lines) + b"]}"
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
    ) -> bool:
        """Mark the batch done: acknowledged, or failed for good (never retried).

        A command the hub answered "not now" (``retry_later``) and every one after it stay
        unacknowledged, to be resent after a back-off; returns True in that case.
        """
        failed: list[dict[str, Any]] = []
        held_back = False
        if failure is not None:
            failed = [_refusal(lsn, ln, failure.to_dict()) for lsn, ln in batch]
        else:
            assert results is not None
            if len(results) != len(batch):
                log.warning("hub returned %d results for %d commands", len(results), len(batch))
            for i, res in enumerate(results[: len(batch)]):
                if isinstance(res, dict) and retry_later(res.get("error")):
                    held_back = True
                    batch, results = batch[:i], results[:i]
                    break
            for (lsn, ln), res in zip(batch, results, strict=False):
                if isinstance(res, dict) and "error" in res:
                    failed.append(_refusal(lsn, ln, res["error"]))
            if not held_back:
                for lsn, ln in batch[len(results) :]:  # no result at all: not stored, say so
                    failed.append(
                        _refusal(lsn, ln, {"code": "internal", "message": "the hub sent no result"})
                    )
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
            if batch:
                self._acked = max(self._acked, batch[-1][0])
            while self._acked + 1 in self._dropped_lsns:  # dropped commands count as resolved
                self._dropped_lsns.discard(self._acked + 1)
                self._acked += 1
            if self._inflight is not None and not held_back:
                seg, end = self._inflight
                seg.pos = max(seg.pos, end)
            if self._inflight_queued_at is not None and batch:  # durable in the hub's store now
                self.durable_lag_max = max(self.durable_lag_max, time.monotonic() - self._inflight_queued_at)
            self._inflight = None
            self._inflight_queued_at = None
            while self._mem and self._mem[0][0] <= self._acked:
                self._mem_bytes -= len(self._mem.popleft()[1])
            self.acked_commands += len(batch)
            self.errors += len(failed)
            self.error_log.extend(failed)
            for item in failed:
                self._add_refusal_locked(item)
            if self._segments and self._segments[0].length and self._segments[0].last <= self._acked:
                self._spool_cond.notify()  # a segment is fully acknowledged: compact
            self._cond.notify_all()
        self._report_refusals(failed)
        return held_back

    def _pause(self, seconds: float) -> None:
        """Sleep ``seconds`` (new commands do not cut a back-off short; ``close`` does)."""
        deadline = time.monotonic() + seconds
        with self._cond:
            while not self._stopping:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)

    def _set_hub_down(self) -> None:
        with self._cond:
            self._hub_down = True
            self._spool_cond.notify()

    def _run(self) -> None:
        with contextlib.suppress(OSError):  # orphans left by dead publishers: connect to replay them
            with self._cond:
                own = {s.path for s in self._segments}
            self._adopt_pending = any(p not in own for p in spool.orphan_files(self.spool_dir))
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
                    self._set_hub_down()
                    self._pause(backoff)
                    backoff = min(backoff * 2, self.max_backoff)
                    continue
                with self._cond:
                    self._hub_down = False
                self._adopt_pending = True
            if self._adopt_pending:
                try:
                    self._adopt_orphans()
                    self._adopt_pending = False
                except (OSError, HubUnavailable, protocol.RpcError) as exc:
                    log.info("replaying a dead publisher's spool failed (%s); retrying", exc)
                    self._drop_conn()
                    self._set_hub_down()
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
                results = self._send([ln for _, ln in batch])
            except (OSError, HubUnavailable):
                log.info("hub connection lost; will resend %d commands", len(batch))
                self._drop_conn()
                self._set_hub_down()
                self._pause(backoff)
                backoff = min(backoff * 2, self.max_backoff)
                continue
            except protocol.RpcError as exc:
                if retry_later(exc, whole_request=True):  # hub busy, shutting down, disk trouble
                    log.warning(
                        "hub could not take a batch now (%s: %s); retrying", exc.app_code, exc.message
                    )
                    if exc.app_code == "internal":
                        self._drop_conn()
                    self._set_hub_down()
                    self._pause(backoff)
                    backoff = min(backoff * 2, self.max_backoff)
                elif len(batch) > 1:  # find the bad command: resend one per request
                    self._split_until = batch[-1][0]
                else:
                    self._resolve(batch, None, exc)
                continue
            if self._resolve(batch, results):
                log.info("hub answered 'not now' for a command; retrying in %.2f s", backoff)
                self._set_hub_down()
                self._pause(backoff)
                backoff = min(backoff * 2, self.max_backoff)
                continue
            with self._cond:
                self._hub_down = False
            backoff = 0.05

    # -- internals: replaying what dead publishers left ---------------------------------
    def _adopt_orphans(self) -> None:
        """Replay the spool files of publishers that are gone (their lock is free), oldest
        first, then delete each: the hub does the same at start and every 30 s, but a
        restarted agent should not wait for that. Same safety rules as the hub's ingestion
        (``spool._claimed``): never a symlink, never another user's or a group/world-writable
        file (renamed ``*.refused``), never a file a live publisher holds."""
        directory = self.spool_dir
        try:
            st = os.lstat(directory)
        except FileNotFoundError:
            return
        if st.st_uid != os.getuid() or st.st_mode & 0o022 or not os.path.isdir(directory):
            log.error("not replaying spool files in %s: not this user's own private folder", directory)
            return
        with self._cond:
            own = {s.path for s in self._segments}
        with spool.ingest_lock(directory) as mine:
            if not mine:  # the hub (or another publisher) is replaying them right now
                return
            for path in spool.orphan_files(directory):
                if path in own or self._stopping:
                    continue
                with spool._claimed(path) as fd:
                    if fd is None:
                        continue
                    count = self._replay_fd(fd, path.name)
                    path.unlink()
                    spool.fsync_dir(directory)
                with self._cond:
                    self.adopted_files += 1
                    self.adopted_commands += count
                log.info("replayed the spool %s of a publisher that is gone: %d commands", path.name, count)

    def _replay_fd(self, fd: int, name: str) -> int:
        budget = self._frame_limit - FRAME_OVERHEAD
        pos, count = 0, 0
        while True:
            lines, pos = spool._read_lines(fd, pos, self.max_batch)
            if not lines:
                return count
            good: list[bytes] = []
            for ln in lines:
                try:
                    json.loads(ln)
                except ValueError:  # a write torn by the crash
                    log.warning("skipping an unreadable line in the spool %s", name)
                    continue
                good.append(ln)
            chunk: list[bytes] = []
            size = 0
            for ln in good:
                if chunk and size + len(ln) + 1 > budget:
                    self._replay_chunk(chunk, name)
                    count += len(chunk)
                    chunk, size = [], 0
                chunk.append(ln)
                size += len(ln) + 1
            if chunk:
                self._replay_chunk(chunk, name)
                count += len(chunk)

    def _replay_chunk(self, lines: list[bytes], name: str) -> None:
        """Send one chunk of an orphan spool; refusals are reported like our own (``cid`` None)."""
        try:
            results: list[Any] = self._send(lines)
        except protocol.RpcError as exc:
            if retry_later(exc, whole_request=True) or len(lines) == 1:
                if retry_later(exc, whole_request=True):
                    raise
                results = [{"error": exc.to_dict()}]
            else:
                for ln in lines:  # isolate the bad one
                    self._replay_chunk([ln], name)
                return
        if any(isinstance(r, dict) and retry_later(r.get("error")) for r in results):
            raise HubUnavailable(None, "the hub answered 'not now'")
        failed = []
        for ln, res in zip(lines, results, strict=False):
            if isinstance(res, dict) and "error" in res:
                item = _refusal(0, ln, res["error"])
                item["cid"] = None
                item["spool_file"] = name
                failed.append(item)
                log.warning("hub refused a command replayed from %s (%s): %s", name, item["op"], res["error"])
        if failed:
            with self._cond:
                self.errors += len(failed)
                self.error_log.extend(failed)
                for item in failed:
                    self._add_refusal_locked(item)
            self._report_refusals(failed)

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
