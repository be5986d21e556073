"""The spooler thread: the only code that writes the publisher's spool files.

Every command not acknowledged ``sync_interval`` seconds after it was queued (at once while
no hub answers, a caller waits for room, or the queue is half full) is appended to the active
segment and fsync'd in one group write; segments whose every command was acknowledged are
deleted (the active one truncated). At ``close`` it leaves exactly the unacknowledged commands
on disk, for the next hub or publisher. File format: :mod:`memviewer.wire.spool_segments`.
"""

from __future__ import annotations

import time
from pathlib import Path

from memviewer.publisher.state import Shared, log
from memviewer.wire.spool import cid_of
from memviewer.wire.spool_segments import Segment, split_lines

WRITE_CHUNK = 1 << 20  # the spooler frees queue memory after each write of about this many bytes


class Spooler:
    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self._retry_at = 0.0  # after a spool write failed: when to try again

    def run(self) -> None:
        while True:
            try:
                self._loop()
                return
            except Exception:  # a bug here must not silently stop spooling
                log.exception("publisher spooler failed; restarting it")
                self.shared.pause(0.5)

    def _wait_locked(self) -> float | None:
        """0 when the in-memory queue is due for the spool now, else seconds until it is (None: never)."""
        s = self.shared
        if not s.mem:
            return None
        now = time.monotonic()
        if s.spool_failed and now < self._retry_at:
            return self._retry_at - now
        if (
            s.hub_down
            or s.waiting_callers
            or len(s.mem) >= s.opts.spill_at
            or s.mem_bytes >= s.opts.spill_bytes
        ):
            return 0.0
        if s.opts.sync_interval is None:
            return None
        return max(0.0, s.mem[0][2] + s.opts.sync_interval - now)

    def _compactable_locked(self) -> bool:
        return any(seg.length and seg.last <= self.shared.acked for seg in self.shared.segments)

    def _loop(self) -> None:
        s = self.shared
        while True:
            with s.cond:
                while True:
                    if s.handover:
                        break
                    compact = self._compactable_locked()
                    wait = self._wait_locked()
                    if compact or wait == 0.0:
                        break
                    s.spool_cond.wait(wait)
                if s.handover:
                    done = s.spool_done
                else:
                    count = len(s.mem) if wait == 0.0 else 0
            if s.handover:
                if not done:
                    self._spool_remainder()
                return
            if compact:
                self._compact()
            if count:
                self._spool_due(count)

    def _compact(self) -> None:
        """Delete the segments whose every command was acknowledged; truncate the active one."""
        s = self.shared
        with s.cond:
            active = s.segments[-1] if s.segments else None
            done = [seg for seg in s.segments if seg.length and seg.last <= s.acked]
            removing = [seg for seg in done if seg is not active]
            resetting = active if active is not None and active in done else None
            for seg in removing:
                s.segments.remove(seg)
        for seg in removing:
            seg.remove()
        if resetting is not None:
            try:
                resetting.reset()
            except OSError as exc:
                log.warning("cannot truncate the spool file %s (%s); starting a new one", resetting.path, exc)
                with s.cond:
                    resetting.sealed = True
                    if resetting.last <= s.acked and resetting in s.segments:
                        s.segments.remove(resetting)
                resetting.remove()
                return
            with s.cond:
                resetting.forget()

    def _spool_due(self, count: int) -> None:
        """Move the oldest ``count`` queued commands (those not acknowledged meanwhile) to the
        spool in chunks, then fsync once: one group commit."""
        s = self.shared
        remaining = count
        written: list[Segment] = []
        oldest: float | None = None
        while remaining > 0:
            with s.cond:
                seg = s.segments[-1] if s.segments else None
                fresh = seg is None or seg.sealed or seg.length >= s.opts.segment_bytes
                room = min(WRITE_CHUNK, s.opts.segment_bytes - (0 if fresh or seg is None else seg.length))
                take: list[tuple[int, bytes]] = []
                nbytes = scanned = last_scanned = 0
                for lsn, ln, queued_at in s.mem:
                    if scanned >= remaining or (take and nbytes + len(ln) + 1 > room):
                        break
                    scanned += 1
                    last_scanned = lsn
                    if oldest is None:
                        oldest = queued_at
                    if lsn > s.acked:
                        take.append((lsn, ln))
                        nbytes += len(ln) + 1
                if not scanned:
                    break
            if take:
                new: Segment | None = None
                try:
                    if fresh:
                        seg = new = Segment(s.opts.spool_dir)
                    assert seg is not None
                    n = seg.write(take)
                except OSError as exc:
                    if new is not None:  # never registered: nothing else refers to it
                        new.remove()
                    elif not fresh and seg is not None:
                        seg.undo_torn_write()
                    self._failure(exc)
                    return
            with s.cond:
                if take:
                    assert seg is not None
                    if fresh:
                        s.segments.append(seg)
                    seg.record(take, n)
                    if seg not in written:
                        written.append(seg)
                    s.spooled_commands += len(take)
                    s.spool_writes += 1
                while s.mem and s.mem[0][0] <= last_scanned:
                    s.mem_bytes -= len(s.mem.popleft()[1])
                s.cond.notify_all()  # room for waiting callers; work for the sender
            remaining -= scanned
        if written:
            self._sync(written, oldest)

    def _sync(self, written: list[Segment], oldest: float | None) -> None:
        """fsync the segments a group write touched: its commands are durable from here on."""
        s = self.shared
        try:
            for seg in written:
                seg.sync()
        except OSError as exc:
            self._failure(exc)
            return
        with s.cond:
            s.spool_syncs += 1
            if s.spool_failed:
                log.info("the spool in %s is writable again", s.opts.spool_dir)
            s.spool_failed = False
            if oldest is not None:
                s.durable_lag_max = max(s.durable_lag_max, time.monotonic() - oldest)

    def _failure(self, exc: OSError) -> None:
        s = self.shared
        with s.cond:
            if not s.spool_failed:
                log.error(
                    "cannot write the spool in %s (%s); keeping commands in memory", s.opts.spool_dir, exc
                )
            s.spool_failed = True
            self._retry_at = time.monotonic() + 1.0
            s.cond.notify_all()  # a waiting caller may have to drop now

    def _spool_remainder(self) -> None:
        """At ``close``: exactly the unacknowledged commands stay on disk."""
        s = self.shared
        with s.cond:
            leftover = [(lsn, ln) for lsn, ln, _ in s.mem if lsn > s.acked]
            segments = list(s.segments)
            acked = s.acked
        try:
            kept = self._leave_spool(segments, leftover, acked)
        except Exception:  # a bug: say so, and never leave close() waiting for a retry loop
            log.exception(
                "publisher spooler failed while closing; the spool in %s is as it was", s.opts.spool_dir
            )
            kept = [seg.path for seg in segments]
        with s.cond:
            s.mem.clear()
            s.mem_bytes = 0
            s.segments = []
            s.kept_files = kept
            s.spool_done = True
            s.cond.notify_all()

    def _leave_spool(
        self, segments: list[Segment], leftover: list[tuple[int, bytes]], acked: int
    ) -> list[Path]:
        """``close``: exactly the unacknowledged commands stay on disk, in order; returns the files."""
        if leftover:
            self._write_leftover(segments, leftover)
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

    def _write_leftover(self, segments: list[Segment], leftover: list[tuple[int, bytes]]) -> None:
        """Append the commands never spooled to the active segment (a new one if sealed)."""
        s = self.shared
        try:
            seg = segments[-1] if segments and not segments[-1].sealed else None
            if seg is None:
                seg = Segment(s.opts.spool_dir)
                segments.append(seg)
            nbytes = seg.write(leftover)
            seg.record(leftover, nbytes)
            seg.sync()
            s.spooled_commands += len(leftover)
        except OSError as exc:
            log.error(
                "publisher closed: %d unsent commands lost, the spool is not writable (%s)",
                len(leftover),
                exc,
            )
            s.dropped += len(leftover)
            s.errors += len(leftover)
