"""The hub's socket file and the locks that make it the only hub for its socket and home.

Two locks, taken before the socket is bound: an ``flock`` beside the socket (one hub per
socket path, even when two start at once) and the home's lock with an owner note (one hub
per home, whatever its socket: two hubs over one store would each abandon the other's open
episodes when they stop, and both would write the index).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import stat
from pathlib import Path

from memviewer import locks, paths
from memviewer.wire import trust
from memviewer.wire.probe import HOME_LOCK

log = logging.getLogger("memviewer.hub")

SUN_PATH_MAX = 107  # bytes, Linux AF_UNIX limit without the NUL


class HubError(RuntimeError):
    """The hub cannot start (bad socket path, permissions …)."""


class HubAlreadyRunning(HubError):
    """Another hub answers on (or owns) this socket."""


class HubSocket:
    """The socket path of one hub: checked, locked, made ready to bind, removed at the end."""

    def __init__(self, path: Path, home: str | Path) -> None:
        self.path = path
        self.home = home
        self.store_id: str | None = None  # the home's store id, read once the home is locked
        self._lock_path = path.with_name(path.name + ".lock")
        self._lock_fd: int | None = None
        self._home_lock_fd: int | None = None
        self._sock_ino: int | None = None

    def prepare(self) -> None:
        """Check the path and its folder, take both locks, remove a stale socket. Raises HubError."""
        path = self.path
        if len(os.fsencode(str(path))) > SUN_PATH_MAX:
            raise HubError(
                f"socket path is too long for a Unix socket ({len(os.fsencode(str(path)))} "
                f"bytes, limit {SUN_PATH_MAX}): {path}"
            )
        parent = path.parent
        try:
            runtime = paths.runtime_dir()
            if parent == runtime or parent.parent == runtime:  # the default places: ours, 0700
                trust.ensure_private_dir(runtime)
                trust.ensure_private_dir(parent)
            elif not parent.exists():
                trust.ensure_private_dir(parent)
            trust.check_socket(path)
        except trust.UntrustedPath as exc:
            raise HubError(f"{exc}; no hub was started") from None
        except OSError as exc:
            raise HubError(f"cannot prepare the socket folder {parent}: {exc}") from None
        self._acquire_home_lock()
        try:
            self._acquire_lock()
        except BaseException:
            self._release_home_lock()
            raise
        try:
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                return
            if not stat.S_ISSOCK(st.st_mode):
                raise HubError(f"{path} exists and is not a socket; refusing to replace it")
            version = _answering_hub(path)
            if version is not None:
                raise HubAlreadyRunning(f"a memviewer hub ({version}) is already running on {path}")
            log.warning("replacing stale socket %s", path)
            path.unlink()
        except BaseException:
            self._release_lock()
            raise

    def bound(self) -> None:
        """The server listens on the path now: owner only, and remembered as ours to remove."""
        os.chmod(self.path, 0o600)
        self._sock_ino = os.stat(self.path).st_ino

    def release(self) -> None:
        """Remove the socket (if it is still the one we bound) and give both locks back."""
        with contextlib.suppress(OSError):
            if self._sock_ino is not None and os.stat(self.path).st_ino == self._sock_ino:
                self.path.unlink()
        self._sock_ino = None
        self._release_lock()

    def _acquire_lock(self) -> None:
        """An flock beside the socket: one hub per socket path, even when two start at once."""
        for _ in range(5):
            try:
                fd = trust.open_nofollow(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as exc:
                raise HubError(f"cannot open the socket lock {self._lock_path}: {exc}") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                version = _answering_hub(self.path) or "starting or stopping"
                raise HubAlreadyRunning(
                    f"a memviewer hub ({version}) is already running on {self.path}"
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self._lock_path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                self._lock_fd = fd
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                return
            os.close(fd)  # the previous owner removed it while we waited: take the new one
        raise HubError(f"could not lock {self._lock_path}")

    def _acquire_home_lock(self) -> None:
        """One hub per home, whatever its socket; the note names its pid and socket."""
        home = self.home
        path = Path(home) / HOME_LOCK
        try:
            trust.check_home(Path(home))
            fd = locks.try_lock(path)
        except OSError as exc:
            raise HubError(f"cannot lock the home {home}: {exc}") from None
        if fd is None:
            owner = locks.read_note(path).split("\n")
            where = owner[1] if len(owner) > 1 and owner[1] else "another socket"
            raise HubAlreadyRunning(
                f"a memviewer hub is already running for {home} (pid {owner[0] or '?'}, on {where}); "
                f"use that one (--socket {where}) or stop it first"
            )
        locks.write_note(fd, f"{os.getpid()}\n{self.path}\n")
        self._home_lock_fd = fd
        try:
            self.store_id = trust.ensure_store_id(Path(home))
        except OSError as exc:  # hello still names the home's path
            log.warning("cannot write the store id in %s: %s", home, exc)

    def _release_home_lock(self) -> None:
        if self._home_lock_fd is not None:
            locks.release(self._home_lock_fd)
            self._home_lock_fd = None

    def _release_lock(self) -> None:
        self._release_home_lock()
        if self._lock_fd is None:
            return
        with contextlib.suppress(OSError):
            if os.fstat(self._lock_fd).st_ino == os.stat(self._lock_path).st_ino:
                self._lock_path.unlink()
        os.close(self._lock_fd)
        self._lock_fd = None


def _answering_hub(path: Path, timeout: float = 0.5) -> str | None:
    """The version of a hub answering on ``path`` (None when refused/absent)."""
    from memviewer.wire.probe import probe_hub

    return probe_hub(path, timeout=timeout)
