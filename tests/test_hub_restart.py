"""A hub restart loses nothing: SIGINT, SIGTERM and SIGKILL in the middle of an episode.

The hub is not the agent: stopping it never closes an episode, the agent's
publisher spools meanwhile and replays into the same open episode. The agent's
own end (``Publisher.close()``) abandons exactly its own open episodes. A
command the hub refuses is reported, never silent: ``flush()`` is False.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_for

from memviewer import paths
from memviewer.client import Publisher
from memviewer.store.db import Store
from memviewer.wire.remote import RemoteService
from memviewer.wire.testing import HubProcess, hub_env

pytestmark = pytest.mark.integration


def events(home: Path) -> list[tuple[str, str | None, dict[str, Any]]]:
    store = Store.open(paths.db_path(home), readonly=True)
    try:
        return [(e.kind, e.episode_id, e.payload) for e in store.events_since(0, 1_000_000)]
    finally:
        store.close()


def episode_turns(home: Path, eid: str) -> list[str]:
    from sqlalchemy import text

    store = Store.open(paths.db_path(home), readonly=True)
    try:
        with store.read() as conn:
            rows = conn.execute(
                text(
                    "SELECT content FROM turns WHERE episode_id = :e AND NOT is_compaction_summary "
                    "ORDER BY idx"
                ),
                {"e": eid},
            ).all()
        return [r[0] for r in rows]
    finally:
        store.close()


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["sigint", "sigterm", "sigkill"]
)
def test_a_hub_restart_in_the_middle_of_an_episode_loses_nothing(
    tmp_path: Path, short_tmp: Path, sig: int
) -> None:
    home = tmp_path / "home"
    sock = short_tmp / "hub.sock"
    total = 400
    hub = HubProcess(home, sock).start()
    pub = Publisher(sock, home=home, max_batch=20, max_backoff=0.2)
    bystander = Publisher(sock, home=home)  # another agent: its episode outlives the first one's end
    expected = ["a long refactor"]
    try:
        sid = pub.open_session(agent="restarted", active_window=1000)
        eid = pub.start_episode(sid, expected[0])
        other_eid = bystander.start_episode(bystander.open_session(agent="bystander"), "still working")
        assert bystander.flush(10)
        produced = threading.Event()

        def agent() -> None:  # keeps publishing straight through the stop and the restart
            for i in range(total):
                expected.append(f"step {i}")
                pub.add_turn(eid, "assistant" if i % 2 else "tool", f"step {i}")
                time.sleep(0.002)
            produced.set()

        worker = threading.Thread(target=agent)
        worker.start()
        wait_for(lambda: pub.stats()["acked_commands"] > total // 4, what="a quarter acknowledged")
        if sig == signal.SIGKILL:
            hub.kill()
        else:
            assert hub.stop(sig) == 0
        stopped_at = pub.stats()["acked_commands"]
        hub.start()
        worker.join(60)
        assert produced.is_set()
        assert pub.flush(30) is True  # every command stored: nothing refused, nothing pending
        assert stopped_at < total  # the stop really came in the middle
        assert pub.errors == 0 and pub.refusals == [] and pub.stats()["connects"] >= 2
        assert episode_turns(home, eid) == expected  # 0 of 400 lost, in order, once each
        assert not any(kind == "episode.abandoned" for kind, _, _ in events(home))
        if sig != signal.SIGKILL:
            assert "2 open episodes left open" in hub.log()  # the agent's and the bystander's

        # the agent's own end abandons its own open episode, and nobody else's
        assert pub.close(timeout=10) is True
        with RemoteService(sock) as remote:
            eps = {e["episode_id"]: e for e in remote.session(sid)["episodes"]}
            assert eps[eid]["status"] == "closed" and eps[eid]["closed_by"] == "abandoned"
        abandoned = [(e, p.get("reason")) for k, e, p in events(home) if k == "episode.abandoned"]
        assert abandoned == [(eid, "shutdown")]
        assert other_eid in bystander.open_episodes()
        assert ("episode.finalized", other_eid) not in [(k, e) for k, e, _ in events(home)]
    finally:
        pub.close(timeout=1)
        bystander.close(timeout=1, end_episodes=False)
        hub.kill()


def test_a_refused_command_is_reported_counted_and_shown_by_doctor(tmp_path: Path, short_tmp: Path) -> None:
    home = tmp_path / "home"
    sock = short_tmp / "hub.sock"
    seen: list[dict[str, Any]] = []
    with HubProcess(home, sock) as hub, Publisher(sock, home=home, on_refusal=seen.append) as pub:
        sid = pub.open_session(agent="late")
        eid = pub.start_episode(sid, "answer once")
        pub.finalize_episode(eid)
        late = pub.add_turn(eid, "assistant", "after the end")
        assert pub.flush(10) is False  # acknowledged, not stored
        wait_for(lambda: seen, what="the callback")
        assert [(r["op"], r["error"]["code"], r["command"]["turn_id"]) for r in seen] == [
            ("add_turn", "conflict", late)
        ]
        assert pub.refusals == seen and pub.stats()["refused"] == 1
        with RemoteService(sock) as remote:
            info = remote.stats()["hub"]
        assert info["counters"]["refused_commands"] == 1
        assert info["refused_by_code"] == {"conflict": 1}
        assert info["last_refused"]["op"] == "add_turn"
        doctor = subprocess.run(
            [sys.executable, "-c", "from memviewer.cli import main; main()", "doctor", "--json"],
            capture_output=True,
            text=True,
            env=hub_env(home, sock),
            timeout=120,
        )
        check = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}["hub"]
        assert check["refused_commands"] == 1 and "1 commands refused" in check["detail"]
        assert "conflict" in check["detail"]
        assert "refused publish command add_turn: conflict" in hub.log()
        assert pub.take_refusals() == seen
        assert pub.flush(10) is True  # taken, and nothing new was refused
        assert pub.close() is True


def test_a_shutdown_command_names_its_episodes_and_never_means_all(tmp_path: Path, short_tmp: Path) -> None:
    """The publish op an agent's end sends: only the listed episodes; without a list it is refused."""
    home = tmp_path / "home"
    sock = short_tmp / "hub.sock"
    with HubProcess(home, sock), RemoteService(sock) as remote:
        results = remote.publish(
            [
                {"op": "open_session", "session_id": "s1"},
                {"op": "start_episode", "session_id": "s1", "episode_id": "e-mine", "user_message": "a"},
                {"op": "start_episode", "session_id": "s1", "episode_id": "e-theirs", "user_message": "b"},
                {"op": "shutdown"},
                {"op": "shutdown", "episode_ids": ["e-mine", "e-unknown"]},
                {"op": "shutdown", "episode_ids": ["e-mine"]},
            ]
        )
        assert results[3]["error"]["code"] == "invalid_argument"
        assert results[4] == {"ok": {"abandoned": ["e-mine"]}}
        assert results[5] == {"ok": {"abandoned": []}}  # a replay is a no-op
        eps = {e["episode_id"]: e["status"] for e in remote.session("s1")["episodes"]}
        assert eps == {"e-mine": "closed", "e-theirs": "open"}
