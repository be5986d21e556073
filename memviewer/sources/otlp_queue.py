"""The OTLP receiver's durable queue: accepted batches on disk until the hub stored them.

An exporter is answered once its request's commands are fsync'd here, not once the hub's
writer committed them: the writer stores a batch of 512 chat spans in seconds on 2 cores
(docs/benchmarks.md, "OTLP at the SDK's pace"), longer than an exporter's patience, and an
exporter that waits drops what its own queue cannot hold. A crash between the answer and the
commit loses nothing: the next start stores what is left here first. One file per accepted
request (``q-<uuid7>.json``, a JSON list of publish commands; uuid7 names sort in arrival
order), written to a ``.tmp`` and renamed, in a 0700 folder of the home.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from pathlib import Path
from typing import Any

import orjson

from memviewer.ids import uuid7
from memviewer.wire import protocol
from memviewer.wire.spool import ensure_dir, fsync_dir

FOLDER = "otlp-queue"
#: Bytes of accepted, not yet stored batches at most: beyond, requests get 429 + Retry-After.
MAX_QUEUE_BYTES = 256 * 1024 * 1024


def encode(commands: list[dict[str, Any]]) -> bytes:
    """One batch's file content: ``orjson`` (a 512-span batch in ~1 ms, the standard library
    took ~9 ms on the exporter's wait); what it refuses (a lone surrogate, an integer beyond
    64 bits, a key that is not text) goes through the hub socket's encoder (``json``, a lone
    surrogate ASCII-escaped). NaN and infinities become ``null`` in both, as on the socket."""
    try:
        return orjson.dumps(commands)
    except TypeError:  # orjson.JSONEncodeError
        return protocol.encode(commands)


class DurableQueue:
    def __init__(self, folder: Path, max_bytes: int = MAX_QUEUE_BYTES) -> None:
        ensure_dir(folder)
        self.folder = folder
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        for tmp in folder.glob("*.tmp"):  # a write that never finished was never acknowledged
            tmp.unlink(missing_ok=True)
        # The batches in arrival order, kept in memory: the drain asks for the oldest once a
        # batch, and listing the folder each time made a backlog quadratic. Only this object
        # and the receiver's process (which tells it each file: ``adopt``) write the folder once
        # it is open (the hub's home lock), so the list stays true.
        self._waiting: deque[Path] = deque(sorted(folder.glob("q-*.json")))
        self.pending_bytes = sum(p.stat().st_size for p in self._waiting)

    def __len__(self) -> int:
        with self._lock:
            return len(self._waiting)

    def has_room(self, n: int) -> bool:
        return self.pending_bytes + n <= self.max_bytes

    def put(self, commands: list[dict[str, Any]]) -> None:
        """Write one accepted batch durably (raises ``OSError``: a full disk, say)."""
        path, size = self.write(commands)
        self.adopt(path, size)

    def write(self, commands: list[dict[str, Any]]) -> tuple[Path, int]:
        """The batch's file written durably, not yet waiting here (the receiver's process
        writes, the hub's queue ``adopt``s it); its path and size."""
        data = encode(commands)
        final = self.folder / f"q-{uuid7()}.json"
        tmp = final.with_name(final.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        os.rename(tmp, final)
        fsync_dir(self.folder)
        return final, len(data)

    def adopt(self, path: Path, size: int) -> None:
        """A batch written (``write``) by this object or the receiver's process: it waits."""
        with self._lock:
            self.pending_bytes += size
            self._waiting.append(path)  # uuid7 names: later than every name already waiting

    def oldest(self) -> Path | None:
        with self._lock:
            return self._waiting[0] if self._waiting else None

    @staticmethod
    def load(path: Path) -> list[dict[str, Any]]:
        commands = orjson.loads(path.read_bytes())  # raises ValueError (JSONDecodeError) as json
        return commands if isinstance(commands, list) else []

    def done(self, path: Path) -> None:
        """The batch is stored: its file goes."""
        size = path.stat().st_size
        path.unlink()
        fsync_dir(self.folder)
        self._forget(path, size)

    def set_aside(self, path: Path) -> None:
        """An unreadable batch: renamed ``*.bad`` (kept for a person to look at), no longer waiting."""
        size = path.stat().st_size
        os.replace(path, path.with_name(path.name + ".bad"))
        self._forget(path, size)

    def _forget(self, path: Path, size: int) -> None:
        with self._lock:
            self.pending_bytes -= size
            if self._waiting and self._waiting[0] == path:
                self._waiting.popleft()
            else:
                self._waiting.remove(path)
