"""The caller's side of the publisher: encode, check, number and queue a command, no I/O.

The in-memory queue is bounded (``max_queue`` commands, ``max_queue_bytes``); a call that
finds it full waits for the spooler or the hub (``max_block`` at most) and, only when neither
takes anything, drops the command and reports it like a refusal.
"""

from __future__ import annotations

import time
from typing import Any

from memviewer.publisher.state import FRAME_OVERHEAD, Shared
from memviewer.wire import protocol


class CommandQueue:
    """Queues commands for the spooler and the sender; remembers the episodes left open."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.open_episodes: dict[str, str | None] = {}  # started here, not ended: id -> session

    def put(self, op: str, args: dict[str, Any], *, keep_none: bool = False) -> None:
        """Queue ``op`` with ``args`` (``ts`` stamped now unless given; ``None`` values left
        out unless ``keep_none``). ValueError for a command the hub could never take."""
        s = self.shared
        if s.closed:
            raise RuntimeError("this Publisher is closed")
        body, cmd = _encode(op, args, keep_none)
        dropped_item: dict[str, Any] | None = None
        with s.cond:
            room = not self._full_locked(len(body)) or self._wait_for_room_locked(len(body))
            self._track_locked(op, args)
            lsn = s.next_lsn
            s.next_lsn += 1
            if room:
                line = b'{"cid":%d,' % lsn + body[1:]
                s.mem.append((lsn, line, time.monotonic()))
                s.mem_bytes += len(line)
                n = len(s.mem)
                if n == 1 or n == s.opts.spill_at or s.mem_bytes >= s.opts.spill_bytes:
                    s.spool_cond.notify()  # start the sync timer, or spill now
            else:  # neither the disk nor the hub takes it: report it, never block the agent for good
                dropped_item = self._drop_locked(lsn, op, cmd)
            s.cond.notify_all()
        if dropped_item is not None:
            s.report_refusals([dropped_item])

    def _drop_locked(self, lsn: int, op: str, cmd: dict[str, Any]) -> dict[str, Any]:
        s = self.shared
        s.dropped_lsns.add(lsn)
        s.dropped += 1
        s.errors += 1
        item = {
            "cid": lsn,
            "op": op,
            "error": {
                "code": "internal",
                "message": "dropped: queue full and spool not writable"
                if s.spool_failed
                else f"dropped: queue full for {s.opts.max_block:g} s",
            },
            "command": cmd,
        }
        s.error_log.append(item)
        s.add_refusal_locked(item)
        return item

    def _full_locked(self, size: int) -> bool:
        s = self.shared
        return bool(s.mem) and (len(s.mem) >= s.opts.max_queue or s.mem_bytes + size > s.opts.max_queue_bytes)

    def _wait_for_room_locked(self, size: int) -> bool:
        """The in-memory queue is full: wait (``max_block`` at most) while the spooler moves it
        to disk or the hub takes it. False when neither can (drop, and say so)."""
        s = self.shared
        start = time.monotonic()
        deadline = start + s.opts.max_block
        s.waiting_callers += 1
        s.caller_waits += 1
        s.spool_cond.notify()
        try:
            while self._full_locked(size):
                if s.spool_failed and s.conn is None:
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                s.cond.wait(left)
            return True
        finally:
            s.waiting_callers -= 1
            s.caller_wait_max = max(s.caller_wait_max, time.monotonic() - start)

    def _track_locked(self, op: str, args: dict[str, Any]) -> None:
        """Remember the episodes this agent has open (``close()`` ends exactly those)."""
        episodes = self.open_episodes
        if op == "start_episode" and isinstance(args.get("episode_id"), str):
            episodes[args["episode_id"]] = args.get("session_id")
        elif op in ("finalize_episode", "abandon_episode"):
            episodes.pop(args.get("episode_id"), None)  # type: ignore[arg-type]
        elif op == "close_session":
            sid = args.get("session_id")
            for eid in [e for e, owner in episodes.items() if owner == sid]:
                del episodes[eid]
        elif op == "shutdown" and isinstance(args.get("episode_ids"), list):
            for eid in args["episode_ids"]:
                episodes.pop(eid, None)


def _encode(op: str, args: dict[str, Any], keep_none: bool) -> tuple[bytes, dict[str, Any]]:
    """The command's JSON line (without its cid) and the command; ValueError for one that is
    not JSON, nested deeper than the hub reads, or above the hub's frame limit."""
    if args.get("ts") is None:
        args["ts"] = time.time()
    cmd = {"op": op, **{k: v for k, v in args.items() if keep_none or v is not None}}
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
    return body, cmd
