"""``memviewer.client.Publisher`` against real hub processes: spooling, replay, kill -9, exactly once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from waiting import wait_for

from memviewer import paths
from memviewer.client import Publisher
from memviewer.store.db import Store
from memviewer.wire.remote import RemoteService
from memviewer.wire.testing import HubProcess

pytestmark = pytest.mark.integration


def stored_turns(home: Path) -> list[dict]:
    """Every stored turn (compaction summaries excluded), by session and index."""
    from sqlalchemy import text

    store = Store.open(paths.db_path(home), readonly=True)
    try:
        with store.read() as conn:
            rows = (
                conn.execute(
                    text(
                        "SELECT id, episode_id, session_id, idx, content FROM turns "
                        "WHERE NOT is_compaction_summary ORDER BY session_id, idx"
                    )
                )
                .mappings()
                .all()
            )
        return [dict(r) for r in rows]
    finally:
        store.close()


def test_bad_arguments_fail_at_call_time(short_tmp: Path) -> None:
    pub = Publisher(short_tmp / "none.sock", short_tmp / "spool")
    try:
        sid = pub.open_session(agent="v")
        with pytest.raises(ValueError, match="user_message"):
            pub.start_episode(sid, "   ")
        with pytest.raises(ValueError, match="role"):
            pub.add_turn("e-1", "robot", "beep")
        with pytest.raises(ValueError, match="content"):
            pub.add_turn("e-1", "assistant", None)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="metadata"):
            pub.add_turn("e-1", "tool", "x", metadata=["not", "a", "dict"])  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="r_task"):
            pub.finalize_episode("e-1", r_task="high")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="frame limit"):
            pub.add_turn("e-1", "tool", "x" * (2 * 1024 * 1024))
        with pytest.raises(ValueError, match="active_window"):
            pub.open_session(agent="v", active_window=1)
        deep: dict = {}
        for _ in range(80):  # the hub would refuse the frame: deeper than protocol.MAX_DEPTH
            deep = {"d": deep}
        with pytest.raises(ValueError, match="nested deeper than 61 levels at metadata.d.d"):
            pub.add_turn("e-1", "tool", "x", metadata=deep)
        very_deep: list = []
        for _ in range(5000):  # beyond what json.dumps itself can encode
            very_deep = [very_deep]
        with pytest.raises(ValueError, match="not JSON-serialisable"):
            pub.add_turn("e-1", "tool", "x", metadata={"v": very_deep})
        with pytest.raises(ValueError, match="not JSON-serialisable"):
            pub.add_turn("e-1", "tool", "half an emoji \ud83d")
        shallow: dict = {}
        for _ in range(40):
            shallow = {"d": shallow}
        pub.add_turn("e-1", "tool", "x", metadata=shallow)  # deep, but within the limit
        assert pub.stats()["enqueued"] == 2  # only the valid open_session and add_turn were queued
    finally:
        pub.close(timeout=0.5)
    with pytest.raises(RuntimeError):
        pub.add_turn("e-1", "assistant", "after close")


def test_spooled_while_no_hub_then_delivered_in_order(tmp_path: Path, short_tmp: Path) -> None:
    sock = short_tmp / "hub.sock"
    pub = Publisher(sock, tmp_path / "pub-spool", max_queue=100)
    try:
        sid = pub.open_session(agent="early-bird", active_window=1000)
        expected: list[str] = []
        for e in range(2):
            eid = pub.start_episode(sid, f"task {e}")
            expected.append(f"task {e}")
            for i in range(150):
                pub.add_turn(eid, "assistant", f"e{e} step {i}")
                expected.append(f"e{e} step {i}")
            pub.finalize_episode(eid)
        wait_for(lambda: pub.stats()["spooled_commands"] >= 305)
        assert pub.stats()["queued"] == 0  # everything is on disk, memory is empty
        spool_files = list((tmp_path / "pub-spool").glob("*.ndjson"))
        assert len(spool_files) == 1 and spool_files[0].stat().st_size > 0
        assert pub.flush(timeout=0.3) is False

        with HubProcess(tmp_path / "home", sock):
            assert pub.flush(timeout=20) is True
            assert pub.errors == 0
            assert pub.stats()["spool_bytes_pending"] == 0
            turns = [t["content"] for t in stored_turns(tmp_path / "home") if t["session_id"] == sid]
            assert turns == expected
    finally:
        pub.close(timeout=1)
    assert list((tmp_path / "pub-spool").glob("*.ndjson")) == []  # nothing left: file removed


def test_close_with_the_hub_down_leaves_the_rest_for_the_next_hub(tmp_path: Path, short_tmp: Path) -> None:
    sock = short_tmp / "hub.sock"
    home = tmp_path / "home"
    pub = Publisher(sock, paths.spool_dir(home))
    sid = pub.open_session(agent="leaver", session_id="s-leaver")
    eid = pub.start_episode(sid, "write the report")
    for i in range(20):
        pub.add_turn(eid, "assistant", f"paragraph {i}")
    t0 = time.monotonic()
    assert pub.close(timeout=5) is False
    assert time.monotonic() - t0 < 3  # a known-down hub does not cost the full timeout
    files = list(paths.spool_dir(home).glob("*.ndjson"))
    lines = files[0].read_bytes().splitlines() if len(files) == 1 else []
    assert len(lines) == 23 and b'"op":"shutdown"' in lines[-1]  # the agent's end comes last
    with HubProcess(home, sock), RemoteService(sock) as remote:
        session = remote.session("s-leaver")
        assert len(session["turns"]) == 21
        # the agent ended while no hub ran: its open episode is abandoned on replay
        assert [(e["episode_id"], e["closed_by"]) for e in session["episodes"]] == [(eid, "abandoned")]
    assert list(paths.spool_dir(home).glob("*.ndjson")) == []


def test_memory_stays_bounded_while_the_hub_is_down(short_tmp: Path) -> None:
    pub = Publisher(short_tmp / "none.sock", short_tmp / "spool", max_queue=200)
    try:
        sid = pub.open_session(agent="bounded")
        eid = pub.start_episode(sid, "long job")
        peak = 0
        for i in range(5000):
            pub.add_turn(eid, "tool", f"output line {i}")
            if i % 50 == 0:
                peak = max(peak, pub.stats()["queued"])
        assert peak <= 201
        assert pub.stats()["queued"] <= 201
        assert pub.stats()["spooled_commands"] >= 4800
    finally:
        pub.close(timeout=0.5)


def test_an_unwritable_spool_drops_new_commands_instead_of_growing(short_tmp: Path) -> None:
    blocker = short_tmp / "not-a-dir"
    blocker.write_text("")
    pub = Publisher(short_tmp / "none.sock", blocker / "spool", max_queue=50)
    try:
        sid = pub.open_session(agent="diskless")
        for i in range(500):
            pub.add_turn(sid, "tool", f"line {i}")  # never raises into the agent
        stats = pub.stats()
        assert stats["queued"] <= 51
        assert pub.dropped >= 440 and pub.errors == pub.dropped
        assert pub.error_log[-1]["error"]["message"].startswith("dropped")
    finally:
        pub.close(timeout=0.5)


def test_hub_errors_are_counted_and_never_retried(tmp_path: Path, short_tmp: Path) -> None:
    sock = short_tmp / "hub.sock"
    with HubProcess(tmp_path / "home", sock), Publisher(sock, tmp_path / "spool") as pub:
        sid = pub.open_session(agent="errs")
        pub.add_turn("e-never-started", "assistant", "orphan")
        eid = pub.start_episode(sid, "real work")
        pub.finalize_episode(eid)
        pub.add_turn(eid, "assistant", "too late")
        assert pub.flush(10) is False  # acknowledged, but two commands were not stored
        assert pub.errors == 2
        assert [e["error"]["code"] for e in pub.error_log] == ["episode_not_found", "conflict"]
        refused = pub.take_refusals()
        assert [(r["op"], r["error"]["code"]) for r in refused] == [
            ("add_turn", "episode_not_found"),
            ("add_turn", "conflict"),
        ]
        assert refused[1]["command"]["content"] == "too late"
        assert pub.flush(10) is True  # taken: nothing new was refused
        # nothing is being resent: one more command after it goes out in exactly one batch
        sent = pub.stats()["sent_batches"]
        pub.open_session(agent="marker")
        assert pub.flush(10) is True
        assert pub.stats()["sent_batches"] == sent + 1
        with RemoteService(sock) as remote:
            assert [t["content"] for t in remote.session(sid)["turns"]] == ["real work"]


def test_kill_9_of_the_hub_mid_run_stores_every_turn_exactly_once(tmp_path: Path, short_tmp: Path) -> None:
    sock = short_tmp / "hub.sock"
    home = tmp_path / "home"
    hub = HubProcess(home, sock).start()
    pub = Publisher(sock, tmp_path / "spool", max_batch=40)
    expected: dict[str, list[str]] = {}
    produced = threading.Event()

    def agent() -> None:
        for s in range(3):
            sid = pub.open_session(agent=f"agent-{s}", active_window=60)
            for e in range(4):
                eid = pub.start_episode(sid, f"s{s} task {e}")
                expected[eid] = [f"s{s} task {e}"]
                for i in range(150):
                    text = f"s{s} e{e} turn {i}"
                    pub.add_turn(eid, "tool" if i % 3 else "assistant", text)
                    expected[eid].append(text)
                    if i % 25 == 0:
                        time.sleep(0.005)
                pub.finalize_episode(eid)
            pub.close_session(sid)
        produced.set()

    try:
        worker = threading.Thread(target=agent)
        worker.start()
        wait_for(lambda: pub.stats()["acked_commands"] > 400, timeout=30)
        hub.kill()  # SIGKILL mid-run: batches in flight are lost by the hub, not by the publisher
        killed_at = pub.stats()["acked_commands"]
        hub.start()  # kill() returned once the process was gone
        worker.join(60)
        assert produced.is_set()
        assert pub.flush(timeout=60) is True
        assert killed_at < pub.stats()["enqueued"]  # the kill really happened mid-run
        assert pub.stats()["connects"] >= 2
    finally:
        pub.close(timeout=2)
        hub.kill()
    assert pub.errors == 0, list(pub.error_log)[:3]
    turns = stored_turns(home)
    assert len(turns) == len({t["id"] for t in turns}) == sum(len(v) for v in expected.values())
    by_episode: dict[str, list[str]] = {}
    for t in turns:
        by_episode.setdefault(t["episode_id"], []).append(t["content"])
    assert by_episode == expected  # exactly once, in call order within each episode
    store = Store.open(paths.db_path(home), readonly=True)
    try:
        seqs = [e.seq for e in store.events_since(0, 1_000_000)]
    finally:
        store.close()
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_hub_that_accepts_then_drops_every_connection_is_retried_with_back_off(short_tmp: Path) -> None:
    """Without back-off the publisher reconnected ~1,600 times a second (a log flood on the hub)."""
    import json
    import socket

    path = short_tmp / "flaky.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(64)
    server.settimeout(0.2)
    accepted = 0
    stop = threading.Event()

    def serve() -> None:  # answers hello, then hangs up on the publish
        nonlocal accepted
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted += 1
            with conn, conn.makefile("rb") as f:
                hello = json.loads(f.readline())
                conn.sendall(
                    json.dumps(
                        {
                            "jsonrpc": "2.0",
                            "id": hello["id"],
                            "result": {"protocol": 1, "frame_limit": 1_048_576},
                        }
                    ).encode()
                    + b"\n"
                )
                f.readline()  # the publish: dropped without an answer

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    pub = Publisher(path, short_tmp / "spool", max_backoff=0.5)
    try:
        pub.open_session(agent="stubborn")
        time.sleep(2.0)  # a rate: how many reconnects fit in two seconds
        assert 2 <= accepted <= 12, accepted  # 0.05, 0.1, 0.2, 0.4, then every 0.5 s
        assert pub.stats()["acked"] == 0
    finally:
        pub.close(timeout=0.5)
        stop.set()
        thread.join(2)
        server.close()
