"""Hand the C heap's free pages back to the system after a burst of native allocations.

LanceDB's Rust code allocates with glibc's ``malloc`` from many threads, and glibc keeps
what they free in per-thread arenas for reuse: after a compaction or an index rebuild the
hub's RSS stays at the burst's height although the memory is free. ``malloc_trim(0)``
returns those pages (8-24 MB after each optimize pass of a hub's indexer, measured in
docs/benchmarks.md, "Indexer memory"); it costs a few milliseconds. Elsewhere than glibc
(musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from typing import Any

log = logging.getLogger("memviewer.index")


@functools.cache
def _libc() -> Any | None:
    # The process's own symbols (libc is loaded in every CPython), not ``ctypes.util.
    # find_library``, which runs ``ldconfig`` in a child process: no process is started from
    # a hub whose LanceDB threads are running.
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


def release_free_memory() -> bool:
    """``malloc_trim(0)`` where glibc provides it; True when it returned memory."""
    libc = _libc()
    if libc is None:
        return False
    try:
        return bool(libc.malloc_trim(0))
    except Exception:  # noqa: BLE001 - best effort, never fails the indexer
        log.debug("malloc_trim failed", exc_info=True)
        return False


__all__ = ["release_free_memory"]
