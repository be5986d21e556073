"""Settings layers: default < file < env < flag, with the source of each value."""

from __future__ import annotations

import re

import pytest

from memviewer.config import load_settings


def test_layers_and_sources(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('active_window = 40\nllm_model = "qwen"\nw_dense = 0.7\n')
    s = load_settings(cfg, env={"MEMVIEWER_LLM_MODEL": "llama", "MEMVIEWER_W_DENSE": "0.2"},
                      w_dense=0.9, home=str(tmp_path / "h"))
    assert s.active_window == 40 and s.sources["active_window"].startswith("file:")
    assert s.llm_model == "llama" and s.sources["llm_model"] == "env:MEMVIEWER_LLM_MODEL"
    assert s.w_dense == 0.9 and s.sources["w_dense"] == "flag"
    assert s.retention == "compact" and s.sources["retention"] == "default"
    assert s.home_path == tmp_path / "h"


def test_bad_values_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("active_window = [")
    with pytest.raises(ValueError, match="cannot read config file"):
        load_settings(bad, env={})
    with pytest.raises(ValueError, match="active_window"):
        load_settings(tmp_path / "none.toml", env={"MEMVIEWER_ACTIVE_WINDOW": "many"})
    with pytest.raises(ValueError, match="retention"):
        load_settings(tmp_path / "none.toml", env={"MEMVIEWER_RETENTION": "forever"})


def test_socket_and_home_defaults_follow_env(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMVIEWER_HOME", str(tmp_path / "envhome"))
    monkeypatch.setenv("MEMVIEWER_SOCKET", str(tmp_path / "s.sock"))
    s = load_settings(tmp_path / "none.toml")
    assert s.home_path == tmp_path / "envhome" and s.socket_path == tmp_path / "s.sock"


@pytest.mark.parametrize(("env", "message"), [
    ({"MEMVIEWER_W_SPEAKER": "1.5"}, "w_speaker must be between 0 and 1, not 1.5 (env:MEMVIEWER_W_SPEAKER)"),
    ({"MEMVIEWER_W_TIME": "-0.1"}, "w_time must be between 0 and 1"),
    ({"MEMVIEWER_W_SPEAKER": "0.6", "MEMVIEWER_W_TIME": "0.6"}, "w_speaker + w_time must not exceed 1"),
    ({"MEMVIEWER_W_DENSE": "-1"}, "w_dense must not be negative"),
])
def test_recall_weights_out_of_range_are_refused_when_loading(tmp_path, env, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        load_settings(tmp_path / "none.toml", env=env)
    assert load_settings(tmp_path / "none.toml", env={"MEMVIEWER_W_DENSE": "3"}).w_dense == 3.0
