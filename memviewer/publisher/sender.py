"""The sender thread: the only code that touches the publisher's socket.

It connects to the hub serving the home (``hello`` must name it), replays dead publishers'
spools (``orphans``), then sends the oldest unacknowledged commands (the spool first, then
the in-memory queue) in ``publish`` batches, one request in flight, and marks them resolved
when the hub answered. Every "not now" (no hub, connection lost, a retryable error, a command
answered ``retry_later``) goes through one back-off, 0.05 s doubling to ``max_backoff``, reset
only by a batch that gets through, so a hub that accepts and then drops is not hammered.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

from memviewer.publisher.answers import refusal, retry_later
from memviewer.publisher.orphans import Orphans
from memviewer.publisher.state import FRAME_OVERHEAD, Shared, log
from memviewer.wire import protocol, tls, trust
from memviewer.wire.spool import cid_of
from memviewer.wire.spool_segments import Segment, split_lines
from memviewer.wire.syncclient import HubUnavailable, RpcConnection

HOME_LOCK = "hub.owner"  # in the home: the socket of the hub serving it (see wire.probe)
READ_AT_LEAST = protocol.DEFAULT_FRAME_LIMIT + 4096  # one read always holds a whole command line
FIRST_BACKOFF = 0.05  # seconds


class Sender:
    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.frame_limit = protocol.DEFAULT_FRAME_LIMIT
        self.last_connect_failed = False  # close() waits less for a hub known to be down
        self._logged_refusal: str | None = None
        self._adopt_pending = False  # replay dead publishers' spool files at the next chance
        self._split_until = 0  # send one command per request up to this lsn (isolate a bad one)
        self._inflight: tuple[Segment, int] | None = None  # segment and offset after the batch in flight
        self._inflight_queued_at: float | None = None  # when the batch in flight (from memory) was queued
        self._delay = FIRST_BACKOFF
        self.orphans = Orphans(shared, self.send, lambda: self.frame_limit)

    def run(self) -> None:
        with contextlib.suppress(OSError):  # orphans left by dead publishers: connect to replay them
            self._adopt_pending = self.orphans.waiting()
        while True:
            try:
                self._loop()
                return
            except Exception:  # a bug here must not silently stop delivery
                log.exception("publisher sender failed; restarting it")
                self.drop_conn()
                self.shared.pause(0.5)

    def _back_off(self) -> None:
        """The one answer to "not now": spool at once meanwhile, wait, and wait longer next time."""
        self.shared.set_hub_down()
        self.shared.pause(self._delay)
        self._delay = min(self._delay * 2, self.shared.opts.max_backoff)

    def _loop(self) -> None:
        s = self.shared
        self._delay = FIRST_BACKOFF
        while True:
            with s.cond:
                while not s.stopping and not self._has_work_locked():
                    s.cond.wait()
                if s.stopping:
                    return
            if s.conn is None and not self._connect_or_back_off():
                continue
            if self._adopt_pending and not self._adopt_or_back_off():
                continue
            batch = self._next_batch()
            if not batch or s.stopping:
                continue
            self._deliver(batch)

    def _connect_or_back_off(self) -> bool:
        # The back-off is reset by a batch that gets through, not here: a hub that accepts,
        # then drops, is throttled.
        try:
            self._connect()
            self.last_connect_failed = False
        except (OSError, protocol.RpcError) as exc:
            if isinstance(exc, trust.UntrustedPath | trust.ForeignHub | tls.HubAccessError) or (
                isinstance(exc, protocol.RpcError) and exc.app_code in protocol.TOKEN_CODES
            ):
                code = getattr(exc, "code", None) if isinstance(exc, tls.HubAccessError) else None
                if isinstance(exc, protocol.RpcError):
                    code = exc.app_code
                self._refused_by_hub(f"{exc} [{code}]" if code else str(exc))
            elif not self.last_connect_failed:
                opts = self.shared.opts
                log.info("no hub on %s (%s); spooling to %s", opts.socket_path, exc, opts.spool_dir)
            self.last_connect_failed = True
            self._back_off()
            return False
        with self.shared.cond:
            self.shared.hub_down = False
        self._adopt_pending = True
        return True

    def _refused_by_hub(self, reason: str) -> None:
        """The hub refused this publisher (its token): said once per reason, commands kept."""
        self.shared.hub_refused = reason
        if self._logged_refusal != reason:  # one line per distinct reason
            log.error("not publishing there: %s; spooling to %s", reason, self.shared.opts.spool_dir)
            self._logged_refusal = reason

    def _adopt_or_back_off(self) -> bool:
        try:
            self.orphans.adopt()
            self._adopt_pending = False
            return True
        except (OSError, HubUnavailable, protocol.RpcError) as exc:
            log.info("replaying a dead publisher's spool failed (%s); retrying", exc)
            self.drop_conn()
            self._back_off()
            return False

    def _deliver(self, batch: list[tuple[int, bytes]]) -> None:
        """Send one batch and resolve it, or keep it for a resend after the back-off."""
        size = sum(len(ln) for _, ln in batch)
        if len(batch) == 1 and size + FRAME_OVERHEAD > self.frame_limit:
            error = protocol.app_error(
                "invalid_argument", f"command is {size} bytes, above the hub frame limit"
            )
            self._resolve(batch, None, error)
            return
        try:
            results = self.send([ln for _, ln in batch])
        except (OSError, HubUnavailable):
            log.info("hub connection lost; will resend %d commands", len(batch))
            self.drop_conn()
            self._back_off()
            return
        except protocol.RpcError as exc:
            if exc.app_code in protocol.TOKEN_CODES:  # revoked mid-run: keep it all, spool on
                self._refused_by_hub(f"{exc.message} [{exc.app_code}]")
                self.drop_conn()
                self._back_off()
                return
            if retry_later(exc, whole_request=True):  # hub busy, shutting down, disk trouble
                log.warning("hub could not take a batch now (%s: %s); retrying", exc.app_code, exc.message)
                if exc.app_code == "internal":
                    self.drop_conn()
                self._back_off()
            elif len(batch) > 1:  # find the bad command: resend one per request
                self._split_until = batch[-1][0]
            else:
                self._resolve(batch, None, exc)
            return
        if self._resolve(batch, results):
            log.info("hub answered 'not now' for a command; retrying in %.2f s", self._delay)
            self._back_off()
            return
        with self.shared.cond:
            self.shared.hub_down = False
        self._delay = FIRST_BACKOFF

    def _has_work_locked(self) -> bool:
        s = self.shared
        return bool(s.mem) or self._adopt_pending or any(seg.last > s.acked for seg in s.segments)

    def _next_batch(self) -> list[tuple[int, bytes]]:
        """The oldest unacknowledged commands: the spool first, then the in-memory queue."""
        s = self.shared
        limit = 1 if s.acked < self._split_until else s.opts.max_batch
        budget = self.frame_limit - FRAME_OVERHEAD
        with s.cond:
            self._inflight = None
            self._inflight_queued_at = None
            acked = s.acked
            seg = next((x for x in s.segments if x.last > acked), None)
            if seg is None:
                return self._batch_from_memory_locked(acked, limit, budget)
            start = seg.start_for(acked + 1)
            end_of_data = seg.length
        # Read outside the lock: only this thread advances ``acked``, so the spooler cannot
        # remove or truncate a segment that still holds unacknowledged commands.
        data = seg.pread(start, min(end_of_data - start, max(budget, READ_AT_LEAST)))
        lines, ends = split_lines(data)
        batch: list[tuple[int, bytes]] = []
        size, end = 0, start
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
        with s.cond:
            if not batch:
                seg.pos = max(seg.pos, end if lines else end_of_data)
                return []
            self._inflight = (seg, end)
        return batch

    def _batch_from_memory_locked(self, acked: int, limit: int, budget: int) -> list[tuple[int, bytes]]:
        batch: list[tuple[int, bytes]] = []
        size = 0
        for lsn, ln, queued_at in self.shared.mem:
            if len(batch) >= limit or (batch and size + len(ln) + 1 > budget):
                break
            if lsn <= acked:
                continue
            if not batch:
                self._inflight_queued_at = queued_at
            batch.append((lsn, ln))
            size += len(ln) + 1
        return batch

    def send(self, lines: list[bytes]) -> list[Any]:
        """One ``publish`` request of these command lines; the per-command results."""
        conn = self.shared.conn
        assert conn is not None
        payload = b'{"commands":[' + b",".join(lines) + b"]}"
        result = conn.call_raw(protocol.PUBLISH, payload)
        self.shared.sent_batches += 1
        results = result.get("results") if isinstance(result, dict) else None
        if not isinstance(results, list):
            raise protocol.RpcError(protocol.INTERNAL_ERROR, f"malformed publish result: {result!r}")
        return results

    def _failures(
        self,
        batch: list[tuple[int, bytes]],
        results: list[Any] | None,
        failure: protocol.RpcError | None,
    ) -> tuple[list[tuple[int, bytes]], list[dict[str, Any]], bool]:
        """Read the hub's answer to ``batch``: the commands it resolved, those it refused, and
        whether it answered "not now" for one (that one and every one after it stay unresolved)."""
        if failure is not None:
            return batch, [refusal(lsn, ln, failure.to_dict()) for lsn, ln in batch], False
        assert results is not None
        failed: list[dict[str, Any]] = []
        held_back = False
        if len(results) != len(batch):
            log.warning("hub returned %d results for %d commands", len(results), len(batch))
        for i, res in enumerate(results[: len(batch)]):
            if isinstance(res, dict) and retry_later(res.get("error")):
                held_back = True
                batch, results = batch[:i], results[:i]
                break
        for (lsn, ln), res in zip(batch, results, strict=False):
            if isinstance(res, dict) and "error" in res:
                failed.append(refusal(lsn, ln, res["error"]))
        if not held_back:
            for lsn, ln in batch[len(results) :]:  # no result at all: not stored, say so
                failed.append(refusal(lsn, ln, {"code": "internal", "message": "the hub sent no result"}))
        return batch, failed, held_back

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
        batch, failed, held_back = self._failures(batch, results, failure)
        for item in failed:
            err = item["error"] if isinstance(item["error"], dict) else {}
            log.warning(
                "hub refused command %d (%s): %s: %s",
                item["cid"],
                item["op"],
                err.get("code"),
                err.get("message"),
            )
        s = self.shared
        with s.cond:
            if batch:
                s.acked = max(s.acked, batch[-1][0])
            while s.acked + 1 in s.dropped_lsns:  # dropped commands count as resolved
                s.dropped_lsns.discard(s.acked + 1)
                s.acked += 1
            if self._inflight is not None and not held_back:
                seg, end = self._inflight
                seg.pos = max(seg.pos, end)
            if self._inflight_queued_at is not None and batch:  # durable in the hub's store now
                s.durable_lag_max = max(s.durable_lag_max, time.monotonic() - self._inflight_queued_at)
            self._inflight = None
            self._inflight_queued_at = None
            while s.mem and s.mem[0][0] <= s.acked:
                s.mem_bytes -= len(s.mem.popleft()[1])
            s.acked_commands += len(batch)
            s.errors += len(failed)
            s.error_log.extend(failed)
            for item in failed:
                s.add_refusal_locked(item)
            if s.segments and s.segments[0].length and s.segments[0].last <= s.acked:
                s.spool_cond.notify()  # a segment is fully acknowledged: compact
            s.cond.notify_all()
        s.report_refusals(failed)
        return held_back

    def _candidates(self) -> list[Path | tls.HubAddress]:
        """Sockets to try: the one named in ``<home>/hub.owner`` (a hub started with
        ``--socket`` elsewhere) when none was chosen, then ``socket_path``."""
        opts = self.shared.opts
        if opts.remote is not None:
            return [opts.remote]
        out: list[Path | tls.HubAddress] = []
        if opts.follow_owner:
            with contextlib.suppress(OSError, UnicodeDecodeError):
                fd = os.open(opts.home / HOME_LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    lines = os.read(fd, 4096).decode("utf-8").splitlines()
                finally:
                    os.close(fd)
                if len(lines) > 1 and lines[1].strip() and Path(lines[1].strip()) != opts.socket_path:
                    out.append(Path(lines[1].strip()))
        return [*out, opts.socket_path]

    def _connect(self) -> None:
        candidates = self._candidates()
        for i, sock in enumerate(candidates):
            try:
                self._connect_to(sock)
                return
            except OSError:
                if i == len(candidates) - 1:
                    raise

    def _connect_to(self, sock: Path | tls.HubAddress) -> None:
        s, opts = self.shared, self.shared.opts
        conn = RpcConnection(sock, timeout=opts.connect_timeout)  # UntrustedPath: another user's
        try:
            hello = conn.call(
                protocol.HELLO,
                {"protocol": protocol.PROTOCOL_VERSION, "role": "publisher", "client": opts.client_name},
            )
            problem = (
                None if isinstance(sock, tls.HubAddress) else trust.hello_home_problem(hello, opts.home, sock)
            )
            if problem is not None:  # one home, one hub: never publish into another home
                raise trust.ForeignHub(problem)
        except BaseException:
            conn.close()
            raise
        limit = hello.get("frame_limit") if isinstance(hello, dict) else None
        ok = isinstance(limit, int) and limit > 1024
        self.frame_limit = int(limit) if ok else protocol.DEFAULT_FRAME_LIMIT  # type: ignore[arg-type]
        conn.settimeout(opts.request_timeout)
        with s.cond:
            s.conn = conn
        s.connects += 1
        s.hub_refused = self._logged_refusal = None
        log.info("publisher connected to %s", sock)

    def drop_conn(self) -> None:
        s = self.shared
        with s.cond:
            conn, s.conn = s.conn, None
        if conn is not None:
            conn.close()
