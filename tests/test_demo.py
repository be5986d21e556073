"""``memviewer demo``: realistic contents, idempotent, in-process or through a hub; ``--live``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from memviewer.cli import cli
from memviewer.demo.scenario import build_scenario, describe
from memviewer.wire.testing import HubProcess, hub_env


def run_demo(home: Path, sock: Path, *args: str) -> dict:
    result = CliRunner().invoke(
        cli, ["--home", str(home), "--socket", str(sock), "demo", "--no-index", "--json", *args]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.output.strip().splitlines()[-1])


def test_scenario_is_deterministic_and_spread_over_two_weeks() -> None:
    now = 1_750_000_000.0
    a, b = build_scenario(now), build_scenario(now)
    assert a == b

    def ids(cmds: list[dict]) -> list[str]:
        return [c.get("turn_id") or c.get("episode_id") or c.get("session_id") for c in cmds]

    assert ids(build_scenario(now + 86_400)) == ids(a)  # ids ignore the clock
    stamps = [c["ts"] for c in a]
    assert now - 14.5 * 86_400 < min(stamps) and max(stamps) < now
    assert max(stamps) - min(stamps) > 12 * 86_400


def test_demo_contents_and_idempotence(service, settings) -> None:  # noqa: ANN001
    home, sock = settings.home_path, settings.socket_path
    service.close()
    first = run_demo(home, sock)
    scenario = describe(build_scenario())
    assert first["errors"] == 0 and first["via"] == "in-process store"
    assert first["created"]["sessions"] == scenario["sessions"]
    assert first["created"]["turns"] == scenario["turns"]  # compaction summaries apart:
    assert first["created"]["compaction_summaries"] >= 1
    second = run_demo(home, sock)
    assert not any(second["created"].values()), second["created"]

    from memviewer.service import MemoryService

    svc = MemoryService(settings, readonly=True)
    try:
        sessions = svc.sessions()["sessions"]
        details = {s["session_id"]: svc.session(s["session_id"]) for s in sessions}
    finally:
        svc.close()
    turns = [t for d in details.values() for t in d["turns"]]
    texts = "\n".join(t["content"] for t in turns)
    # compaction: archived turns and one summary in the window-30 session
    compacted = [d for d in details.values() if any(t["archived"] for t in d["turns"])]
    assert len(compacted) == 1 and compacted[0]["session"]["active_window"] == 30
    assert sum(t["is_compaction_summary"] for t in compacted[0]["turns"]) == 1
    # an automated session
    assert sum(s["source"] == "cron" for s in sessions) >= 2
    # a lineage of three, and two siblings sharing only their parent
    lineages: dict[str, list[dict]] = {}
    for s in sessions:
        if s["lineage_id"]:
            lineages.setdefault(s["lineage_id"], []).append(s)
    assert [len(v) for v in lineages.values()] == [3]
    (lineage,) = lineages.values()
    assert len({s["root_session_id"] for s in lineage}) == 1
    parents: dict[str, list[dict]] = {}
    for s in sessions:
        if s["parent_session_id"]:
            parents.setdefault(s["parent_session_id"], []).append(s)
    (siblings,) = parents.values()
    assert len(siblings) == 2 and not any(s["lineage_id"] for s in siblings)
    # Chinese, tools, planted facts, an abandoned episode and an open session
    assert "缓存策略" in texts and "批量插入" in texts
    tool_turns = [t for t in turns if t["role"] == "tool"]
    assert tool_turns and all(t["metadata"].get("tool") and t["tool_call_id"] for t in tool_turns)
    assert any(t["tool_calls"] for t in turns if t["role"] == "assistant")
    assert "deploy token XZ99" in texts and "billing migration to Adyen" in texts
    episodes = [e for d in details.values() for e in d["episodes"]]
    assert any(e["closed_by"] == "abandoned" for e in episodes)
    assert {e["intent"]["kind"] for e in episodes} >= {"task", "memory_probe", "chitchat", "meta"}
    assert any(s["status"] == "open" for s in sessions)


@pytest.mark.integration
def test_demo_goes_through_a_running_hub_and_live_mode_publishes(tmp_path: Path, short_tmp: Path) -> None:
    home, sock = tmp_path / "home", short_tmp / "hub.sock"
    with HubProcess(home, sock):
        first = run_demo(home, sock)
        assert first["via"].startswith("hub at") and first["errors"] == 0
        assert first["created"]["sessions"] == describe(build_scenario())["sessions"]
        assert run_demo(home, sock)["created"]["events"] == 0
        live = subprocess.run(
            [
                sys.executable,
                "-c",
                "from memviewer.cli import main; main()",
                "demo",
                "--live",
                "--rate",
                "60",
                "--duration",
                "2.5",
                "--seed",
                "3",
                "--json",
            ],
            env=hub_env(home, sock),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert live.returncode == 0, live.stderr
        report = json.loads(live.stdout.strip().splitlines()[-1])
        assert report["delivered"] is True and report["errors"] == 0
        assert report["automated_sessions"] >= 1 and report["turns"] >= 60
        from memviewer.wire.remote import RemoteService

        with RemoteService(sock) as remote:
            live_sessions = remote.sessions(filter="live-coder")["sessions"]
            audits = remote.sessions(filter="nightly-audit")["sessions"]
        cron = [s for s in audits if s["meta"].get("demo") == "live"]
        assert live_sessions and all(s["status"] == "closed" for s in live_sessions)
        assert cron and cron[0]["source"] == "cron"

        # --remove through the hub: the scenario and the live agent's sessions, not the user's
        from memviewer.demo.scenario import session_ids

        with RemoteService(sock) as remote:
            mine = {"op": "open_session", "session_id": "s-mine", "agent": "coder", "meta": {"demo": True}}
            assert "ok" in remote.publish([mine])[0]
            published = remote.stats()["hub"]["counters"]["published_commands"]
        gone = run_demo(home, sock, "--remove")
        assert gone["via"].startswith("hub at") and gone["errors"] == 0
        demo_ids = set(session_ids()) | {s["session_id"] for s in live_sessions + cron}
        assert set(gone["session_ids"]) == demo_ids
        with RemoteService(sock) as remote:
            assert [s["session_id"] for s in remote.sessions()["sessions"]] == ["s-mine"]
            deleted = remote.events(0, 10_000, kinds=["session.deleted"])
            counters = remote.stats()["hub"]["counters"]
        assert sorted(e.session_id for e in deleted) == sorted(demo_ids)
        assert counters["published_commands"] == published + len(demo_ids)  # the hub's writer did it
        again = run_demo(home, sock, "--remove")
        assert again["removed"]["sessions"] == 0 and again["note"].startswith("nothing to remove")


class _DirectPublisher:
    """``LiveAgent``'s publisher, applying straight to a service; stops the agent after
    ``turns`` turns (so no clock decides how much it publishes)."""

    def __init__(self, svc, stop, turns: int) -> None:  # noqa: ANN001
        self.svc, self.stop, self.left = svc, stop, turns

    def open_session(self, **kw) -> str:  # noqa: ANN003
        return self.svc.open_session(**kw)["session_id"]

    def start_episode(self, session_id: str, user_message: str) -> str:
        return self.svc.start_episode(session_id, user_message)["episode_id"]

    def add_turn(self, episode_id: str, role: str, content: str, **kw) -> None:  # noqa: ANN003
        self.svc.add_turn(episode_id, role, content, **kw)
        self.left -= 1
        if self.left <= 0:
            self.stop.set()

    def finalize_episode(self, episode_id: str, r_task: float | None = None) -> None:
        self.svc.finalize_episode(episode_id, r_task)

    def abandon_episode(self, episode_id: str, reason: str | None = None) -> None:
        self.svc.abandon_episode(episode_id, reason)

    def close_session(self, session_id: str) -> None:
        self.svc.close_session(session_id)


def _user_sessions(svc) -> list[str]:  # noqa: ANN001
    """Sessions of the user's own agents, two of them looking a little like the demo's."""
    mine = svc.open_session(agent="coder", scope="user", scope_id="u-me", title="my real work")
    marked = svc.open_session(agent="coder", meta={"demo": True})  # the user's own "demo" key
    named = svc.open_session(agent="live-coder", meta={"team": "x"})  # the agent name, no mark
    for sid in (mine["session_id"], marked["session_id"], named["session_id"]):
        svc.start_episode(sid, "keep me")
    return [mine["session_id"], marked["session_id"], named["session_id"]]


def test_demo_remove_deletes_the_demo_and_nothing_else(service, settings) -> None:  # noqa: ANN001
    import threading

    from memviewer.demo.live import LiveAgent
    from memviewer.demo.scenario import session_ids

    home, sock = settings.home_path, settings.socket_path
    keep = _user_sessions(service)
    stop = threading.Event()
    agent = LiveAgent(_DirectPublisher(service, stop, 80), rate=1e6, seed=3, stop=stop, out=lambda _m: None)
    counts = agent.run()
    assert counts["automated_sessions"] >= 1
    live = {s["session_id"] for s in service.sessions()["sessions"]} - set(keep)
    assert len(live) == counts["sessions"]
    service.close()
    loaded = CliRunner().invoke(cli, ["--home", str(home), "--socket", str(sock), "demo", "--no-index"])
    assert loaded.exit_code == 0 and "demo --remove" in loaded.output, loaded.output  # said how

    first = run_demo(home, sock, "--remove")
    assert first["via"] == "in-process store" and first["errors"] == 0 and "note" not in first
    assert set(first["session_ids"]) == set(session_ids()) | live
    assert first["removed"]["sessions"] == len(session_ids()) + len(live)
    assert first["removed"]["turns"] >= describe(build_scenario())["turns"] + counts["turns"]
    second = run_demo(home, sock, "--remove")
    assert second["removed"] == {"sessions": 0, "episodes": 0, "turns": 0} and not second["session_ids"]
    assert second["note"].startswith("nothing to remove")
    text = CliRunner().invoke(cli, ["--home", str(home), "--socket", str(sock), "demo", "--remove"])
    assert text.exit_code == 0 and text.output.startswith("nothing to remove: no demo session"), text.output

    from memviewer.service import MemoryService

    svc = MemoryService(settings, readonly=True)
    try:
        left = [s["session_id"] for s in svc.sessions()["sessions"]]
        deleted = [e.session_id for e in svc.events(0, 100_000) if e.kind == "session.deleted"]
    finally:
        svc.close()
    assert sorted(left) == sorted(keep)  # the user's sessions survive, episodes and all
    assert sorted(deleted) == sorted(first["session_ids"])  # the viewer's `D` path: one event each


def test_demo_remove_refuses_live(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / "h"), "demo", "--remove", "--live"])
    assert result.exit_code == 1 and "do not go together" in result.output
