"""Replaying the spool files that dead publishers left in this publisher's spool folder.

The hub does the same at start and every 30 s, but a restarted agent should not wait for
that: the sender replays them each time it connects, before its own commands. The safety
rules are the hub's (``wire.spool``): one replayer per folder at a time, never a symlink,
another user's or a group/world-writable file, never a file a live publisher holds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from memviewer.publisher.answers import refusal, retry_later
from memviewer.publisher.state import FRAME_OVERHEAD, Shared, log
from memviewer.wire import protocol, spool
from memviewer.wire.syncclient import HubUnavailable


class Orphans:
    """Sends dead publishers' commands with the sender's ``send`` (on the sender thread)."""

    def __init__(
        self, shared: Shared, send: Callable[[list[bytes]], list[Any]], frame_limit: Callable[[], int]
    ):
        self.shared = shared
        self._send = send
        self._frame_limit = frame_limit

    def waiting(self) -> bool:
        """Whether the folder holds spool files that are not this publisher's (OSError: unreadable)."""
        with self.shared.cond:
            own = {seg.path for seg in self.shared.segments}
        return any(p not in own for p in spool.orphan_files(self.shared.opts.spool_dir))

    def adopt(self) -> None:
        """Replay the spool files of publishers that are gone (their lock is free), oldest
        first, then delete each; a file refused by the safety rules is renamed ``*.refused``."""
        s = self.shared
        directory = s.opts.spool_dir
        try:
            st = os.lstat(directory)
        except FileNotFoundError:
            return
        if st.st_uid != os.getuid() or st.st_mode & 0o022 or not os.path.isdir(directory):
            log.error("not replaying spool files in %s: not this user's own private folder", directory)
            return
        with s.cond:
            own = {seg.path for seg in s.segments}
        with spool.ingest_lock(directory) as mine:
            if not mine:  # the hub (or another publisher) is replaying them right now
                return
            for path in spool.orphan_files(directory):
                if path in own or s.stopping:
                    continue
                with spool._claimed(path) as fd:
                    if fd is None:
                        continue
                    count = self._replay_fd(fd, path.name)
                    path.unlink()
                    spool.fsync_dir(directory)
                with s.cond:
                    s.adopted_files += 1
                    s.adopted_commands += count
                log.info("replayed the spool %s of a publisher that is gone: %d commands", path.name, count)

    def _replay_fd(self, fd: int, name: str) -> int:
        budget = self._frame_limit() - FRAME_OVERHEAD
        pos, count = 0, 0
        while True:
            lines, pos = spool._read_lines(fd, pos, self.shared.opts.max_batch)
            if not lines:
                return count
            chunk: list[bytes] = []
            size = 0
            for ln in _readable(lines, name):
                if chunk and size + len(ln) + 1 > budget:
                    self._replay_chunk(chunk, name)
                    count += len(chunk)
                    chunk, size = [], 0
                chunk.append(ln)
                size += len(ln) + 1
            if chunk:
                self._replay_chunk(chunk, name)
                count += len(chunk)

    def _replay_chunk(self, lines: list[bytes], name: str) -> None:
        """Send one chunk of an orphan spool; refusals are reported like our own (``cid`` None)."""
        try:
            results: list[Any] = self._send(lines)
        except protocol.RpcError as exc:
            if retry_later(exc, whole_request=True) or len(lines) == 1:
                if retry_later(exc, whole_request=True):
                    raise
                results = [{"error": exc.to_dict()}]
            else:
                for ln in lines:  # isolate the bad one
                    self._replay_chunk([ln], name)
                return
        if any(isinstance(r, dict) and retry_later(r.get("error")) for r in results):
            raise HubUnavailable(None, "the hub answered 'not now'")
        failed = []
        for ln, res in zip(lines, results, strict=False):
            if isinstance(res, dict) and "error" in res:
                item = refusal(0, ln, res["error"])
                item["cid"] = None
                item["spool_file"] = name
                failed.append(item)
                log.warning("hub refused a command replayed from %s (%s): %s", name, item["op"], res["error"])
        if failed:
            s = self.shared
            with s.cond:
                s.errors += len(failed)
                s.error_log.extend(failed)
                for item in failed:
                    s.add_refusal_locked(item)
            s.report_refusals(failed)


def _readable(lines: list[bytes], name: str) -> list[bytes]:
    """The lines that are JSON; a write torn by the crash is skipped (and logged)."""
    good: list[bytes] = []
    for ln in lines:
        try:
            json.loads(ln)
        except ValueError:
            log.warning("skipping an unreadable line in the spool %s", name)
            continue
        good.append(ln)
    return good
