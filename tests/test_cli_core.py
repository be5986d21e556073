"""Core CLI commands in-process: --version, --home, sessions, config."""

from __future__ import annotations

import json

from click.testing import CliRunner

from memviewer import __version__
from memviewer.cli import cli
from memviewer.config import load_settings
from memviewer.service import MemoryService


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


def test_version():
    res = run("--version")
    assert res.exit_code == 0 and __version__ in res.output


def test_sessions_json_counts_and_home_flag(tmp_path):
    home = tmp_path / "h"
    svc = MemoryService(load_settings(tmp_path / "none.toml", env={}, home=str(home)))
    svc.open_session(session_id="s1", agent="bot", active_window=2)
    ep = svc.start_episode("s1", "first")
    svc.add_turn(ep["episode_id"], "assistant", "a")
    svc.add_turn(ep["episode_id"], "assistant", "b")
    svc.open_session(session_id="s2", agent="other", scope_id="u1")
    svc.close()
    res = run("--home", str(home), "sessions", "--json")
    assert res.exit_code == 0
    page = json.loads(res.output)
    by_id = {s["session_id"]: s for s in page["sessions"]}
    assert page["total"] == 2
    assert (by_id["s1"]["episodes"], by_id["s1"]["archived_turns"], by_id["s1"]["active_turns"]) == (
        1, 2, 2)  # user+a archived; summary + b active
    assert by_id["s2"]["scope"] == "user"
    res = run("--home", str(home), "sessions", "--scope", "user", "--json")
    assert [s["session_id"] for s in json.loads(res.output)["sessions"]] == ["s2"]
    # MEMVIEWER_HOME works like --home
    res = run("sessions", "--json", env={"MEMVIEWER_HOME": str(home)})
    assert json.loads(res.output)["total"] == 2


def test_sessions_paging_counts_total(tmp_path):
    svc = MemoryService(load_settings(tmp_path / "none.toml", env={}, home=str(tmp_path / "h")))
    for i in range(7):
        svc.open_session(session_id=f"s{i}", ts=1000.0 + i)
    page = svc.sessions(limit=3, offset=3)
    assert page["total"] == 7
    assert [s["session_id"] for s in page["sessions"]] == ["s3", "s2", "s1"]
    svc.close()


def test_config_shows_values_and_sources(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("active_window = 12\n")
    res = run("--config", str(cfg), "config", "--json", env={"MEMVIEWER_LLM_MODEL": "m"})
    data = json.loads(res.output)
    assert data["active_window"] == {"value": 12, "source": f"file:{cfg}"}
    assert data["llm_model"]["source"] == "env:MEMVIEWER_LLM_MODEL"


def test_bad_config_is_a_clear_error(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("retention = 'forever'\n")
    res = CliRunner().invoke(cli, ["--config", str(cfg), "sessions"])
    assert res.exit_code != 0 and "retention" in res.output
