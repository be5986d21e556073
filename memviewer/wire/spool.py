"""Publisher spool files: the on-disk queue used while no hub answers.

Standard library only (the publisher imports it). Format: one command per
line, the same JSON object ``publish`` carries, each starting with
``{"cid":N,`` where ``N`` is the publisher's local sequence number. Naming
and locking keep a live publisher's file away from the hub:

* a publisher creates ``pub-<uuid7>-<pid>.tmp``, takes an exclusive
  ``flock`` on it, and only then renames it to ``.ndjson``, so the hub can
  never see an unlocked file that a live publisher still owns;
* the publisher holds that lock until it exits; the hub ingests only
  ``.ndjson`` files whose lock it can take (their owner is gone), and deletes
  a file only after ``apply_batch`` returned (durable).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from memviewer.ids import uuid7

log = logging.getLogger("memviewer.hub")

SUFFIX = ".ndjson"
TMP_SUFFIX = ".tmp"
READ_CHUNK = 1 << 20


def ensure_dir(directory: Path) -> None:
    """Create the spool folder 0700; refuse one that is another user's (or a symlink)."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = os.lstat(directory)
    uid = os.getuid() if hasattr(os, "getuid") else 0
    if st.st_uid != uid or not os.path.isdir(directory) or os.path.islink(directory):
        raise PermissionError(f"refusing the spool folder {directory}: it is not this user's own folder")
    if st.st_mode & 0o077:
        os.chmod(directory, 0o700)


def fsync_dir(directory: Path) -> None:
    """Make a create/rename/unlink in ``directory`` durable."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def cid_of(line: bytes) -> int | None:
    """The local sequence number of a spooled command line (None if unreadable)."""
    if line.startswith(b'{"cid":'):
        end = line.find(b",", 7)
        if end > 7:
            with contextlib.suppress(ValueError):
                return int(line[7:end])
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    cid = obj.get("cid") if isinstance(obj, dict) else None
    return cid if isinstance(cid, int) and not isinstance(cid, bool) else None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_lines(fd: int, pos: int, max_lines: int | None) -> tuple[list[bytes], int]:
    """Complete lines from byte ``pos`` on (a torn last line is left unread)."""
    lines: list[bytes] = []
    buf = b""
    while max_lines is None or len(lines) < max_lines:
        chunk = os.pread(fd, READ_CHUNK, pos + len(buf))
        if not chunk:
            break
        buf += chunk
        while max_lines is None or len(lines) < max_lines:
            nl = buf.find(b"\n")
            if nl < 0:
                break
            raw, buf = buf[:nl], buf[nl + 1 :]
            pos += nl + 1
            if raw.strip():
                lines.append(raw)
    return lines, pos


class SpoolFile:
    """One publisher's own spool file, locked for as long as the publisher lives."""

    def __init__(self, directory: Path) -> None:
        ensure_dir(directory)
        self.directory = directory
        stem = f"pub-{uuid7()}-{os.getpid()}"
        tmp = directory / f"{stem}{TMP_SUFFIX}"
        self.path = directory / f"{stem}{SUFFIX}"
        self.fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.rename(tmp, self.path)
        fsync_dir(directory)

    def append(self, lines: list[bytes]) -> int:
        """Append command lines and fsync (after this they survive a crash); returns bytes written."""
        if not lines:
            return 0
        data = b"\n".join(lines) + b"\n"
        _write_all(self.fd, data)
        os.fsync(self.fd)
        return len(data)

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def read(self, pos: int, max_lines: int | None = None) -> tuple[list[bytes], int]:
        return _read_lines(self.fd, pos, max_lines)

    def truncate(self) -> None:
        os.ftruncate(self.fd, 0)
        os.fsync(self.fd)

    def finish(self, keep: list[bytes]) -> Path | None:
        """Release the file: delete it when ``keep`` is empty, else leave exactly ``keep``.

        The rewrite goes through a ``.tmp`` file and a rename, so the hub sees
        either the old complete file or the new one, never a half-written one.
        """
        try:
            if not keep:
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
                fsync_dir(self.directory)
                return None
            tmp = self.path.with_suffix(TMP_SUFFIX)
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
            try:
                _write_all(fd, b"\n".join(keep) + b"\n")
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, self.path)
            fsync_dir(self.directory)
            return self.path
        finally:
            os.close(self.fd)  # releases the lock


REFUSED_SUFFIX = ".refused"


def _foreign(fd: int) -> str | None:
    """Why a spool file must not be replayed (another user's, or writable by others), or None."""
    st = os.fstat(fd)
    uid = os.getuid() if hasattr(os, "getuid") else 0
    if st.st_uid != uid:
        return f"it belongs to uid {st.st_uid}, not to this user (uid {uid})"
    if st.st_mode & 0o022:
        return f"other users may write it (mode {st.st_mode & 0o7777:04o})"
    return None


@contextlib.contextmanager
def _claimed(path: Path) -> Iterator[int | None]:
    """An fd on ``path`` with its exclusive lock, or None while its owner lives.

    A symlink is never followed, and a file that is not this user's own (planted by
    another local user) is never replayed: it is renamed ``*.refused`` and logged.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        yield None
        return
    except OSError as exc:  # a symlink (ELOOP) or unreadable: not a spool of ours
        log.error("refusing spool file %s: %s", path, exc)
        with contextlib.suppress(OSError):
            path.rename(path.with_name(path.name + REFUSED_SUFFIX))
        yield None
        return
    try:
        why = _foreign(fd)
        if why is not None:
            log.error("refusing spool file %s: %s; it is not replayed", path, why)
            with contextlib.suppress(OSError):
                path.rename(path.with_name(path.name + REFUSED_SUFFIX))
            yield None
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        yield fd if same else None  # renamed or removed under us: not ours to take
    finally:
        os.close(fd)


@contextlib.contextmanager
def ingest_lock(directory: Path) -> Iterator[bool]:
    """Whether this process may replay the folder's orphan files now (never waits).

    One replayer at a time per spool folder (the hub's ingestion, or a Publisher
    replaying what a dead one left): two of them, each taking a different file of
    one dead publisher, would store its commands out of order.
    """
    try:  # a lock on the folder itself: no extra file in it
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        log.error("cannot open the spool ingestion lock in %s: %s", directory, exc)
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def orphan_files(directory: Path) -> list[Path]:
    """Spool files in creation order (the name starts with a UUIDv7)."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.name.startswith("pub-") and p.suffix == SUFFIX)


def ingest(
    directory: Path,
    apply_batch: Callable[[list[Any]], list[dict[str, Any]]],
    *,
    chunk: int = 500,
) -> dict[str, int]:
    """Apply every unowned spool file in ``directory`` and delete it once durable.

    Runs on the hub's writer thread. Commands are idempotent (caller-minted
    ids), so a file that was partly delivered before its publisher died is
    safe to replay in full. A line that is not JSON (a write torn by a crash)
    is skipped and counted.
    """
    report = {"files": 0, "commands": 0, "errors": 0, "bad_lines": 0, "skipped_owned": 0, "refused_files": 0}
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        return report
    uid = os.getuid() if hasattr(os, "getuid") else 0
    if st.st_uid != uid or st.st_mode & 0o022 or not os.path.isdir(directory):
        log.error("refusing the spool folder %s: not this user's own private folder", directory)
        report["refused_files"] = len(orphan_files(directory)) if os.path.isdir(directory) else 0
        return report
    with ingest_lock(directory) as mine:
        if mine:
            _ingest_files(directory, apply_batch, chunk, report)
        else:
            report["busy"] = 1  # a publisher is replaying here: the next scan takes the rest
    return report


def _ingest_files(
    directory: Path,
    apply_batch: Callable[[list[Any]], list[dict[str, Any]]],
    chunk: int,
    report: dict[str, int],
) -> None:
    for path in orphan_files(directory):
        with _claimed(path) as fd:
            if fd is None:
                if path.exists():
                    report["skipped_owned"] += 1
                else:
                    report["refused_files"] += int(path.with_name(path.name + REFUSED_SUFFIX).exists())
                continue
            lines, _ = _read_lines(fd, 0, None)
            commands: list[Any] = []
            for line in lines:
                try:
                    commands.append(json.loads(line))
                except ValueError:
                    report["bad_lines"] += 1
            for start in range(0, len(commands), chunk):
                results = apply_batch(commands[start : start + chunk])
                report["errors"] += sum(1 for r in results if "error" in r)
            report["commands"] += len(commands)
            report["files"] += 1
            path.unlink()
            fsync_dir(directory)
            log.info("ingested spool %s: %d commands", path.name, len(commands))
