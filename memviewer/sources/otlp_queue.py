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

import json
import os
import threading
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
        self.pending_bytes = sum(p.stat().st_size for p in self._files())

    def _files(self) -> list[Path]:
        return sorted(self.folder.glob("q-*.json"))

    def __len__(self) -> int:
        return len(self._files())

    def has_room(self, n: int) -> bool:
        return self.pending_bytes + n <= self.max_bytes

    def put(self, commands: list[dict[str, Any]]) -> None:
        """Write one accepted batch durably (raises ``OSError``: a full disk, say)."""
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
        with self._lock:
            self.pending_bytes += len(data)

    def oldest(self) -> Path | None:
        files = self._files()
        return files[0] if files else None

    @staticmethod
    def load(path: Path) -> list[dict[str, Any]]:
        commands = json.loads(path.read_bytes())
        return commands if isinstance(commands, list) else []

    def done(self, path: Path) -> None:
        """The batch is stored: its file goes."""
        size = path.stat().st_size
        path.unlink()
        fsync_dir(self.folder)
        with self._lock:
            self.pending_bytes -= size
