"""Core CLI commands in-process: --version, --home, sessions, config."""

from __future__ import annotations

import json

from cli_runs import invoke
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
        1,
        2,
        2,
    )  # user+a archived; summary + b active
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


def test_config_names_env_home_and_socket_as_env_and_the_file_it_read(tmp_path, monkeypatch):
    """Issue 34 item 2: MEMVIEWER_HOME alone is reported as env, not flag; --home is a flag; the
    text form names the config file read, or looked for."""
    monkeypatch.delenv("MEMVIEWER_CONFIG")  # the default file applies
    home, sock = tmp_path / "h", tmp_path / "x.sock"
    missing = tmp_path / "nowhere" / "config.toml"
    env = {
        "MEMVIEWER_HOME": str(home),
        "MEMVIEWER_SOCKET": str(sock),
        "XDG_CONFIG_HOME": str(missing.parent.parent),
    }
    data = json.loads(run("config", "--json", env=env).output)
    assert data["home"] == {"value": str(home), "source": "env:MEMVIEWER_HOME"}
    assert data["socket"] == {"value": str(sock), "source": "env:MEMVIEWER_SOCKET"}
    flagged = json.loads(run("--home", str(tmp_path / "f"), "config", "--json", env=env).output)
    assert flagged["home"] == {"value": str(tmp_path / "f"), "source": "flag"}
    text = run("config", env=env).output.splitlines()[0]
    assert text.startswith("config file: ") and text.endswith("(not found, defaults apply)")
    cfg = tmp_path / "c.toml"
    cfg.write_text("active_window = 12\n")
    assert run("--config", str(cfg), "config", env=env).output.splitlines()[0] == f"config file: {cfg} (read)"


def test_bad_config_is_a_clear_error(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("retention = 'forever'\n")
    res = CliRunner().invoke(cli, ["--config", str(cfg), "sessions"])
    assert res.exit_code != 0 and "retention" in res.output


def _invoke(*args: str, env: dict[str, str] | None = None):
    return invoke(None, *args, env=env)


def test_settings_errors_are_error_lines_naming_the_layer(tmp_path):
    res = _invoke("--home", str(tmp_path / "h"), "config", env={"MEMVIEWER_EMBED_BATCH": "0"})
    assert res.exit_code == 1
    assert res.stderr.startswith("error: embed_batch must be at least 1, not 0 (env:MEMVIEWER_EMBED_BATCH)")
    assert "Error:" not in res.stderr and "Traceback" not in res.stderr


def test_a_named_config_file_that_is_missing_or_a_folder_is_an_error(tmp_path):
    missing = tmp_path / "missing.toml"
    res = _invoke("--config", str(missing), "config")
    assert res.exit_code == 1
    assert res.stderr == (
        f"error: config file {missing} does not exist\nhint: point --config at a TOML file, or unset it\n"
    )
    res = _invoke("config", env={"MEMVIEWER_CONFIG": str(tmp_path)})
    assert res.exit_code == 1 and f"error: config file {tmp_path} is a folder" in res.stderr
    assert "hint: point MEMVIEWER_CONFIG at a TOML file" in res.stderr


def test_an_unknown_config_key_warns_on_stderr(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("w_dens = 0.9\n")
    res = _invoke("--config", str(cfg), "config", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["w_dense"]["value"] == 0.5
    assert "warning: config file" in res.stderr and "did you mean 'w_dense'?" in res.stderr


def test_config_masks_the_llm_api_key(tmp_path):
    key = "sk-live-0123456789abcdefWXYZ"
    res = _invoke("config", "--json", env={"MEMVIEWER_LLM_API_KEY": key})
    assert key not in res.output and json.loads(res.stdout)["llm_api_key"]["value"] == "****WXYZ"
    res = _invoke("config", env={"MEMVIEWER_LLM_API_KEY": "short"})
    assert "short" not in res.output and "****" in res.output
    assert json.loads(_invoke("config", "--json").stdout)["llm_api_key"]["value"] is None


def test_sessions_refuses_a_negative_limit_and_non_utf8_arguments(tmp_path):
    home = str(tmp_path / "h")
    res = _invoke("--home", home, "sessions", "--limit", "-1")
    assert res.exit_code == 1 and "error: --limit must be 0 or more, not -1" in res.stderr
    res = _invoke("--home", home, "sessions", "--filter", "a\udcff")  # argv byte 0xff, as Python keeps it
    assert res.exit_code == 1 and "error: --filter is not valid UTF-8 text: 'a\\xff'" in res.stderr
    res = _invoke("--home", home, "sessions", "--scope", "\ud800", "--json")
    assert res.exit_code == 1 and json.loads(res.stdout)["code"] == "invalid_argument"


def test_a_reader_on_a_missing_home_says_it_started_an_empty_store(tmp_path):
    res = _invoke("--home", str(tmp_path / "typo"), "sessions", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["total"] == 0
    assert f"note: {tmp_path / 'typo'} did not exist" in res.stderr
    again = _invoke("--home", str(tmp_path / "typo"), "sessions", "--json")
    assert "note:" not in again.stderr


def test_errors_a_command_leaves_uncaught_are_error_lines(tmp_path, monkeypatch):
    import click

    from memviewer.errors import MemviewerError

    @click.command("boom")
    @click.argument("kind")
    def boom(kind: str) -> None:
        if kind == "click":
            raise click.ClickException("bad input file")
        raise MemviewerError("internal", "the store failed", data={"hint": "try again"})

    monkeypatch.setitem(cli.commands, "boom", boom)
    res = _invoke("--home", str(tmp_path / "h"), "boom", "click")
    assert res.exit_code == 1 and res.stderr == "error: bad input file\n"
    res = _invoke("--home", str(tmp_path / "h"), "boom", "memviewer")
    assert res.exit_code == 1 and res.stderr == "error: the store failed\nhint: try again\n"
    res = _invoke("--home", str(tmp_path / "h"), "sessions", "--limit", "abc")  # usage errors stay click's
    assert res.exit_code == 2 and "Usage:" in res.stderr
