"""The PraisonAI folder watcher against hostile and shrinking files: a real hub process
(``serve --watch-praisonai``), real watchfiles, praisonaiagents' own ``DefaultSessionStore``.

* a ``*.json`` symlink to ``/dev/zero``, a FIFO named ``*.json`` and a symlink out of the
  folder to a 0600 file elsewhere are refused unopened, and the other files still arrive;
* a store that keeps only its last 10 messages, or a file rewritten with none, never
  removes the turns stored before;
* one stuck read is given up on after its bound, the others go on, and ``doctor`` says
  the watcher is stalled (an in-process hub, the read made to block on purpose).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import praisonaiagents.session.store as praisonai_store  # dev extra: missing fails, never skips
import pytest
from waiting import wait_for

from memviewer.praisonai import watch as praisonai_watch
from memviewer.praisonai.watch import PraisonAIWatcher
from memviewer.sources.status import doctor_check
from memviewer.wire.hub import Hub
from memviewer.wire.remote import RemoteService
from memviewer.wire.testing import HubProcess


def turns_of(remote: RemoteService, sid: str) -> list[dict[str, Any]]:
    try:
        return list(remote.session(sid)["turns"])
    except Exception:
        return []


def watcher_status(remote: RemoteService) -> dict[str, Any]:
    return next(s for s in remote.stats()["hub"]["sources"] if s["kind"] == "praisonai")


def session_file(sid: str, *texts: str) -> str:
    msgs = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": t, "timestamp": 1714557600 + i}
        for i, t in enumerate(texts)
    ]
    return json.dumps({"session_id": sid, "agent_name": "bot", "messages": msgs})


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def start_hub(tmp_path: Path, short_tmp: Path, folder: Path, **env: str) -> tuple[HubProcess, RemoteService]:
    hub = HubProcess(
        tmp_path / "home",
        short_tmp / "hub.sock",
        args=("--no-index", "--watch-praisonai", str(folder)),
        extra_env=env,
    )
    hub.start()
    remote = RemoteService(hub.socket_path)
    wait_for(lambda: watcher_status(remote)["connected"], 10.0, "the watcher")
    return hub, remote


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A valid PraisonAI session in a 0600 file in another folder (someone else's path)."""
    other = tmp_path / "elsewhere"
    other.mkdir(mode=0o700)
    secret = other / "private.json"
    secret.write_text(session_file("stolen", "the root password is hunter2"))
    secret.chmod(0o600)
    return secret


@pytest.fixture
def hostile_folder(tmp_path: Path, outside: Path) -> Iterator[Path]:
    folder = tmp_path / "sessions"
    folder.mkdir()
    (folder / "zero.json").symlink_to("/dev/zero")
    os.mkfifo(folder / "pipe.json")
    (folder / "out.json").symlink_to(outside)
    (folder / "inside-link.json").symlink_to(folder / "real.data")  # stays inside: followed
    (folder / "real.data").write_text(session_file("linked", "a link that stays inside"))
    yield folder


@pytest.mark.integration
def test_hostile_files_are_refused_unopened_and_the_rest_arrive(
    tmp_path: Path, short_tmp: Path, hostile_folder: Path
) -> None:
    folder = hostile_folder
    hub, remote = start_hub(tmp_path, short_tmp, folder)
    try:
        # the scan at start met all four; a good file written afterwards arrives, so nothing blocked
        (folder / "good.json").write_text(session_file("good", "is the deploy frozen?", "yes, until Monday"))
        wait_for(lambda: len(turns_of(remote, "good")) == 2, 15.0, "the good file")
        wait_for(lambda: watcher_status(remote)["counters"]["refused_files"] >= 3, 15.0, "3 refusals")
        status = watcher_status(remote)
        assert status["state"] == "watching" and status["stuck_reads"] == []
        assert turns_of(remote, "linked")[0]["content"] == "a link that stays inside"
        ids = {s["session_id"] for s in remote.sessions()["sessions"]}
        assert "stolen" not in ids  # the 0600 file out of the folder was never read
        assert ids == {"good", "linked"}
        assert not remote.search("hunter2")["results"]
        assert rss_kib(hub.pid) < 400 * 1024  # /dev/zero read unbounded took 3.9 GB in 9 s

        # touching the FIFO and the /dev/zero link again is refused again, never opened
        refused = status["counters"]["refused_files"]
        os.utime(folder / "pipe.json")
        (folder / "zero2.json").symlink_to("/dev/zero")
        (folder / "more.json").write_text(session_file("more", "still going"))
        wait_for(lambda: len(turns_of(remote, "more")) == 1, 15.0, "the next good file")
        wait_for(lambda: watcher_status(remote)["counters"]["refused_files"] > refused, 15.0, "refused")

        check = doctor_check(remote.stats()["hub"]["sources"])
        assert check["ok"] is True  # bad files are reported, the watcher itself is fine
        assert "connected" in check["detail"] and "refused_files" in check["detail"]
    finally:
        remote.close()
        hub.stop()


@pytest.mark.integration
def test_follow_symlinks_reads_outside_files_but_never_devices(
    tmp_path: Path, short_tmp: Path, hostile_folder: Path
) -> None:
    folder = hostile_folder
    hub, remote = start_hub(tmp_path, short_tmp, folder, MEMVIEWER_WATCH_FOLLOW_SYMLINKS="true")
    try:
        wait_for(lambda: len(turns_of(remote, "stolen")) == 1, 15.0, "the followed link")
        wait_for(lambda: watcher_status(remote)["counters"]["refused_files"] >= 2, 15.0, "2 refusals")
        assert watcher_status(remote)["counters"]["refused_files"] == 2  # the FIFO and /dev/zero
        assert "not a regular file" in (watcher_status(remote)["last_error"] or "")
    finally:
        remote.close()
        hub.stop()


@pytest.mark.integration
def test_oversized_files_are_reported_not_read(tmp_path: Path, short_tmp: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    hub, remote = start_hub(tmp_path, short_tmp, folder, MEMVIEWER_WATCH_MAX_FILE_BYTES="4096")
    try:
        (folder / "huge.json").write_text(session_file("huge", "x" * 5000))
        (folder / "small.json").write_text(session_file("small", "fits"))
        wait_for(lambda: len(turns_of(remote, "small")) == 1, 15.0, "the small file")
        wait_for(lambda: watcher_status(remote)["counters"]["oversized_files"] == 1, 15.0, "oversized")
        assert turns_of(remote, "huge") == []
        assert "watch_max_file_bytes" in watcher_status(remote)["last_error"]
    finally:
        remote.close()
        hub.stop()


@pytest.mark.integration
def test_a_shrinking_praisonai_window_never_removes_stored_turns(tmp_path: Path, short_tmp: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    hub, remote = start_hub(tmp_path, short_tmp, folder)
    try:
        store = praisonai_store.DefaultSessionStore(session_dir=str(folder), max_messages=10)
        texts = [f"message number {i}: the build cache lives in /srv/cache-{i}" for i in range(30)]
        for i, text in enumerate(texts):
            store.add_message("win-1", "user" if i % 2 == 0 else "assistant", text)
            # an agent waits for its model between messages: the watcher sees each window
            wait_for(lambda n=i + 1: len(turns_of(remote, "win-1")) == n, 15.0, f"turn {i + 1}")
        on_disk = json.loads((folder / "win-1.json").read_text())
        assert len(on_disk["messages"]) == 10  # PraisonAI's own window really dropped 20
        stored = turns_of(remote, "win-1")
        assert [t["content"] for t in stored] == texts  # all 30, in the order they were said
        assert [t["archived"] for t in stored] == [True] * 20 + [False] * 10
        assert watcher_status(remote)["counters"]["turns_kept"] > 0
        assert remote.search("cache-3")["results"]  # an out-of-window turn is still searchable

        # the file rewritten with no messages at all: nothing stored goes
        seq = remote.last_seq
        on_disk["messages"] = []
        (folder / "win-1.json").write_text(json.dumps(on_disk))
        wait_for(
            lambda: any(
                e.payload.get("kept_turns") == 30 for e in remote.events(seq, 100, kinds=["session.imported"])
            ),
            15.0,
            "the emptied file imported",
        )
        stored = turns_of(remote, "win-1")
        assert [t["content"] for t in stored] == texts and all(t["archived"] for t in stored)

        # new messages after the empty window go after the history, not before it
        store2 = praisonai_store.DefaultSessionStore(session_dir=str(folder), max_messages=10)
        store2.add_message("win-1", "user", "and after the reset?")
        wait_for(lambda: len(turns_of(remote, "win-1")) == 31, 15.0, "turn 31")
        stored = turns_of(remote, "win-1")
        assert [t["content"] for t in stored] == [*texts, "and after the reset?"]
        assert stored[-1]["archived"] is False

        # deleting the file deletes nothing either
        (folder / "win-1.json").unlink()
        wait_for(lambda: watcher_status(remote)["counters"]["deleted_files"] == 1, 15.0, "deletion seen")
        assert len(turns_of(remote, "win-1")) == 31
    finally:
        remote.close()
        hub.stop()


@pytest.mark.integration
def test_a_stuck_read_is_given_up_on_and_doctor_says_stalled(
    service, settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # noqa: ANN001
    """A read that never returns (a hung network mount; faked here, no local file can hang a
    regular read) costs the queue one bound, not the other files."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    release = threading.Event()
    real_open = praisonai_watch.open_session_file

    def open_or_hang(path: Path, *args: Any) -> tuple[str, Any]:
        if Path(path).name == "stuck.json":
            release.wait(60)
        return real_open(path, *args)

    monkeypatch.setattr(praisonai_watch, "open_session_file", open_or_hang)
    (folder / "stuck.json").write_text(session_file("stuck", "held up"))
    watcher = PraisonAIWatcher(folder, read_timeout=0.5)

    def scenario(remote: RemoteService) -> None:
        wait_for(lambda: watcher_status(remote)["state"] == "stalled", 15.0, "stalled")
        (folder / "next.json").write_text(session_file("next", "not held up"))
        wait_for(lambda: len(turns_of(remote, "next")) == 1, 15.0, "the next file")
        status = watcher_status(remote)
        assert status["counters"]["stalled_reads"] >= 1
        assert [s["path"] for s in status["stuck_reads"]] == [str(folder / "stuck.json")]
        check = doctor_check(remote.stats()["hub"]["sources"])
        assert check["ok"] is False and "STALLED" in check["detail"] and "stuck.json" in check["detail"]
        assert "connected" not in check["detail"].replace("NOT connected", "")

        release.set()  # the mount answers again: the next change reads the file
        wait_for(lambda: watcher_status(remote)["state"] == "watching", 15.0, "no longer stalled")
        (folder / "stuck.json").write_text(session_file("stuck", "held up", "now read"))
        wait_for(lambda: len(turns_of(remote, "stuck")) == 2, 15.0, "the stuck file, later")
        assert doctor_check(remote.stats()["hub"]["sources"])["ok"] is True

    async def main() -> None:
        hub = Hub(service, settings.socket_path, start_indexer=False, sources=[watcher])
        await hub.start()
        remote = RemoteService(settings.socket_path)
        try:
            await asyncio.to_thread(scenario, remote)
        finally:
            release.set()
            remote.close()
            await hub.close()

    asyncio.run(main())
