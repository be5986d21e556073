"""Hub process lifecycle: permissions, one hub per socket, stale sockets, SIGTERM, spool ingestion."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memviewer import paths
from memviewer.client import Publisher
from memviewer.store.db import Store
from memviewer.wire.probe import hub_hello
from memviewer.wire.spool import SpoolFile
from memviewer.wire.testing import HubProcess

pytestmark = pytest.mark.integration


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _store(home: Path) -> Store:
    return Store.open(paths.db_path(home), readonly=True)


def test_socket_0600_in_a_0700_folder(tmp_path: Path, short_tmp: Path) -> None:
    sock = short_tmp / "run" / "nested" / "hub.sock"  # folders do not exist yet
    with HubProcess(tmp_path / "home", sock):
        assert stat.S_ISSOCK(sock.lstat().st_mode)
        assert _mode(sock) == 0o600
        assert _mode(sock.parent) == 0o700
    # the default location follows the home: XDG_RUNTIME_DIR/memviewer/<home key>/hub.sock,
    # an existing memviewer folder of ours tightened to 0700
    runtime = short_tmp / "xdg"
    runtime.mkdir()
    (runtime / "memviewer").mkdir(mode=0o755)
    (runtime / "memviewer").chmod(0o755)
    default_sock = runtime / "memviewer" / paths.home_key(tmp_path / "home") / "hub.sock"
    with HubProcess(
        tmp_path / "home", default_sock, export_socket=False, extra_env={"XDG_RUNTIME_DIR": str(runtime)}
    ):
        assert _mode(default_sock) == 0o600
        assert _mode(default_sock.parent) == 0o700
        assert _mode(runtime / "memviewer") == 0o700
    assert not default_sock.exists()


def test_second_hub_on_a_live_socket_exits_with_a_message(tmp_path: Path, short_tmp: Path) -> None:
    sock = short_tmp / "hub.sock"
    with HubProcess(tmp_path / "a", sock) as first:
        second = HubProcess(tmp_path / "b", sock)
        proc = second.spawn()
        assert proc.wait(20) != 0
        # one home, one hub: the error names the home that hub serves and ours
        assert (
            f"serves the home {(tmp_path / 'a').resolve()}, not {(tmp_path / 'b').resolve()}" in second.log()
        )
        same = HubProcess(tmp_path / "a", sock)
        assert same.spawn().wait(20) != 0
        assert "already running" in same.log()
        hello = hub_hello(sock, timeout=5)
        assert hello is not None and hello["pid"] == first.pid


def test_stale_socket_is_replaced_but_other_files_are_not(tmp_path: Path, short_tmp: Path) -> None:
    sock = short_tmp / "hub.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(sock))
    dead.close()  # the file stays behind, nobody listens: connect is refused
    assert sock.exists()
    with HubProcess(tmp_path / "home", sock) as hub:
        assert hub_hello(sock)["pid"] == hub.pid  # type: ignore[index]

    not_a_socket = short_tmp / "data.sock"
    not_a_socket.write_text("precious")
    refused = HubProcess(tmp_path / "home", not_a_socket)
    assert refused.spawn().wait(20) != 0
    assert "not a socket" in refused.log()
    assert not_a_socket.read_text() == "precious"


def test_sigterm_leaves_open_episodes_open_and_removes_the_socket(tmp_path: Path, short_tmp: Path) -> None:
    sock = short_tmp / "hub.sock"
    hub = HubProcess(tmp_path / "home", sock).start()
    pub = Publisher(sock, tmp_path / "spool")
    try:
        sid = pub.open_session(agent="sigterm")
        open_eid = pub.start_episode(sid, "fix the build")
        done_eid = pub.start_episode(sid, "and the docs")
        pub.finalize_episode(done_eid)
        assert pub.flush(10)
        assert hub.stop(signal.SIGTERM) == 0
    finally:
        pub.close(timeout=0.2, end_episodes=False)
        hub.kill()
    assert not sock.exists()
    assert not sock.with_name("hub.sock.lock").exists()
    assert "1 open episode left open" in hub.log()
    store = _store(tmp_path / "home")
    try:
        kinds = [(e.kind, e.episode_id) for e in store.events_since(0, 100)]
    finally:
        store.close()
    assert not any(k == "episode.abandoned" for k, _ in kinds)  # the hub is not the agent
    assert ("episode.finalized", done_eid) in kinds and ("episode.finalized", open_eid) not in kinds


CRASHING_PUBLISHER = textwrap.dedent("""
    import sys, time
    from memviewer.client import Publisher
    pub = Publisher(sys.argv[1], sys.argv[2], max_queue=50)
    sid = pub.open_session(agent="crashy", session_id="s-crashy")
    eid = pub.start_episode(sid, "collect the logs", episode_id="e-crashy")
    for i in range(300):
        pub.add_turn(eid, "tool", f"log line {i}", turn_id=f"t-crashy-{i:04d}", metadata={"tool": "tail"})
    while pub.stats()["spooled_commands"] < 302:
        time.sleep(0.02)
    print("spooled", flush=True)
    time.sleep(60)
""")


def test_spools_of_dead_publishers_are_ingested_on_start_and_live_ones_are_left_alone(
    tmp_path: Path, short_tmp: Path
) -> None:
    home = tmp_path / "home"
    sock = short_tmp / "hub.sock"
    spool_dir = paths.spool_dir(home)
    # 1. a publisher process that spooled (no hub) and then died by SIGKILL
    proc = subprocess.Popen(
        [sys.executable, "-c", CRASHING_PUBLISHER, str(sock), str(spool_dir)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "spooled"
    finally:
        proc.kill()
        proc.wait(10)
    # 2. a live owner: its lock keeps the hub away from its file
    owned = SpoolFile(spool_dir)
    owned.append(
        [json.dumps({"cid": 1, "op": "open_session", "session_id": "s-owned", "agent": "owner"}).encode()]
    )
    assert len(list(spool_dir.glob("*.ndjson"))) == 2

    with HubProcess(home, sock) as hub:
        hello = hub_hello(sock)
        assert hello is not None
        remaining = list(spool_dir.glob("*.ndjson"))
        assert remaining == [owned.path]
        from memviewer.wire.remote import RemoteService

        with RemoteService(sock) as remote:
            crashy = remote.session("s-crashy")
            real = [t for t in crashy["turns"] if not t["is_compaction_summary"]]
            assert [t["content"] for t in real] == ["collect the logs"] + [
                f"log line {i}" for i in range(300)
            ]
            assert remote.sessions(filter="owner")["total"] == 0
            assert remote.stats()["hub"]["spool_ingested"][0]["skipped_owned"] == 1
        hub.stop()
    owned.finish([owned.read(0)[0][0]])  # the owner exits, leaving its line behind
    with HubProcess(home, sock):
        from memviewer.wire.remote import RemoteService

        with RemoteService(sock) as remote:
            assert remote.sessions(filter="owner")["total"] == 1
    assert list(spool_dir.glob("*.ndjson")) == []


def test_one_hub_per_home_even_on_another_socket(tmp_path: Path, short_tmp: Path) -> None:
    """Two hubs over one store would abandon each other's open episodes when they stop."""
    home = tmp_path / "home"
    with HubProcess(home, short_tmp / "a.sock"):
        r = subprocess.run(
            [
                sys.executable,
                "-c",
                "from memviewer.cli import main; main()",
                "--home",
                str(home),
                "--socket",
                str(short_tmp / "b.sock"),
                "serve",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode != 0
        assert "already running for" in r.stderr and str(short_tmp / "a.sock") in r.stderr
        assert "Traceback" not in r.stderr
        assert not (short_tmp / "b.sock").exists()
    # stopped: the home is free again, on any socket
    with HubProcess(home, short_tmp / "b.sock") as hub:
        assert hub.proc is not None and hub.proc.poll() is None


def test_commands_without_a_socket_follow_the_hub_that_serves_the_home(
    tmp_path: Path, short_tmp: Path
) -> None:
    """A hub started with --socket elsewhere: `doctor`, `tail` and the viewer find it via home/hub.owner."""
    home = tmp_path / "home"
    sock = short_tmp / "custom.sock"
    base = [sys.executable, "-c", "from memviewer.cli import main; main()", "--home", str(home)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVIEWER_")}
    env["XDG_RUNTIME_DIR"] = str(short_tmp / "run")  # the default socket: nothing listens there
    with HubProcess(home, sock):
        out = subprocess.run([*base, "doctor", "--json"], capture_output=True, text=True, env=env, timeout=60)
        hub = {c["name"]: c for c in json.loads(out.stdout)["checks"]}["hub"]
        assert str(sock) in hub["detail"] and "no hub" not in hub["detail"]
    out = subprocess.run([*base, "doctor", "--json"], capture_output=True, text=True, env=env, timeout=60)
    hub = {c["name"]: c for c in json.loads(out.stdout)["checks"]}["hub"]
    assert "no hub" in hub["detail"] and str(sock) not in hub["detail"]  # stopped: back to the default
