"""The Publisher's durability guarantee, its caller-thread discipline and spool compaction,
against real hub processes over the real socket."""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_for

from memviewer import paths
from memviewer.client import RETRY_LATER_CODES, Publisher, retry_later
from memviewer.store.db import Store
from memviewer.wire import protocol
from memviewer.wire.testing import HubProcess, hub_env

pytestmark = pytest.mark.integration


def stored(home: Path, episode_id: str) -> list[tuple[str, str]]:
    """(turn id, content) of the episode's stored turns, in order."""
    from sqlalchemy import text

    if not paths.db_path(home).exists():
        return []
    store = Store.open(paths.db_path(home), readonly=True)
    try:
        with store.read() as conn:
            rows = conn.execute(
                text(
                    "SELECT id, content FROM turns WHERE episode_id = :e AND NOT is_compaction_summary "
                    "ORDER BY idx"
                ),
                {"e": episode_id},
            ).all()
        return [(r[0], r[1]) for r in rows]
    finally:
        store.close()


def spooled_contents(spool_dir: Path) -> set[str]:
    """The ``add_turn`` contents in the spool files on disk (torn lines skipped)."""
    out: set[str] = set()
    for path in spool_dir.glob("*.ndjson"):
        try:
            data = path.read_bytes()
        except FileNotFoundError:  # deleted as it drained
            continue
        for line in data.splitlines():
            try:
                cmd = json.loads(line)
            except ValueError:
                continue
            if cmd.get("op") == "add_turn":
                out.add(cmd["content"])
    return out


def spool_disk_bytes(spool_dir: Path) -> int:
    total = 0
    for path in spool_dir.glob("*.ndjson"):
        try:
            total += path.stat().st_size
        except FileNotFoundError:
            pass
    return total


AGENT = """
import sys
from memviewer.client import Publisher
sock, home, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
pub = Publisher(sock, home=home)
sid = pub.open_session(agent="doomed", session_id="s-doomed", active_window=100_000)
eid = pub.start_episode(sid, "a long run", episode_id="e-doomed")
pad = "x" * 2000
for i in range(n):
    pub.add_turn(eid, "tool", f"turn {i} {pad}")
print("done", flush=True)
sys.stdin.read()  # alive until killed
"""


def test_sigkill_right_after_unpaced_add_turns_loses_nothing(tmp_path: Path, short_tmp: Path) -> None:
    """The audit lost 4,002 of 5,000 turns this way: nothing was spooled while the hub answered."""
    home = tmp_path / "home"
    sock = short_tmp / "hub.sock"
    n = 5000
    expected = [f"turn {i} {'x' * 2000}" for i in range(n)]
    with HubProcess(home, sock):
        child = subprocess.Popen(
            [sys.executable, "-c", AGENT, str(sock), str(home), str(n)],
            env=hub_env(home, sock),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == b"done"
            # The guarantee: on disk (spool or store) within sync_interval + one group fsync of
            # the last add_turn returning. Poll for it (a shared machine: the bound is generous
            # here; bench/bench_publisher_durability.py measures the real lag).
            want = set(expected)

            def durable() -> bool:
                return want <= spooled_contents(paths.spool_dir(home)) | {
                    c for _, c in stored(home, "e-doomed")
                }

            wait_for(durable, timeout=10, what="every turn on disk")
            stored_at_kill = len(stored(home, "e-doomed"))
            child.send_signal(signal.SIGKILL)
            child.wait(10)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(10)
        assert stored_at_kill < n + 1, "the hub had stored everything before the kill: nothing tested"
        # The agent comes back: a new Publisher on the same home replays what the dead one left.
        with Publisher(sock, home=home) as pub:
            wait_for(lambda: len(stored(home, "e-doomed")) >= n + 1, timeout=60, what="replay")
            assert pub.stats()["adopted_files"] >= 1
            assert pub.take_refusals() == []
        turns = stored(home, "e-doomed")
    assert [c for _, c in turns] == ["a long run", *expected]  # all of them, in order
    assert len({tid for tid, _ in turns}) == len(turns)  # no duplicates
    assert list(paths.spool_dir(home).glob("*.ndjson")) == []


IO_CALLS = (
    (os, "write"),
    (os, "pwrite"),
    (os, "pread"),
    (os, "fsync"),
    (os, "ftruncate"),
    (os, "open"),
    (os, "rename"),
    (socket.socket, "connect"),
    (socket.socket, "sendall"),
    (socket.socket, "send"),
    (socket.socket, "recv_into"),
    (socket.socket, "recv"),
)


def test_add_turn_never_does_io_on_the_callers_thread(
    tmp_path: Path, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file and socket call made while an agent thread publishes, by thread: the agent's
    thread makes none, with the hub up, the hub killed (spooling), the queue full, and back."""
    sock = short_tmp / "hub.sock"
    home = tmp_path / "home"
    spool_dir = tmp_path / "spool"
    calls, recording = _record_io(monkeypatch)
    hub = HubProcess(home, sock).start()
    pub = Publisher(sock, spool_dir, max_queue=300, segment_bytes=64 * 1024)
    agent_thread = ""
    try:
        sid = pub.open_session(agent="no-io")
        eid = pub.start_episode(sid, "busy work")
        wait_for(lambda: pub.flush(0.1), what="connected")
        expected = ["busy work"]

        def agent() -> None:
            nonlocal agent_thread
            agent_thread = threading.current_thread().name
            for i in range(4000):
                pub.add_turn(eid, "tool", f"line {i} " + "y" * 500)
                expected.append(f"line {i} " + "y" * 500)
                if i == 2000:
                    hub.kill()  # from here on only the spool takes them

        recording.set()
        worker = threading.Thread(target=agent, name="the-agent")
        worker.start()
        worker.join(120)
        assert not worker.is_alive()
        wait_for(lambda: pub.stats()["queued"] == 0, what="all spooled")
        recording.clear()
        hub.start()
        assert pub.flush(60) is True
    finally:
        recording.clear()
        pub.close(timeout=2)
        hub.kill()
    by_thread = collections.Counter(t for t, _ in calls.elements())
    assert agent_thread == "the-agent" and by_thread["the-agent"] == 0, calls
    assert calls[("memviewer-spooler", "write")] > 0 and calls[("memviewer-spooler", "fsync")] > 0
    assert calls[("memviewer-publisher", "sendall")] > 0
    assert pub.stats()["caller_waits"] > 0  # the queue really filled: the wait path ran too
    assert [c for _, c in stored(home, eid)] == expected


def _record_io(
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[collections.Counter[tuple[str, str]], threading.Event]:
    """Count the ``IO_CALLS`` made while the event is set, by (thread name, call)."""
    calls: collections.Counter[tuple[str, str]] = collections.Counter()
    recording = threading.Event()
    for owner, name in IO_CALLS:
        real = getattr(owner, name)

        def wrapper(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            if recording.is_set():
                calls[(threading.current_thread().name, _name)] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(owner, name, wrapper)
    return calls, recording


def _frozen_hub_backlog(
    tmp_path: Path, short_tmp: Path, n: int, pad: int
) -> tuple[HubProcess, Publisher, str, list[str]]:
    """A Publisher connected to a real hub that then stops answering (SIGSTOP), with ``n``
    turns queued in memory: ``sync_interval=None`` spools only once the hub is known down,
    so all of them are still the remainder ``close`` must hand to the spooler."""
    hub = HubProcess(tmp_path / "home", short_tmp / "hub.sock").start()
    pub = Publisher(
        hub.socket_path,
        tmp_path / "spool",
        sync_interval=None,
        max_queue=n + 100,
        max_queue_bytes=(n + 100) * (pad + 400),
        request_timeout=30,
    )
    sid = pub.open_session(agent="closer", session_id="s-closer", active_window=100_000)
    eid = pub.start_episode(sid, "the last words", episode_id="e-closer")
    wait_for(lambda: pub.flush(0.1), what="connected")
    os.kill(hub.pid, signal.SIGSTOP)
    expected = [f"turn {i} " + "q" * pad for i in range(n)]
    return hub, pub, eid, expected


def _replayed(tmp_path: Path, hub: HubProcess, n: int) -> list[tuple[str, str]]:
    """A new hub on the home and a new Publisher on the spool: it replays what close left."""
    hub.kill()  # the frozen one: nothing it had buffered is stored
    hub.start()
    with Publisher(hub.socket_path, tmp_path / "spool") as pub:
        wait_for(
            lambda: (
                len(stored(tmp_path / "home", "e-closer")) >= n + 1
                and not list((tmp_path / "spool").glob("*.ndjson"))
            ),
            timeout=120,
            what="the spool replayed and removed",
        )
        # Either side may replay the files: the new Publisher adopts them, or the new hub
        # ingests orphan spools on start first (then the Publisher finds them taken).
        assert pub.take_refusals() == []
    return stored(tmp_path / "home", "e-closer")


def test_close_hands_the_rest_to_the_spooler_and_a_later_publisher_replays_it(
    tmp_path: Path, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """close() with the hub not answering: the agent's thread does no file or socket I/O, the
    spooler writes every unacknowledged command, and a later Publisher replays them once."""
    n = 3000
    hub, pub, eid, expected = _frozen_hub_backlog(tmp_path, short_tmp, n, 300)
    calls, recording = _record_io(monkeypatch)
    closed: list[bool] = []
    try:

        def agent() -> None:
            for content in expected:
                pub.add_turn(eid, "tool", content)
            closed.append(pub.close(timeout=0.5))

        recording.set()
        worker = threading.Thread(target=agent, name="the-agent")
        worker.start()
        worker.join(60)
        recording.clear()
        assert not worker.is_alive()
        assert closed == [False]  # the hub stored none of them
        by_thread = collections.Counter(t for t, _ in calls.elements())
        assert by_thread["the-agent"] == 0, calls
        assert calls[("memviewer-spooler", "write")] > 0 and calls[("memviewer-spooler", "fsync")] > 0
        stats = pub.stats()
        assert stats["not_durable_at_close"] == 0 and stats["spooled_commands"] >= n + 1
        assert spooled_contents(tmp_path / "spool") == set(expected)  # on disk when close returned
        turns = _replayed(tmp_path, hub, n)
    finally:
        recording.clear()
        hub.kill()
    assert [c for _, c in turns] == ["the last words", *expected]  # all, in order
    assert len({tid for tid, _ in turns}) == len(turns)  # none twice
    assert list((tmp_path / "spool").glob("*.ndjson")) == []


def test_close_whose_spool_wait_expires_names_what_is_not_yet_on_disk(
    tmp_path: Path, short_tmp: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``spool_timeout=0``: close returns at once, False; what the spooler had not written yet
    is counted and named in a warning, and the spooler still finishes: nothing is lost."""
    n = 8000
    hub, pub, eid, expected = _frozen_hub_backlog(tmp_path, short_tmp, n, 1500)
    try:
        for content in expected:
            pub.add_turn(eid, "tool", content)
        with caplog.at_level("WARNING", logger="memviewer.client"):
            assert pub.close(timeout=0.2, spool_timeout=0.0) is False
        pending = pub.stats()["not_durable_at_close"]
        warned = [r.getMessage() for r in caplog.records if "not yet on disk" in r.getMessage()]
        if pending:  # (a 12 MB write outlasting a zero wait; a very slow caller could miss it)
            assert warned and f"with {pending} commands" in warned[0], warned
        else:
            assert not warned
        wait_for(lambda: spooled_contents(tmp_path / "spool") == set(expected), what="the spooler finished")
        turns = _replayed(tmp_path, hub, n)
    finally:
        hub.kill()
    assert [c for _, c in turns] == ["the last words", *expected]
    assert len({tid for tid, _ in turns}) == len(turns)


def test_the_spool_shrinks_as_a_large_backlog_drains(tmp_path: Path, short_tmp: Path) -> None:
    """Before, a 387 MB spool only shrank once fully drained; now a segment goes once acknowledged."""
    sock = short_tmp / "hub.sock"
    home = tmp_path / "home"
    spool_dir = tmp_path / "spool"
    segment = 64 * 1024
    pub = Publisher(sock, spool_dir, max_batch=50, segment_bytes=segment)
    try:
        sid = pub.open_session(agent="backlog")
        eid = pub.start_episode(sid, "big backlog")
        for i in range(6000):
            pub.add_turn(eid, "tool", f"row {i} " + "z" * 500)
        pub.finalize_episode(eid)  # (else close() leaves its shutdown command for the next hub)
        total = pub.stats()["enqueued"]
        wait_for(lambda: pub.stats()["spooled_commands"] >= total and pub.stats()["queued"] == 0)
        initial = spool_disk_bytes(spool_dir)
        assert initial > 40 * segment and len(list(spool_dir.glob("*.ndjson"))) > 40
        samples: list[tuple[int, int]] = []
        with HubProcess(home, sock):
            while True:
                acked = pub.stats()["acked"]
                samples.append((acked, spool_disk_bytes(spool_dir)))
                if acked >= total:
                    break
                time.sleep(0.005)
            assert pub.flush(30) is True
            assert len(stored(home, eid)) == 6001
        wait_for(lambda: spool_disk_bytes(spool_dir) <= segment, what="compacted once drained")
    finally:
        pub.close(timeout=2)
    mid = [s for s in samples if 0.2 * total < s[0] < 0.8 * total]
    assert len(mid) >= 3, samples  # the drain was really observed half way
    for acked, size in samples:
        remaining = initial * (1 - acked / total)
        assert size <= remaining + 2 * segment + 4096, (acked, size, initial)
    assert list(spool_dir.glob("*.ndjson")) == []


def test_a_hub_that_comes_up_late_gets_everything_in_order(tmp_path: Path, short_tmp: Path) -> None:
    sock = short_tmp / "hub.sock"
    home = tmp_path / "home"
    spool_dir = tmp_path / "spool"
    pub = Publisher(sock, spool_dir, segment_bytes=32 * 1024, max_queue=200)
    expected: dict[str, list[str]] = {}
    try:
        sid = pub.open_session(agent="early", active_window=5000)
        for e in range(3):
            eid = pub.start_episode(sid, f"task {e}")
            expected[eid] = [f"task {e}"]
            for i in range(500):
                pub.add_turn(eid, "assistant", f"e{e} step {i} " + "w" * 100)
                expected[eid].append(f"e{e} step {i} " + "w" * 100)
            pub.finalize_episode(eid)
        wait_for(lambda: pub.stats()["queued"] == 0, what="all spooled")
        assert len(list(spool_dir.glob("*.ndjson"))) > 3  # several segments
        assert pub.flush(0.2) is False
        with HubProcess(home, sock):
            assert pub.flush(60) is True
            assert pub.errors == 0
            for eid, contents in expected.items():
                assert [c for _, c in stored(home, eid)] == contents
    finally:
        pub.close(timeout=1)
    assert list(spool_dir.glob("*.ndjson")) == []


def test_a_restarted_publisher_replays_orphans_but_refuses_planted_files(
    tmp_path: Path, short_tmp: Path
) -> None:
    home = tmp_path / "home"
    sock = short_tmp / "hub.sock"
    spool_dir = paths.spool_dir(home)
    with HubProcess(home, sock):
        spool_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        line = {"cid": 1, "op": "open_session", "session_id": "s-orphan", "agent": "gone", "ts": 1.0}
        orphan = spool_dir / "pub-01a20000-0000-7000-8000-000000000001-1.ndjson"
        orphan.write_text(json.dumps(line) + "\n" + '{"cid":2,"op":"add_tu' + "\n")  # + a torn line
        os.chmod(orphan, 0o600)
        writable = spool_dir / "pub-01a20000-0000-7000-8000-000000000002-1.ndjson"
        writable.write_text(json.dumps({**line, "session_id": "s-writable"}) + "\n")
        os.chmod(writable, 0o666)  # anyone could have written it: never replayed
        outside = tmp_path / "outside.ndjson"
        outside.write_text(json.dumps({**line, "session_id": "s-linked"}) + "\n")
        linked = spool_dir / "pub-01a20000-0000-7000-8000-000000000003-1.ndjson"
        linked.symlink_to(outside)
        with Publisher(sock, home=home) as pub:
            wait_for(lambda: pub.stats()["adopted_files"] == 1, what="the orphan replayed")
            from memviewer.wire.remote import RemoteService

            with RemoteService(sock) as remote:
                ids = {s["session_id"] for s in remote.sessions()["sessions"]}
            assert "s-orphan" in ids and not ids & {"s-writable", "s-linked"}
    assert sorted(p.name for p in spool_dir.iterdir()) == sorted(
        p.name + ".refused" for p in (writable, linked)
    )
    assert outside.read_text().startswith("{")


def test_the_retry_later_table() -> None:
    assert {"busy", "overloaded"} <= RETRY_LATER_CODES
    assert retry_later({"code": "busy", "message": "write queue full"})
    assert retry_later({"code": "internal", "message": "x", "retry": True})
    assert retry_later(protocol.RpcError(-32099, "full", {"code": "overloaded"}), whole_request=True)
    assert retry_later(protocol.app_error("internal", "shutting down"), whole_request=True)
    assert not retry_later(protocol.app_error("internal", "a bug"))  # one command's own failure
    assert not retry_later({"code": "conflict", "message": "episode closed"})
    assert not retry_later({"code": "invalid_argument", "message": "bad"})
    assert not retry_later(None)


def _fake_hub(path: Path, answers: list[Any], received: list[dict[str, Any]]) -> socket.socket:
    """A hub stand-in: ``hello``, then each publish gets the next of ``answers`` (a callable of
    the commands returning a JSON-RPC response body), and ok results once they run out."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn, conn.makefile("rb") as f:
                for raw in f:
                    msg = json.loads(raw)
                    if msg["method"] == "hello":
                        body: dict[str, Any] = {"result": {"protocol": 1, "frame_limit": 1_048_576}}
                    else:
                        commands = msg["params"]["commands"]
                        answer = answers.pop(0) if answers else None
                        body = (
                            answer(commands)
                            if answer
                            else {"result": {"results": [{"ok": {}} for _ in commands]}}
                        )
                        if "result" in body:
                            results = body["result"]["results"]
                            received.extend(c for c, r in zip(commands, results, strict=True) if "ok" in r)
                    conn.sendall(json.dumps({"jsonrpc": "2.0", "id": msg["id"], **body}).encode() + b"\n")

    threading.Thread(target=serve, daemon=True).start()
    return server


def test_push_back_from_the_hub_is_retried_not_refused(short_tmp: Path) -> None:
    received: list[dict[str, Any]] = []
    answers: list[Any] = [
        # the whole request pushed back (a full write queue), an unknown code with retry: true
        lambda cmds: {"error": {"code": -32010, "message": "write queue full", "data": {"code": "busy"}}},
        lambda cmds: {"error": {"code": -32011, "message": "later", "data": {"code": "x", "retry": True}}},
        # the first command stored, the second told "overloaded": it and the rest come again
        lambda cmds: {
            "result": {
                "results": [{"ok": {}}]
                + [{"error": {"code": "overloaded", "message": "slow down"}} for _ in cmds[1:]]
            }
        },
    ]
    pub = Publisher(short_tmp / "fake.sock", short_tmp / "spool", max_backoff=0.2, sync_interval=None)
    server = None
    try:
        sid = pub.open_session(agent="pushed")
        tids = [pub.add_turn("e-1", "tool", f"t{i}") for i in range(5)]
        wait_for(lambda: pub.stats()["queued"] == 0, what="spooled: no hub yet")
        server = _fake_hub(short_tmp / "fake.sock", answers, received)  # one batch of all six
        wait_for(lambda: not answers, what="the three push-backs sent")
        assert pub.flush(20) is True
        assert pub.take_refusals() == [] and pub.errors == 0
    finally:
        pub.close(timeout=1, end_episodes=False)
        if server is not None:
            server.close()
    got = [c.get("turn_id") or c.get("session_id") for c in received]
    assert got == [sid, *tids]  # each exactly once, in order
