"""Follow a PraisonAI session folder (``~/.praisonai/sessions``) from inside the hub.

A PraisonAI ``DefaultSessionStore`` rewrites a session's whole ``<id>.json`` file
(temp file + ``os.replace``) on every message. The watcher (``watchfiles``: inotify,
or polling where inotify is missing) sees the change, reads and parses the file in a
thread, and hands the result to the hub's writer thread as the same import that
``memviewer import praisonai`` runs, with the same origin (``praisonai:<path>``), so
watching a file and importing it by hand agree. The import is a diff by turn id
(``SessionManager.import_session``): only turns not yet stored are inserted, nothing
is re-inserted or re-indexed, and a file whose bytes did not change is not even
parsed again.

* ``*.json.lock`` and PraisonAI's ``*.tmp`` files are ignored (only ``*.json``).
* A file that is not valid JSON (caught mid-write by a non-atomic writer) is counted
  (``invalid_json``) and retried on its next change event.
* A deleted file deletes nothing: the stored session stays as it was (``deleted_files``).
* A file that shrinks deletes nothing either: PraisonAI's file is its window (a
  ``DefaultSessionStore(max_messages=N)`` keeps the last N messages), not the user's history.
  Stored turns the file no longer holds are kept and marked archived (``kept_turns``), in
  their place before the file's turns (``SessionManager.import_session(keep_missing=True)``).
* Only regular files inside the folder are read. The path is ``stat``-ed before anything is
  opened: a FIFO, a device, a socket (or a symlink to one, such as ``/dev/zero``) is refused
  unopened, and a path whose real location is outside the folder (a symlink, a symlinked
  sub-folder) is refused unless ``watch_follow_symlinks`` is set (``refused_files``). A
  file over ``watch_max_file_bytes`` (default 1 GiB) is reported and not read
  (``oversized_files``); files under ``big_file_bytes`` (16 MiB) are read whole with that
  bound, bigger ones in 1 MiB blocks.
* No file holds the others up: every read step runs on the watcher's own threads and is
  given up after ``watch_read_timeout`` seconds (default 30; ``stalled_reads``); the file
  is retried on its next change, the rest of the queue goes on, and while such a read is
  still stuck the status says ``state: stalled`` (``memviewer doctor`` fails on it).
* Sub-agent transcripts in ``metadata.agent_histories`` become child sessions
  (``<session>.agent.<key>``, ``parent_session_id`` = the session), so they are searchable.
* A file of ``big_file_bytes`` or more (default ``stream.STREAM_MIN_BYTES``, the
  threshold of ``memviewer import praisonai``) is never read whole: hashed in 1 MiB blocks,
  checked and read by ``chunked``, and stored a chunk of turns per writer-thread job
  (``session.chunked_import.ChunkedImport``; see ``bigfile``). A grown or edited
  big file is reconciled chunk by chunk (new turns inserted, changed ones updated, dropped
  ones removed at the end), nothing twice; an interrupted run is continued by the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import hashlib
import logging
import os
import stat
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

from memviewer.errors import MemviewerError
from memviewer.praisonai.bigfile import AGENT_HISTORIES
from memviewer.sources.status import SourceStatus

log = logging.getLogger("memviewer.sources.praisonai")

#: Files over this many bytes are reported and never read (``watch_max_file_bytes``).
MAX_FILE_BYTES = 1 << 30
#: Seconds one read step may take before the watcher gives up on the file (``watch_read_timeout``).
READ_TIMEOUT = 30.0
#: Threads the watcher reads on (its own: a stuck read never takes the hub's executor).
READ_THREADS = 4


class Stalled(Exception):
    """A read step outlived ``read_timeout``; its thread is left to finish on its own."""


def inotify_available() -> bool:
    """Whether the kernel gives this process an inotify instance (Linux); elsewhere the
    native backend of ``watchfiles`` (FSEvents, ReadDirectoryChangesW) is assumed."""
    if not sys.platform.startswith("linux"):
        return True
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
    except (OSError, AttributeError):
        return False
    if fd < 0:
        return False
    os.close(fd)
    return True


def is_session_file(path: str | Path) -> bool:
    name = Path(path).name
    return name.endswith(".json") and not name.startswith(".")


def child_session_id(parent_id: str, agent_key: str) -> str:
    return f"{parent_id}.agent.{agent_key}"


def sessions_from_file(data: Any, stem: str, mtime: float | None) -> list[tuple[dict[str, Any], list[Any]]]:
    """(session row, turns) for the file's session and one per sub-agent transcript.

    The parent's metadata keeps the list of child ids instead of the transcripts
    (they are stored once, as the child sessions' turns). Raises ``ForeignFileError``.
    """
    from memviewer.praisonai.format import parse_session

    raw: dict[Any, Any] | None = None
    if isinstance(data, dict) and isinstance(data.get("metadata"), dict):
        found = data["metadata"].get(AGENT_HISTORIES)
        if isinstance(found, dict):
            raw = found
            data = {**data, "metadata": {k: v for k, v in data["metadata"].items() if k != AGENT_HISTORIES}}
    session, turns = parse_session(data, stem, mtime)
    return [(session, turns), *child_sessions(session, raw or {})]


def child_sessions(
    session: dict[str, Any], histories: dict[Any, Any]
) -> list[tuple[dict[str, Any], list[Any]]]:
    """The child sessions of ``metadata.agent_histories`` (already taken out of the parent's
    metadata); records their ids in the parent's metadata. Raises ``ForeignFileError``."""
    from memviewer.praisonai.format import ForeignFileError, parse_session

    lists = {str(k): v for k, v in histories.items() if isinstance(v, list)}
    if not lists:
        return []
    praison = session["meta"]["praisonai"]
    out = []
    children = []
    for key, messages in sorted(lists.items()):
        cid = child_session_id(session["id"], key)
        child_data = {
            "session_id": cid,
            "messages": messages,
            "created_at": praison.get("created_at"),
            "agent_name": key,
            "user_id": praison.get("user_id"),
            "parent_session_id": session["id"],
        }
        try:
            child, child_turns = parse_session(child_data, cid, session["started_at"])
        except ForeignFileError as exc:
            raise ForeignFileError(f"metadata.agent_histories[{key!r}]: {exc}") from None
        child["meta"]["metadata"] = {"agent_key": key}
        out.append((child, child_turns))
        children.append(cid)
    session["meta"]["metadata"][AGENT_HISTORIES] = {"child_sessions": children}
    return out


class PraisonAIWatcher:
    """One watched folder; ``start(hub)`` / ``stop()`` run on the hub's event loop."""

    kind = "praisonai"

    def __init__(
        self,
        folder: Path,
        *,
        force_polling: bool | None = None,
        debounce_ms: int = 60,
        step_ms: int = 20,
        rescan_interval: float = 2.0,
        big_file_bytes: int | None = None,
        follow_symlinks: bool = False,
        max_file_bytes: int = MAX_FILE_BYTES,
        read_timeout: float = READ_TIMEOUT,
    ) -> None:
        """``big_file_bytes``: files this big or bigger are streamed and stored in chunks
        (default ``stream.STREAM_MIN_BYTES``, the threshold of ``memviewer import
        praisonai``). ``follow_symlinks``: read files whose real path is outside the folder.
        ``max_file_bytes``: bigger files are reported, not read. ``read_timeout``: seconds
        one read step may take before the file is given up on (the others go on)."""
        from memviewer.praisonai import stream

        self.big_file_bytes = stream.STREAM_MIN_BYTES if big_file_bytes is None else big_file_bytes
        self.folder = Path(folder).expanduser()
        if force_polling is None:  # watchfiles' own switch is honoured too
            env = os.environ.get("WATCHFILES_FORCE_POLLING", "").strip().lower()
            force_polling = not inotify_available() or env not in ("", "0", "false", "no", "off")
        self.force_polling = force_polling
        self.debounce_ms = debounce_ms
        self.step_ms = step_ms
        self.rescan_interval = rescan_interval
        self.follow_symlinks = follow_symlinks
        self.max_file_bytes = max_file_bytes
        self.read_timeout = read_timeout
        self.state = SourceStatus(self.kind, str(self.folder))
        self.state.counters.update(
            {
                "files_seen": 0,
                "files_imported": 0,
                "turns_added": 0,
                "sessions_created": 0,
                "invalid_json": 0,
                "rejected_files": 0,
                "deleted_files": 0,
                "unchanged_files": 0,
                "chunked_files": 0,
                "chunks_stored": 0,
                "turns_kept": 0,
                "refused_files": 0,
                "oversized_files": 0,
                "stalled_reads": 0,
            }
        )
        self._pool: ThreadPoolExecutor | None = None
        self._stuck: dict[Path, float] = {}  # reads given up on whose thread has not returned
        self._busy: tuple[Path, float] | None = None  # the file the worker is on, since when
        self._failing = False  # the last file's sync failed in the watcher or the store
        self._hub: Any = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[Any] | None = None
        self._worker: asyncio.Task[Any] | None = None
        self._queue: asyncio.Queue[Path] = asyncio.Queue()
        self._queued: set[Path] = set()
        self._digest: dict[Path, str] = {}  # bytes last imported, per file

    # -- lifecycle -------------------------------------------------------------
    async def start(self, hub: Any) -> None:
        self._hub = hub
        self._stop.clear()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="memviewer-praisonai-read")
        self._worker = asyncio.create_task(self._work(), name=f"memviewer-praisonai-import:{self.folder}")
        self._task = asyncio.create_task(self._watch(), name=f"memviewer-praisonai-watch:{self.folder}")

    async def stop(self) -> None:
        self._stop.set()
        for task in (self._task, self._worker):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self.state.connected = False
        if self._pool is not None:  # a stuck read's thread is not waited for
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def status(self) -> dict[str, Any]:
        """The source's status plus ``state``: ``watching``, ``waiting`` (no folder yet),
        ``stalled`` (a read is stuck, or one file has held the worker over its bound) or
        ``failing`` (the last file failed in the watcher or the store)."""
        out = self.state.to_dict()
        out["polling"] = self.force_polling
        out["queued"] = len(self._queued)
        now = time.monotonic()
        busy = self._busy if self._busy and now - self._busy[1] > 2 * self.read_timeout else None
        stuck = sorted(self._stuck.items(), key=lambda kv: kv[1])
        out["stuck_reads"] = [{"path": str(p), "seconds": round(now - t, 1)} for p, t in stuck]
        if busy is not None:
            out["busy"] = {"path": str(busy[0]), "seconds": round(now - busy[1], 1)}
        if not self.state.connected:
            out["state"] = "waiting"
        elif stuck or busy is not None:
            out["state"] = "stalled"
        elif self._failing:
            out["state"] = "failing"
        else:
            out["state"] = "watching"
        return out

    # -- watching --------------------------------------------------------------
    async def _watch(self) -> None:
        import watchfiles

        while not self._stop.is_set():
            if not self.folder.is_dir():  # wait for the folder (PraisonAI makes it on first save)
                if self.state.last_error is None:
                    log.warning("watched PraisonAI folder %s does not exist (yet); waiting", self.folder)
                self.state.error(f"{self.folder} is not a folder (waiting for it)")
                self.state.connected = False
                await asyncio.sleep(self.rescan_interval)
                continue
            self.state.connected = True
            self.state.last_error = None
            log.info(
                "watching PraisonAI sessions in %s%s", self.folder, " (polling)" if self.force_polling else ""
            )
            self._scan()
            try:
                async for changes in watchfiles.awatch(
                    self.folder,
                    watch_filter=lambda _change, path: is_session_file(path),
                    stop_event=self._stop,
                    debounce=self.debounce_ms,
                    step=self.step_ms,
                    force_polling=self.force_polling,
                    poll_delay_ms=100,
                    recursive=True,
                    ignore_permission_denied=True,
                ):
                    for _change, path in sorted(changes, key=lambda c: c[1]):
                        self._enqueue(Path(path))
                    if not self.folder.is_dir():
                        break
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # inotify limits, a vanished folder: poll instead
                log.warning("watching %s failed (%s); switching to polling", self.folder, exc)
                self.state.error(f"watch failed: {exc}")
                self.force_polling = True
                await asyncio.sleep(self.rescan_interval)

    def _scan(self) -> None:
        with contextlib.suppress(OSError):
            for path in sorted(self.folder.rglob("*.json")):
                if is_session_file(path):
                    self._enqueue(path)

    def _enqueue(self, path: Path) -> None:
        if path not in self._queued:
            self._queued.add(path)
            self._queue.put_nowait(path)

    async def _work(self) -> None:
        while True:
            path = await self._queue.get()
            self._queued.discard(path)
            self._busy = (path, time.monotonic())
            try:
                await self._sync(path)
                self._failing = False
            except asyncio.CancelledError:
                raise
            except Stalled:
                self.state.count("stalled_reads")
                self.state.error(
                    f"{path}: a read took over {self.read_timeout:g} s; given up (retried on its next change)"
                )
                log.error(
                    "PraisonAI file %s: a read took over %g s; skipped, the other files go on",
                    path,
                    self.read_timeout,
                )
                self._digest.pop(path, None)
            except MemviewerError as exc:
                # The store failed (full disk …) or the hub is stopping: keep the file queued state
                # clean and let the next change (or the next start's scan) retry it.
                self.state.count("store_refusals")
                self.state.error(f"{path}: {exc.message}")
                log.error("PraisonAI file %s not stored: %s", path, exc.message)
                self._digest.pop(path, None)
                self._failing = True
            except Exception as exc:
                self.state.count("internal_errors")
                self.state.error(f"{path}: {type(exc).__name__}: {exc}")
                log.exception("PraisonAI file %s could not be synced", path)
                self._failing = True
            finally:
                self._busy = None

    async def _in_thread(self, path: Path, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` on the watcher's threads, given up after ``read_timeout`` (``Stalled``).
        A thread given up on is left running; the path is listed as stuck until it returns."""
        fut = self._spawn(fn, *args)
        return await self._wait(path, fut)

    def _spawn(self, fn: Any, *args: Any) -> asyncio.Future[Any]:
        return asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def _wait(self, path: Path, fut: asyncio.Future[Any]) -> Any:
        done, _ = await asyncio.wait({fut}, timeout=self.read_timeout)
        if not done:
            since = time.monotonic() - self.read_timeout
            self._stuck[path] = since
            fut.add_done_callback(lambda _f: self._stuck.pop(path, None))
            raise Stalled(path)
        return fut.result()

    async def _sync(self, path: Path) -> None:
        """Check and open (a thread), read and parse (a thread) and import (the writer
        thread) one file; a big one in chunks. Each thread step is bounded (``_wait``)."""
        if path in self._stuck:  # a thread still blocks on it: do not start a second
            self.state.count("stalled_reads")
            return
        folder = os.path.realpath(self.folder)
        opened = self._spawn(open_session_file, path, folder, self.follow_symlinks, self.max_file_bytes)
        try:
            kind, payload = await self._wait(path, opened)
        except Stalled:
            opened.add_done_callback(_close_opened)
            raise
        if kind != "ok":
            self._settled(path, kind, payload)
            return
        fh, size = payload
        if size >= self.big_file_bytes:
            await self._sync_big(path, fh)
            return
        pending = self._spawn(_read, fh, path, self._digest.get(path), self.big_file_bytes)
        try:
            kind, payload = await self._wait(path, pending)
        finally:
            pending.add_done_callback(lambda _f: fh.close())
        if kind == "big":  # it grew past the bound while we looked: read it the big way
            kind, payload = await self._in_thread(
                path, open_session_file, path, folder, self.follow_symlinks, self.max_file_bytes
            )
            if kind != "ok":
                self._settled(path, kind, payload)
                return
            await self._sync_big(path, payload[0])
            return
        if self._settled(path, kind, payload):
            return
        digest, sessions = payload
        origin = f"praisonai:{path.resolve()}"
        results = await self._hub.write(_import_all, self._hub.service, sessions, origin)
        self._account(path, digest, results)

    def _settled(self, path: Path, kind: str, payload: Any) -> bool:
        """Count and report a file that is gone, unchanged or bad; False when it is to import."""
        if kind == "gone":
            if path in self._digest:
                self._digest.pop(path, None)
                self.state.count("deleted_files")
                log.info("PraisonAI file %s was deleted; its stored session is kept", path)
            return True
        if kind == "same":
            self.state.count("unchanged_files")
            return True
        if kind in ("refused", "oversized"):
            self.state.count("refused_files" if kind == "refused" else "oversized_files")
            self.state.error(f"{path}: {payload}")
            log.warning("PraisonAI file %s not read: %s", path, payload)
            return True
        self.state.count("files_seen")
        return self._bad(path, kind, payload)

    def _bad(self, path: Path, kind: str, why: Any) -> bool:
        if kind == "invalid_json":
            self.state.count("invalid_json")
            self.state.error(f"{path}: {why}")
            log.warning(
                "PraisonAI file %s is not valid JSON yet (%s); retrying on its next change", path, why
            )
            return True
        if kind == "rejected":
            self.state.count("rejected_files")
            self.state.error(f"{path}: {why}")
            log.warning("PraisonAI file %s skipped: %s", path, why)
            return True
        return False

    async def _sync_big(self, path: Path, opened: BinaryIO) -> None:
        """A big file: hashed, checked and read on worker threads, never whole; each chunk
        of turns is one writer-thread job (``bigfile``), so publishes and other
        files' imports interleave with it. An interrupted or failed run leaves whole chunks;
        the next run of the same file continues it (turns are keyed by id, nothing twice)."""
        from memviewer.praisonai import bigfile
        from memviewer.store.db import storage_failure

        fh = opened
        big: Any = None
        first = self._spawn(bigfile.hashed, fh, self._digest.get(path))
        pending: asyncio.Future[Any] | None = first
        try:
            kind, payload = await self._wait(path, first)
            pending = None
            if self._settled(path, kind, payload):
                return
            digest = payload
            pending = self._spawn(bigfile.check, fh, path, child_sessions)
            kind, payload = await self._wait(path, pending)
            pending = None
            if self._bad(path, kind, payload):
                return
            big, chunks, children = payload
            self.state.count("chunked_files")
            service = self._hub.service
            origin = f"praisonai:{path.resolve()}"
            sid = big.session["id"]
            try:
                job = service.manager.chunked_import(big.session, origin=origin, keep_missing=True)
                while True:
                    pending = self._spawn(bigfile.next_chunk, chunks)
                    kind, turns = await self._wait(path, pending)
                    pending = None
                    if kind == "end":
                        break
                    if kind != "ok":  # changed in place while read: the next change retries
                        self._bad(path, kind, f"{turns} (after {job.chunks} chunks stored)")
                        return
                    await self._hub.write(job.add, turns)
                    self.state.count("chunks_stored")
                parent = await self._hub.write(service.finish_chunked_import, job)
            except MemviewerError as exc:
                if storage_failure(exc) is not None or exc.code == "internal":
                    raise
                parent = {"session_id": sid, "error": exc.message}
            results = [parent]
            if children:
                results += await self._hub.write(_import_all, service, children, origin, 1)
            self._account(path, digest, results)
            await self._merge_keyword_index()
        finally:
            if pending is not None and not pending.done():  # cancelled mid-read: stop it, then close
                if big is not None:
                    big.interrupted = True
                pending.add_done_callback(lambda _f: fh.close())
            else:
                fh.close()

    async def _merge_keyword_index(self) -> None:
        """After a big file: its chunks left a segment each; merge them now (bounded writer
        jobs, ``Hub.merge_keyword_index``) rather than at the hub's next upkeep pass. A
        failure (a full disk) is logged; the import is stored and upkeep tries again."""
        merge = getattr(self._hub, "merge_keyword_index", None)
        if merge is None:
            return
        try:
            await merge(1)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("keyword index not merged after a big PraisonAI file: %s", exc)

    def _account(self, path: Path, digest: str, results: list[dict[str, Any]]) -> None:
        refused = [r for r in results if "error" in r]
        for r in refused:
            self.state.count("rejected_files")
            self.state.error(f"{path}: {r['error']}")
            log.warning("PraisonAI file %s: session %s refused: %s", path, r["session_id"], r["error"])
        added = sum(r.get("new_turns", 0) for r in results)
        self.state.count("files_imported")
        self.state.count("turns_added", added)
        self.state.count("turns_kept", sum(r.get("kept_turns", 0) for r in results))
        self.state.count("sessions_created", sum(1 for r in results if r.get("created")))
        if added or any(r.get("created") for r in results):
            self.state.delivered()
        if not refused:
            self._digest[path] = digest


def _inside(real: str, folder: str) -> bool:
    return real == folder or real.startswith(folder.rstrip(os.sep) + os.sep)


def _file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def open_session_file(path: Path, folder: str, follow_symlinks: bool, max_bytes: int) -> tuple[str, Any]:
    """Thread: ``("gone"|"refused"|"oversized"|"rejected", why)`` or ``("ok", (fh, size))``.

    Checked before anything is opened (``stat`` follows a symlink to what it names): only a
    regular file, whose real path is inside ``folder`` (the folder's real path) unless
    ``follow_symlinks``, of at most ``max_bytes``. The open itself does not follow a
    symlink put in the path's place meanwhile, nor block, and the opened file is checked
    again, so a swap between the check and the open is refused too (retried on its next
    change)."""
    try:
        lst = os.lstat(path)
        st = os.stat(path)
        real = os.path.realpath(path)
    except FileNotFoundError:
        return "gone", None
    except OSError as exc:
        return "rejected", f"cannot read: {exc.strerror or exc}"
    if not follow_symlinks and not _inside(real, folder):
        return "refused", f"its real path {real} is outside the watched folder (watch_follow_symlinks is off)"
    if not stat.S_ISREG(st.st_mode):
        return "refused", f"{_file_kind(st.st_mode)}, not a regular file; not opened"
    if st.st_size > max_bytes:
        return "oversized", f"{st.st_size} bytes, over watch_max_file_bytes ({max_bytes}); not read"
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    if not stat.S_ISLNK(lst.st_mode):
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return "gone", None
    except OSError as exc:
        return "rejected", f"cannot read: {exc.strerror or exc}"
    fst = os.fstat(fd)
    if not stat.S_ISREG(fst.st_mode) or (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        return "rejected", "replaced while it was checked; retried on its next change"
    return "ok", (os.fdopen(fd, "rb"), fst.st_size)


def _close_opened(fut: asyncio.Future[Any]) -> None:
    """A check-and-open given up on that finished later: close what it opened."""
    if fut.cancelled() or fut.exception() is not None:
        return
    kind, payload = fut.result()
    if kind == "ok":
        payload[0].close()


def _read(fh: BinaryIO, path: Path, last_digest: str | None, limit: int) -> tuple[str, Any]:
    """Thread: at most ``limit`` bytes of the open file; ``("same"|"invalid_json"|"rejected",
    why)``, ``("big", None)`` when it holds more, or ``("ok", (digest, sessions))``."""
    from memviewer.praisonai.format import ForeignFileError, foreign_format
    from memviewer.timeutil import parse_ts
    from memviewer.wire.protocol import loads_strict

    try:
        raw = fh.read(limit + 1)
        mtime = os.fstat(fh.fileno()).st_mtime
    except OSError as exc:
        return "rejected", f"cannot read: {exc.strerror or exc}"
    if len(raw) > limit:
        return "big", None
    digest = hashlib.sha256(raw).hexdigest()
    if digest == last_digest:
        return "same", None
    try:
        data = loads_strict(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "invalid_json", "not valid UTF-8"
    except ValueError as exc:
        other = foreign_format(raw[:4096])
        if other:
            return "rejected", other
        return "invalid_json", str(exc)[:200]
    try:
        stamp = parse_ts(mtime)
    except ValueError:
        stamp = None
    stem = path.name[: -len(".json")]
    try:
        return "ok", (digest, sessions_from_file(data, stem, stamp))
    except ForeignFileError as exc:
        return "rejected", str(exc)


def _import_all(
    service: Any, sessions: list[tuple[dict[str, Any], list[Any]]], origin: str, first: int = 0
) -> list[dict[str, Any]]:
    """Writer thread: the parent first, then its children; a refused session fails alone.
    ``first`` is the position of ``sessions[0]`` in the file (1: children only)."""
    from memviewer.store.db import storage_failure

    out = []
    for i, (session, turns) in enumerate(sessions, first):
        where = origin if i == 0 else f"{origin}#agent:{session['meta']['metadata'].get('agent_key')}"
        try:
            out.append(service.import_session(session, turns, origin=where, keep_missing=True))
        except MemviewerError as exc:
            if storage_failure(exc) is not None or exc.code == "internal":
                raise
            out.append({"session_id": session["id"], "error": exc.message})
    return out
