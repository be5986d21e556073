"""``Publisher``: builds the queue, the spooler and the sender, and answers the agent.

The publishing methods are the builders of :mod:`memviewer.publisher.commands` (same names,
signatures and docstrings), each queuing its command and returning its id. The rest is the
agent's view of delivery: ``flush``, ``take_refusals``, ``open_episodes``, ``close`` (the
handover to the spooler), ``stats`` and the counters. The module docstring of
:mod:`memviewer.client` states the guarantee.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import inspect
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast, overload

from memviewer import paths
from memviewer.publisher import commands
from memviewer.publisher.commands import Command
from memviewer.publisher.queue import CommandQueue
from memviewer.publisher.sender import Sender
from memviewer.publisher.spooler import Spooler
from memviewer.publisher.state import Options, Shared, log
from memviewer.wire import tls

P = ParamSpec("P")
T = TypeVar("T")

_open_publishers: weakref.WeakSet[Publisher] = weakref.WeakSet()


def _close_all_at_exit() -> None:
    for pub in list(_open_publishers):
        with contextlib.suppress(Exception):
            pub.close(timeout=2.0)


atexit.register(_close_all_at_exit)


def _signature(build: Callable[..., Any], returns: type | None) -> inspect.Signature:
    """The builder's signature as a method's: ``self`` first, the id (or nothing) returned."""
    sig = inspect.signature(build)
    me = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sig.replace(parameters=[me, *sig.parameters.values()], return_annotation=returns)


def _returning_id(build: Callable[P, Command]) -> Callable[Concatenate[Publisher, P], str]:
    """A publishing method made of a builder: queue its command, return the id it minted."""

    def method(self: Publisher, /, *args: P.args, **kwargs: P.kwargs) -> str:
        cmd = build(*args, **kwargs)
        self._queue.put(cmd.op, cmd.args)
        assert cmd.id is not None
        return cmd.id

    functools.update_wrapper(method, build)
    method.__signature__ = _signature(build, str)  # type: ignore[attr-defined]
    return method


def _returning_none(build: Callable[P, Command]) -> Callable[Concatenate[Publisher, P], None]:
    """A publishing method made of a builder that mints nothing: queue its command."""

    def method(self: Publisher, /, *args: P.args, **kwargs: P.kwargs) -> None:
        cmd = build(*args, **kwargs)
        self._queue.put(cmd.op, cmd.args)

    functools.update_wrapper(method, build)
    method.__signature__ = _signature(build, None)  # type: ignore[attr-defined]
    return method


class _Of(Generic[T]):
    """An attribute of ``Publisher`` kept on one of its parts (``_shared`` or ``_opts``), so
    ``pub.errors`` or ``pub.sync_interval`` read and write what the threads use."""

    def __init__(self, part: str) -> None:
        self.part = part
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> _Of[T]: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> T: ...
    def __get__(self, obj: object | None, objtype: type | None = None) -> T | _Of[T]:
        if obj is None:
            return self
        return cast("T | _Of[T]", getattr(getattr(obj, self.part), self.name))

    def __set__(self, obj: object, value: T) -> None:
        setattr(getattr(obj, self.part), self.name, value)


class Publisher:
    """Asynchronous publishing of sessions, episodes and turns to the hub, on disk within
    ``sync_interval`` (see :mod:`memviewer.client` for the exact guarantee)."""

    home: _Of[Path] = _Of("_opts")
    socket_path: _Of[Path] = _Of("_opts")
    spool_dir: _Of[Path] = _Of("_opts")
    on_refusal: _Of[Callable[[dict[str, Any]], None] | None] = _Of("_opts")
    max_batch: _Of[int] = _Of("_opts")
    max_queue: _Of[int] = _Of("_opts")
    max_queue_bytes: _Of[int] = _Of("_opts")
    sync_interval: _Of[float | None] = _Of("_opts")
    segment_bytes: _Of[int] = _Of("_opts")
    max_block: _Of[float] = _Of("_opts")
    client_name: _Of[str] = _Of("_opts")
    connect_timeout: _Of[float] = _Of("_opts")
    request_timeout: _Of[float] = _Of("_opts")
    max_backoff: _Of[float] = _Of("_opts")

    errors: _Of[int] = _Of("_shared")
    dropped: _Of[int] = _Of("_shared")
    error_log: _Of[Any] = _Of("_shared")  # deque of the last 200 refusals
    refusals: _Of[list[dict[str, Any]]] = _Of("_shared")  # refused commands not yet taken
    refused: _Of[int] = _Of("_shared")  # every command refused so far (taken or not)
    hub_refused: _Of[str | None] = _Of("_shared")  # why the last hub found was not used
    acked_commands: _Of[int] = _Of("_shared")
    sent_batches: _Of[int] = _Of("_shared")
    spooled_commands: _Of[int] = _Of("_shared")
    spool_writes: _Of[int] = _Of("_shared")
    spool_syncs: _Of[int] = _Of("_shared")
    adopted_commands: _Of[int] = _Of("_shared")
    adopted_files: _Of[int] = _Of("_shared")
    caller_waits: _Of[int] = _Of("_shared")
    caller_wait_max: _Of[float] = _Of("_shared")
    durable_lag_max: _Of[float] = _Of("_shared")
    not_durable_at_close: _Of[int] = _Of("_shared")
    connects: _Of[int] = _Of("_shared")

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
        hub: str | None = None,
        token: str | None = None,
        tls_ca: str | None = None,
    ) -> None:
        root = Path(home).expanduser() if home else paths.default_home()
        # A remote hub: ``hub`` or MEMVIEWER_HUB (tls://HOST:PORT), its token and CA given or
        # from MEMVIEWER_TOKEN / MEMVIEWER_TOKEN_FILE / MEMVIEWER_TLS_CA. Raises ValueError.
        hub = hub or os.environ.get("MEMVIEWER_HUB") or None
        try:
            remote = tls.parse_hub(hub, token=token, ca_file=tls_ca) if hub else None
        except tls.HubAccessError as exc:
            raise ValueError(exc.message) from None
        sock = Path(socket_path) if socket_path else paths.default_socket(root)
        spool = Path(spool_dir) if spool_dir else paths.spool_dir(root)
        if sync_interval is not None and not (sync_interval >= 0):  # also refuses nan
            raise ValueError("sync_interval must be a number of seconds >= 0, or None")
        self._opts = Options(
            home=root,
            socket_path=sock,
            spool_dir=spool,
            # No socket chosen: the home's own default one, after the one named in <home>/hub.owner.
            follow_owner=socket_path is None and not os.environ.get("MEMVIEWER_SOCKET"),
            on_refusal=on_refusal,
            max_batch=max(1, int(max_batch)),
            max_queue=max(1, int(max_queue)),
            max_queue_bytes=max(1, int(max_queue_bytes)),
            sync_interval=sync_interval,
            segment_bytes=max(1, int(segment_bytes)),
            max_block=max(0.0, float(max_block)),
            client_name=client_name,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            max_backoff=max_backoff,
            remote=remote,
        )
        self._shared = Shared(self._opts)
        self._queue = CommandQueue(self._shared)
        self._sender = Sender(self._shared)
        self._spooler = Spooler(self._shared)
        _open_publishers.add(self)
        self._sender_thread = threading.Thread(
            target=self._sender.run, name="memviewer-publisher", daemon=True
        )
        self._spooler_thread = threading.Thread(
            target=self._spooler.run, name="memviewer-spooler", daemon=True
        )
        self._sender_thread.start()
        self._spooler_thread.start()

    # -- the API an agent calls (the builders in commands.py) ---------------------------
    open_session = _returning_id(commands.open_session)
    start_episode = _returning_id(commands.start_episode)
    add_turn = _returning_id(commands.add_turn)
    finalize_episode = _returning_none(commands.finalize_episode)
    abandon_episode = _returning_none(commands.abandon_episode)
    close_session = _returning_none(commands.close_session)
    record_recall = _returning_id(commands.record_recall)
    record_llm_call = _returning_id(commands.record_llm_call)

    def publish(self, command: dict[str, Any]) -> None:
        """Queue a raw protocol command ``{"op": ..., ...}`` (ids must already be in it)."""
        cmd = commands.raw(command)
        self._queue.put(cmd.op, cmd.args, keep_none=True)

    # -- delivery ------------------------------------------------------------------
    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until every command queued so far was stored by the hub.

        True only when all of them were stored. False on timeout, and False when one
        of them was refused (or dropped) and is still in ``refusals``: take it with
        ``take_refusals()`` to acknowledge it.
        """
        s = self._shared
        deadline = None if timeout is None else time.monotonic() + timeout
        with s.cond:
            target = s.next_lsn - 1
            s.cond.notify_all()
            while s.acked < target:
                if deadline is None:
                    s.cond.wait(1.0)
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                s.cond.wait(min(left, 1.0))
            return s.first_untaken is None or s.first_untaken > target

    def take_refusals(self) -> list[dict[str, Any]]:
        """The refused commands reported since the last call (oldest first), and forget them.

        Each is ``{"cid", "op", "error": {"code", "message"}, "command": {...}}``.
        """
        s = self._shared
        with s.cond:
            out, s.refusals = s.refusals, []
            s.first_untaken = None
            return out

    def open_episodes(self) -> list[str]:
        """Episodes this publisher started and has not finalized or abandoned."""
        with self._shared.cond:
            return list(self._queue.open_episodes)

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
        s = self._shared
        if s.closed:
            return True
        with s.cond:
            ending = list(self._queue.open_episodes) if end_episodes else []
        if ending:
            self._queue.put("shutdown", {"episode_ids": ending})
        ok = self._flush_for_close(timeout)
        self._stop_sender()
        done, stored, pending = self._hand_over(spool_timeout)
        if done:
            self._spooler_thread.join(timeout=1.0)
        _open_publishers.discard(self)
        if pending:
            log.warning(
                "publisher closed after %.1f s with %d commands (cid %d..%d) not yet on disk: "
                "the spooler is still writing them to %s (lost if the process ends first)",
                spool_timeout,
                len(pending),
                pending[0],
                pending[-1],
                self._opts.spool_dir,
            )
        if s.kept_files:
            log.warning(
                "publisher closed before a hub stored every command: they are kept in %s, and the "
                "next hub on this home (or the next publisher that reaches one) replays them",
                ", ".join(map(str, s.kept_files)),
            )
        return ok and done and stored

    def _flush_for_close(self, timeout: float) -> bool:
        """Flush for ``timeout`` at most, one second at most while the hub is known to be down."""
        start = time.monotonic()
        while True:
            ok = self.flush(0.1)
            waited = time.monotonic() - start
            if ok or waited >= timeout or (self._sender.last_connect_failed and waited >= min(1.0, timeout)):
                return ok

    def _stop_sender(self) -> None:
        """Stop the sender (cutting a request in flight short) and close its connection."""
        s = self._shared
        with s.cond:
            s.stopping = True  # the sender stops; the spooler carries on until the handover
            s.cond.notify_all()
            conn = s.conn
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
        self._sender_thread.join(timeout=10.0)
        self._sender.drop_conn()

    def _hand_over(self, spool_timeout: float) -> tuple[bool, bool, list[int]]:
        """Leave the rest to the spooler and wait for it: (done, all stored, cids not on disk)."""
        s = self._shared
        with s.cond:  # the rest is the spooler's: no new command from here on
            s.closed = True
            s.handover = True
            s.spool_cond.notify_all()
            deadline = time.monotonic() + max(0.0, spool_timeout)
            while not s.spool_done:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                s.cond.wait(left)
            done, stored = s.spool_done, s.acked >= s.next_lsn - 1
            pending = [lsn for lsn, _ln, _t in s.mem if lsn > s.acked] if not done else []
            s.not_durable_at_close = len(pending)
        return done, stored, pending

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        return self._shared.conn is not None

    def stats(self) -> dict[str, Any]:
        s = self._shared
        with s.cond:
            active = s.segments[-1] if s.segments else None
            return {
                "connected": s.conn is not None,
                "queued": len(s.mem),
                "queued_bytes": s.mem_bytes,
                "spool_bytes_pending": sum(x.length - x.pos for x in s.segments if x.last > s.acked),
                "spool_bytes": sum(x.length for x in s.segments),
                "spool_files": len(s.segments),
                "spool_file": str(active.path) if active else None,
                "enqueued": s.next_lsn - 1,
                "acked": s.acked,
                "acked_commands": s.acked_commands,
                "sent_batches": s.sent_batches,
                "spooled_commands": s.spooled_commands,
                "spool_writes": s.spool_writes,
                "spool_syncs": s.spool_syncs,
                "sync_interval": s.opts.sync_interval,
                "durable_lag_max_s": s.durable_lag_max,
                "not_durable_at_close": s.not_durable_at_close,
                "caller_waits": s.caller_waits,
                "caller_wait_max_s": s.caller_wait_max,
                "adopted_files": s.adopted_files,
                "adopted_commands": s.adopted_commands,
                "errors": s.errors,
                "refused": s.refused,
                "refusals_untaken": len(s.refusals),
                "open_episodes": len(self._queue.open_episodes),
                "hub_refused": s.hub_refused,
                "connects": s.connects,
                "dropped": s.dropped,
            }
