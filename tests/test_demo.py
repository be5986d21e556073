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
