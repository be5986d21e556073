"""Settings layers: default < file < env < flag, with the source of each value."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import annotated_types
import pytest
from click.testing import CliRunner
from pydantic import Field, ValidationError

from memviewer.cli import cli
from memviewer.config import Settings, accepted, describe, load_settings


def test_layers_and_sources(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('active_window = 40\nllm_model = "qwen"\nw_dense = 0.7\n')
    s = load_settings(
        cfg,
        env={"MEMVIEWER_LLM_MODEL": "llama", "MEMVIEWER_W_DENSE": "0.2"},
        w_dense=0.9,
        home=str(tmp_path / "h"),
    )
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


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"MEMVIEWER_W_SPEAKER": "1.5"},
            "w_speaker must be between 0 and 1, not 1.5 (env:MEMVIEWER_W_SPEAKER)",
        ),
        ({"MEMVIEWER_W_TIME": "-0.1"}, "w_time must be between 0 and 1"),
        ({"MEMVIEWER_W_SPEAKER": "0.6", "MEMVIEWER_W_TIME": "0.6"}, "w_speaker + w_time must not exceed 1"),
        ({"MEMVIEWER_W_DENSE": "-1"}, "w_dense must be at least 0, not -1 (env:MEMVIEWER_W_DENSE)"),
    ],
)
def test_recall_weights_out_of_range_are_refused_when_loading(tmp_path, env, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        load_settings(tmp_path / "none.toml", env=env)
    assert load_settings(tmp_path / "none.toml", env={"MEMVIEWER_W_DENSE": "3"}).w_dense == 3.0


# -- robustness: every value is checked against its type and range, and named with its layer ---------
def _fails(
    tmp_path, message: str, *, text: str | None = None, env: dict[str, str] | None = None, **flags
) -> None:
    cfg = tmp_path / "c.toml"
    if text is not None:
        cfg.write_text(text)
    with pytest.raises(ValueError, match=re.escape(message)):
        load_settings(cfg, env=env or {}, **flags)


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        ('summary_llm = "nope"\n', None, "setting 'summary_llm' (file:"),
        (
            None,
            {"MEMVIEWER_CONTEXTUAL_EMBEDDINGS": "flase"},
            "setting 'contextual_embeddings' (env:MEMVIEWER_CONTEXTUAL_EMBEDDINGS): 'flase' is not a boolean",
        ),
        ("embed_batch = 3.9\n", None, "setting 'embed_batch' (file:"),
        ("active_window = true\n", None, "cannot read True as a whole number"),
        (None, {"MEMVIEWER_EMBED_BATCH": "abc"}, "setting 'embed_batch' (env:MEMVIEWER_EMBED_BATCH)"),
        ('home = ["a"]\n', None, "setting 'home' (file:"),
        ('home = ""\n', None, "an empty path is not allowed"),
        ("w_dense = nan\n", None, "nan is not a finite number"),
        ("w_keyword = inf\n", None, "inf is not a finite number"),
        (
            None,
            {"MEMVIEWER_W_DENSE": "nan"},
            "setting 'w_dense' (env:MEMVIEWER_W_DENSE): 'nan' is not a finite",
        ),
        (None, {"MEMVIEWER_LLM_TIMEOUT": "1e400"}, "is not a finite number"),
        (None, {"MEMVIEWER_FRAME_LIMIT": "-5"}, "frame_limit must be at least 1024, not -5 (env:"),
        ("subscriber_queue = 0\n", None, "subscriber_queue must be at least 1, not 0 (file:"),
        ("embed_batch = 0\n", None, "embed_batch must be at least 1"),
        ("embed_threads = -2\n", None, "embed_threads must be at least 0"),
        ("llm_timeout = 0\n", None, "llm_timeout must be greater than 0"),
        ("ann_threshold = -1\n", None, "ann_threshold must be at least 0"),
    ],
)
def test_bad_types_ranges_and_non_finite_numbers_are_refused(tmp_path, text, env, message) -> None:
    _fails(tmp_path, message, text=text, env=env)


def test_an_empty_home_flag_is_refused(tmp_path) -> None:
    _fails(tmp_path, "setting 'home' (flag): an empty path", home="")


def test_accepted_spellings(tmp_path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("summary_llm = 1\nembed_batch = 8.0\nw_dense = 2\n")
    s = load_settings(cfg, env={"MEMVIEWER_CONTEXTUAL_EMBEDDINGS": " On ", "MEMVIEWER_ACTIVE_WINDOW": " 7 "})
    assert s.summary_llm is True and s.contextual_embeddings is True
    assert s.embed_batch == 8 and isinstance(s.embed_batch, int) and s.active_window == 7
    assert s.w_dense == 2.0 and isinstance(s.w_dense, float)
    for word, value in (("off", False), ("NO", False), ("0", False), ("yes", True), ("TRUE", True)):
        assert load_settings(cfg, env={"MEMVIEWER_SUMMARY_LLM": word}).summary_llm is value


def test_an_unknown_key_warns_with_the_closest_known_one(tmp_path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("w_dens = 0.9\nzzz_nothing_like_it = 1\n")
    s = load_settings(cfg, env={})
    assert s.w_dense == 0.5  # the typo is not applied...
    assert s.warnings == [  # ...but said
        f"config file {cfg}: unknown key 'w_dens' is ignored (did you mean 'w_dense'?)",
        f"config file {cfg}: unknown key 'zzz_nothing_like_it' is ignored",
    ]


def test_a_named_config_file_must_exist_and_be_a_file(tmp_path) -> None:
    assert load_settings(tmp_path / "none.toml", env={}).sources["w_dense"] == "default"  # not named
    with pytest.raises(ValueError, match=re.escape(f"config file {tmp_path / 'none.toml'} does not exist")):
        load_settings(tmp_path / "none.toml", env={}, config_required=True)
    with pytest.raises(ValueError, match="is a folder"):
        load_settings(tmp_path, env={})


def test_a_non_utf8_config_file_is_named(tmp_path) -> None:
    cfg = tmp_path / "latin1.toml"
    cfg.write_bytes(b'llm_model = "caf\xe9"\n')
    with pytest.raises(
        ValueError, match=re.escape(f"cannot read config file {cfg}: not UTF-8 text (byte 0xe9 at offset 16)")
    ):
        load_settings(cfg, env={})


def test_settings_are_typed_attributes_not_a_lookup(tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "none.toml", env={"MEMVIEWER_W_DENSE": "0.25"})
    assert settings.w_dense == 0.25 and settings.sources["w_dense"] == "env:MEMVIEWER_W_DENSE"
    with pytest.raises(AttributeError):
        settings.no_such_key  # noqa: B018 - a typo is an error, not None
    with pytest.raises(ValidationError, match="frozen"):
        settings.w_dense = 1.0  # type: ignore[misc]
    assert settings.with_overrides(w_dense=0.75).w_dense == 0.75


# -- one declaration per key: its bounds are what loading checks and what `config --help` shows ------
def _lower_bound(name: str) -> tuple[float, bool] | None:
    for m in Settings.model_fields[name].metadata:
        if isinstance(m, annotated_types.Ge):
            return float(m.ge), True
        if isinstance(m, annotated_types.Gt):
            return float(m.gt), False
    return None


BOUNDED = [name for name in Settings.model_fields if _lower_bound(name) is not None]


def test_every_bounded_key_is_refused_below_its_declared_bound_and_its_help_says_so(tmp_path) -> None:
    assert {"frame_limit", "embed_batch", "llm_timeout", "w_speaker"} <= set(BOUNDED)
    help_text = CliRunner().invoke(cli, ["config", "--help"]).output
    for name in BOUNDED:
        low, inclusive = _lower_bound(name)  # type: ignore[misc]
        below = int(low) - 1 if inclusive else int(low)
        var = f"MEMVIEWER_{name.upper()}"
        with pytest.raises(ValueError, match=re.escape(f"{name} must be ")) as caught:
            load_settings(tmp_path / "none.toml", env={var: str(below)})
        assert f"not {below} (env:{var})" in str(caught.value)
        bounds = accepted(name).split(", ", 1)[1]  # "at least 1024", "between 0 and 1", ...
        assert f"{name} must be {bounds}, not" in str(caught.value) and f"{low:g}" in bounds
        assert accepted(name) in " ".join(help_text.split()), name  # the help wraps lines
        ok = int(low) if inclusive else int(low) + 1  # the bound itself, or just above an exclusive one
        assert load_settings(tmp_path / "none.toml", env={var: str(ok)}).sources[name] == f"env:{var}"


def test_a_bound_changed_in_the_declaration_changes_what_is_accepted_and_shown() -> None:
    class Tighter(Settings):
        frame_limit: int = Field(1_048_576, ge=4096, description="largest accepted protocol frame in bytes")

    assert accepted("frame_limit") == "whole number, at least 1024"
    assert accepted("frame_limit", Tighter) == "whole number, at least 4096"
    assert (
        "frame_limit",
        "MEMVIEWER_FRAME_LIMIT",
        "whole number, at least 4096",
        "1048576",
        Tighter.model_fields["frame_limit"].description,
    ) in describe(Tighter)
    with pytest.raises(ValidationError, match="greater than or equal to 4096"):
        Tighter(frame_limit=2048)
    assert Settings(frame_limit=2048).frame_limit == 2048


def test_config_help_lists_every_key_with_its_env_var_and_help() -> None:
    text = " ".join(CliRunner().invoke(cli, ["config", "--help"]).output.split())
    for name, field in Settings.model_fields.items():
        assert f"MEMVIEWER_{name.upper()}" in text
        assert " ".join(str(field.description).split()[:4]) in text, name
    assert "'compact' or 'keep_all'" in text and "between 0 and 1" in text


def test_env_beats_file_beats_default_for_one_key(tmp_path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("embed_batch = 8\n")
    assert load_settings(tmp_path / "none.toml", env={}).embed_batch == 32
    by_file = load_settings(cfg, env={})
    assert by_file.embed_batch == 8 and by_file.sources["embed_batch"] == f"file:{cfg}"
    by_env = load_settings(cfg, env={"MEMVIEWER_EMBED_BATCH": "16"})
    assert by_env.embed_batch == 16 and by_env.sources["embed_batch"] == "env:MEMVIEWER_EMBED_BATCH"
    by_flag = load_settings(cfg, env={"MEMVIEWER_EMBED_BATCH": "16"}, embed_batch=4)
    assert by_flag.embed_batch == 4 and by_flag.sources["embed_batch"] == "flag"
    assert load_settings(cfg, env={"MEMVIEWER_EMBED_BATCH": ""}).embed_batch == 8  # empty = not set
    env = {**os.environ, "MEMVIEWER_EMBED_BATCH": "16", "MEMVIEWER_HOME": str(tmp_path / "h")}
    res = CliRunner().invoke(cli, ["--config", str(cfg), "config", "--json"], env=env)
    assert json.loads(res.stdout)["embed_batch"] == {"value": 16, "source": "env:MEMVIEWER_EMBED_BATCH"}


def test_only_the_winning_layer_is_checked(tmp_path) -> None:
    """A bad file value under a good env value loads; without the env value it is the error."""
    cfg = tmp_path / "c.toml"
    cfg.write_text('embed_batch = "lots"\n')
    assert load_settings(cfg, env={"MEMVIEWER_EMBED_BATCH": "16"}).embed_batch == 16
    _fails(tmp_path, f"setting 'embed_batch' (file:{cfg}): cannot read 'lots' as a whole number", text=None)


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        (
            "MEMVIEWER_EMBED_BATCH",
            "lots",
            "setting 'embed_batch' (env:MEMVIEWER_EMBED_BATCH): cannot read 'lots'",
        ),
        (
            "MEMVIEWER_LLM_TIMEOUT",
            "soon",
            "setting 'llm_timeout' (env:MEMVIEWER_LLM_TIMEOUT): cannot read 'soon'",
        ),
        ("MEMVIEWER_RETENTION", "forever", "retention must be 'compact' or 'keep_all', not 'forever' (env:"),
        (
            "MEMVIEWER_SUMMARY_LLM",
            "maybe",
            "setting 'summary_llm' (env:MEMVIEWER_SUMMARY_LLM): 'maybe' is not",
        ),
        ("MEMVIEWER_SOCKET", "  ", "setting 'socket' (env:MEMVIEWER_SOCKET): an empty path"),
    ],
)
def test_a_bad_env_value_names_the_key_and_the_env_var(tmp_path, var, value, message) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        load_settings(tmp_path / "none.toml", env={var: value})


def test_a_bad_env_value_is_an_error_line_naming_the_env_var(tmp_path) -> None:
    env = {**os.environ, "MEMVIEWER_ACTIVE_WINDOW": "many", "MEMVIEWER_HOME": str(tmp_path / "h")}
    res = CliRunner().invoke(cli, ["config"], env=env)
    assert res.exit_code == 1 and res.stderr.startswith(
        "error: setting 'active_window' (env:MEMVIEWER_ACTIVE_WINDOW): cannot read 'many' as a whole number"
        " (accepted: whole number, at least 2)"
    )


def test_watch_praisonai_takes_a_toml_array_or_paths_joined_by_the_path_separator(tmp_path) -> None:
    joined = os.pathsep.join(["/a/one", "", "/b/two"])
    s = load_settings(tmp_path / "none.toml", env={"MEMVIEWER_WATCH_PRAISONAI": joined})
    assert s.watch_praisonai == ["/a/one", "/b/two"]
    assert s.sources["watch_praisonai"] == "env:MEMVIEWER_WATCH_PRAISONAI"
    cfg = tmp_path / "c.toml"
    cfg.write_text('watch_praisonai = ["/c/three"]\n')
    assert load_settings(cfg, env={}).watch_praisonai == ["/c/three"]
    cfg.write_text("watch_praisonai = [3]\n")
    _fails(tmp_path, "setting 'watch_praisonai' (file:", text="watch_praisonai = [3]\n")


def test_the_api_key_is_a_secret_masked_in_every_shown_form(tmp_path) -> None:
    key = "sk-live-0123456789abcdefWXYZ"
    s = load_settings(tmp_path / "none.toml", env={"MEMVIEWER_LLM_API_KEY": key})
    assert s.llm_api_key is not None and s.llm_api_key.get_secret_value() == key
    assert key not in repr(s) and key not in str(s.values)
    assert s.shown()["llm_api_key"] == "****WXYZ"


def test_settings_built_by_hand_read_the_process_environment_with_the_same_precedence(
    tmp_path, monkeypatch
) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("embed_batch = 8\nactive_window = 9\n")
    monkeypatch.setenv("MEMVIEWER_CONFIG", str(cfg))
    monkeypatch.setenv("MEMVIEWER_EMBED_BATCH", "16")
    s = Settings(active_window=3)
    assert (s.embed_batch, s.active_window) == (16, 3)
    assert Settings().active_window == 9
