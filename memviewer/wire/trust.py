"""Who may we talk to and which files may we trust? (standard library only: the publisher uses it).

Another local user can create the runtime folder before us (``/tmp/memviewer-<uid>`` when
there is no ``XDG_RUNTIME_DIR``) and run a fake hub in it; a symlink planted where a lock
file goes would make us truncate its target; a spool file planted in a home would be
replayed as that user's memory. So:

* the folder holding a socket and the socket itself must belong to the current user and
  must not be writable by group or others, or nobody connects and no hub binds there
  (``UntrustedPath``, naming the path and its owner);
* lock and owner files are opened with ``O_NOFOLLOW``;
* a hub answers ``hello`` with the home it serves and the store id, and a client with a
  home refuses a hub that serves another one (``hello_home_problem``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path
from typing import Any

STORE_ID_FILE = "store.id"  # in the home: a random id written once, named by `hello`


class UntrustedPath(OSError):
    """A runtime folder, socket, home or spool file that belongs to another user or that
    others may write: refused, never used."""


def owner_name(uid: int) -> str:
    """``name (uid N)`` for messages; the number alone when no account has it."""
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


def problem_of(path: Path, st: os.stat_result, what: str) -> str | None:
    """Why ``path`` (already ``lstat``-ed) cannot be trusted, or None."""
    if st.st_uid != _uid():
        return f"{what} {path} belongs to {owner_name(st.st_uid)}, not to you ({owner_name(_uid())})"
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        return f"{what} {path} is writable by other users (mode {mode:04o})"
    return None


def check_socket(socket_path: str | Path) -> None:
    """Raise ``UntrustedPath`` unless the socket's folder (and the socket, when it exists)
    are the current user's and not writable by others. A missing folder is fine: no hub."""
    path = Path(socket_path)
    folder = path.parent
    try:
        st = os.stat(folder)  # the folder may be reached through a symlink of ours (checked below)
    except FileNotFoundError:
        return
    problem = problem_of(folder, st, "the socket folder")
    if problem is None:
        try:
            lst = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(lst.st_mode):
            problem = f"the socket {path} is a symbolic link"
        else:
            problem = problem_of(path, lst, "the socket")
    if problem is not None:
        raise UntrustedPath(f"refusing to use {path}: {problem}")


def ensure_private_dir(folder: Path, *, tighten: bool = True, allow_symlink: bool = False) -> None:
    """Create ``folder`` (and missing parents) 0700, or check an existing one.

    An existing folder of ours with looser modes is tightened to 0700 (``tighten``); one
    of another user is refused, and so is a symlink unless ``allow_symlink`` (a home the
    user links elsewhere; runtime folders never).
    """
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = os.stat(folder) if allow_symlink else os.lstat(folder)
    if stat.S_ISLNK(st.st_mode):
        raise UntrustedPath(f"refusing to use {folder}: it is a symbolic link")
    if st.st_uid != _uid():
        raise UntrustedPath(
            f"refusing to use {folder}: it belongs to {owner_name(st.st_uid)}, not to you "
            f"({owner_name(_uid())}); remove it or choose another folder"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode != 0o700:
        if not tighten and not mode & 0o022:
            return
        os.chmod(folder, 0o700)


def open_nofollow(path: Path, flags: int, mode: int = 0o600) -> int:
    """``os.open`` that never follows a symlink at ``path`` and refuses a file of another user."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        st = os.fstat(fd)
        if st.st_uid != _uid():
            raise UntrustedPath(f"refusing to use {path}: it belongs to {owner_name(st.st_uid)}, not to you")
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_home(home: Path) -> None:
    """Raise ``UntrustedPath`` when an existing home belongs to another user."""
    try:
        st = os.stat(home)
    except FileNotFoundError:
        return
    if st.st_uid != _uid():
        raise UntrustedPath(
            f"refusing to use the memviewer home {home}: it belongs to {owner_name(st.st_uid)}, "
            f"not to you ({owner_name(_uid())})"
        )


def read_store_id(home: Path) -> str | None:
    """The home's store id, or None when it has none yet (or it cannot be read)."""
    try:
        fd = os.open(Path(home) / STORE_ID_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        text = os.read(fd, 200).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    return text or None


def ensure_store_id(home: Path) -> str:
    """The home's store id, created once (0600, random) by the first hub that serves it."""
    found = read_store_id(home)
    if found:
        return found
    new = secrets.token_hex(8)
    try:
        fd = os.open(Path(home) / STORE_ID_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:  # another process won the race: use its id
        return read_store_id(home) or new
    try:
        os.write(fd, (new + "\n").encode("ascii"))
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
    return new


def resolved(path: str | Path) -> str:
    """The absolute path with symlinks resolved (a missing tail is kept as it is)."""
    return str(Path(path).expanduser().resolve(strict=False))


def hello_home_problem(hello: Any, home: str | Path, socket_path: str | Path) -> str | None:
    """Why the hub that sent ``hello`` does not serve ``home``, or None when it does.

    Two store ids decide when both are known (a home seen through another path, say a
    bind mount, is still the same store); otherwise the resolved paths must match. A
    hub that names no home (an older release) is accepted.
    """
    if not isinstance(hello, dict) or not isinstance(hello.get("home"), str):
        return None
    theirs = hello["home"]
    their_id = hello.get("store_id")
    mine = resolved(home)
    my_id = read_store_id(Path(mine))
    if isinstance(their_id, str) and their_id and my_id:
        if their_id == my_id:
            return None
    elif theirs == mine:
        return None
    return (
        f"the hub on {socket_path} serves the home {theirs}, not {mine}; "
        "stop it, or use its home (--home) or another socket"
    )


class ForeignHub(OSError):
    """The hub on the socket serves another home."""
