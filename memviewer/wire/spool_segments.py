"""A publisher's spool as a chain of segment files, so it shrinks as it drains.

Standard library only (the publisher imports it). Every segment is an ordinary
spool file of :mod:`memviewer.wire.spool` (``pub-<uuid7>-<pid>.ndjson``, one
``{"cid":N,...}`` line per command, ``flock``'d for as long as the publisher
lives), so the hub ingests the segments a dead publisher left exactly as it
ingests any spool file, oldest name first, which is also command order.

The publisher's spooler thread is the only one that writes, truncates or
deletes a segment; its sender thread only reads (``pread``) the part of a
segment that holds unacknowledged commands. A segment whose every command was
acknowledged is deleted (or, the one being appended to, truncated), and
appends go to a new segment once the current one passes ``segment_bytes``: on
disk the spool holds the unacknowledged backlog plus at most one segment.
"""

from __future__ import annotations

import bisect
import contextlib
import os
from pathlib import Path

from memviewer.wire.spool import SpoolFile, _write_all

__all__ = ["Segment", "split_lines"]


def split_lines(data: bytes) -> tuple[list[bytes], list[int]]:
    """The complete lines of ``data`` and the offset just past each (a torn tail is left out)."""
    lines: list[bytes] = []
    ends: list[int] = []
    start = 0
    while True:
        nl = data.find(b"\n", start)
        if nl < 0:
            return lines, ends
        lines.append(data[start:nl])
        ends.append(nl + 1)
        start = nl + 1


class Segment(SpoolFile):
    """One segment: the commands ``first``..``last`` (local sequence numbers), in order."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.first: int | None = None
        self.last = 0  # highest sequence number written
        self.length = 0  # bytes written (what a reader may read)
        self.pos = 0  # offset of the first line not known to be acknowledged
        self.sealed = False  # a failed write left a tail we could not cut: append elsewhere
        self._mark_lsns: list[int] = []  # first sequence number of each write …
        self._mark_offsets: list[int] = []  # … and where that write starts

    def write(self, lines: list[tuple[int, bytes]]) -> int:
        """Append ``(lsn, line)`` pairs without fsync (``sync`` makes them crash-proof)."""
        if not lines:
            return 0
        data = b"\n".join(ln for _, ln in lines) + b"\n"
        _write_all(self.fd, data)
        return len(data)

    def record(self, lines: list[tuple[int, bytes]], nbytes: int) -> None:
        """Publish a finished ``write`` to readers (call under the publisher's lock)."""
        if not lines:
            return
        self._mark_lsns.append(lines[0][0])
        self._mark_offsets.append(self.length)
        if self.first is None:
            self.first = lines[0][0]
        self.last = lines[-1][0]
        self.length += nbytes

    def undo_torn_write(self) -> None:
        """After a failed write: cut what it left past ``size``, or seal the segment."""
        try:
            os.ftruncate(self.fd, self.length)
        except OSError:
            self.sealed = True

    def sync(self) -> None:
        os.fsync(self.fd)

    def start_for(self, lsn: int) -> int:
        """Where to start reading for the first command >= ``lsn`` (skips whole acknowledged writes)."""
        i = bisect.bisect_right(self._mark_lsns, lsn) - 1
        return max(self.pos, self._mark_offsets[i] if i >= 0 else 0)

    def pread(self, offset: int, length: int) -> bytes:
        out = b""
        while len(out) < length:
            chunk = os.pread(self.fd, length - len(out), offset + len(out))
            if not chunk:
                break
            out += chunk
        return out

    def reset(self) -> None:
        """Truncate a fully acknowledged segment for reuse (no fsync: a replay is idempotent)."""
        os.ftruncate(self.fd, 0)

    def forget(self) -> None:
        """The bookkeeping half of ``reset`` (under the publisher's lock)."""
        self.first, self.last, self.length, self.pos = None, 0, 0, 0
        self._mark_lsns.clear()
        self._mark_offsets.clear()

    def remove(self) -> None:
        """Delete a fully acknowledged segment: unlink while still locked, then close."""
        try:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        finally:
            with contextlib.suppress(OSError):
                os.close(self.fd)

    def release(self) -> None:
        """Close without touching the file (it stays for the next hub or publisher)."""
        with contextlib.suppress(OSError):
            os.close(self.fd)

    def rewrite(self, keep: list[bytes]) -> Path | None:
        """Leave exactly ``keep`` (or nothing) in the file and release it (see ``SpoolFile.finish``)."""
        return self.finish(keep)
