"""Sortable ids (UUIDv7), standard library only.

Publishers mint ids before the hub sees a command, so a replayed command is
recognised as the same one; time-ordered ids also keep inserts append-mostly.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

_lock = threading.Lock()
_last_ms = 0
_counter = 0


def uuid7() -> str:
    """Return a UUIDv7 string, monotonic within this process."""
    global _last_ms, _counter
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            ms = _last_ms
            _counter += 1
            if _counter > 0xFFF:
                ms += 1
                _counter = 0
        else:
            _counter = int.from_bytes(os.urandom(2), "big") & 0x7FF
        _last_ms = ms
        rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
        value = (ms & ((1 << 48) - 1)) << 80
        value |= 0x7 << 76
        value |= (_counter & 0xFFF) << 64
        value |= 0b10 << 62
        value |= rand_b
    return str(uuid.UUID(int=value))


def new_id(prefix: str = "") -> str:
    """A fresh sortable id, optionally with a short readable prefix."""
    return f"{prefix}{uuid7()}"
