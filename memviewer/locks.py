"""Advisory file locks (``flock``) that carry a short note saying who holds them.

A flock vanishes with its process, so a crash never leaves a stale lock behind;
the note inside (a pid, a socket path, a last error) is for messages only and is
cleared on release. Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path


def try_lock(path: Path) -> int | None:
    """An exclusive flock on ``path`` (created 0600), or None when another holder has it.

    A symlink at ``path`` or a file of another user raises ``OSError`` (never followed).

    The caller keeps the returned descriptor open for as long as it holds the lock.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # O_NOFOLLOW: a symlink planted at ``path`` must not make the note truncate its target.
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        if os.fstat(fd).st_uid != (os.getuid() if hasattr(os, "getuid") else 0):
            raise PermissionError(f"refusing the lock file {path}: it belongs to another user")
    except BaseException:
        os.close(fd)
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def write_note(fd: int, text: str) -> None:
    """Replace the note in a held lock file (best effort: the lock matters, not the note)."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, text.encode("utf-8"), 0)


def read_note(path: Path) -> str:
    """The note of a lock file, or "" when there is none (or it cannot be read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        return os.read(fd, 4096).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def release(fd: int) -> None:
    """Clear the note and let the lock go (closing the descriptor releases the flock)."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
    os.close(fd)
