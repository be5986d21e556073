"""Settings layers: default < file < env < flag, with the source of each value."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from memviewer.config import load_settings


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
        ({"MEMVIEWER_W_DENSE": "-1"}, "w_dense must not be negative"),
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


def test_settings_has_one_typed_field_per_key() -> None:
    """A key added to KEYS without a typed field (or the reverse) is caught here."""
    import dataclasses
    import typing

    from memviewer.config import KEYS, Settings

    fields = {f.name: f for f in dataclasses.fields(Settings)}
    hints = typing.get_type_hints(Settings)
    assert set(fields) - {"sources", "warnings", "config_file", "config_found"} == {k.name for k in KEYS}
    for key in KEYS:
        hint = hints[key.name]
        allowed = {typing.get_origin(a) or a for a in typing.get_args(hint) or (hint,)}  # list[str] -> list
        assert key.type in allowed, f"{key.name}: field type {hint} vs key type {key.type}"
        if key.name not in ("home", "socket"):  # resolved to the platform's folders
            assert fields[key.name].default == key.default, key.name


def test_settings_are_typed_attributes_not_a_lookup(tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "none.toml", env={"MEMVIEWER_W_DENSE": "0.25"})
    assert settings.w_dense == 0.25 and settings.sources["w_dense"] == "env:MEMVIEWER_W_DENSE"
    with pytest.raises(AttributeError):
        settings.no_such_key  # noqa: B018 - a typo is an error, not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.w_dense = 1.0  # type: ignore[misc]
    assert settings.with_overrides(w_dense=0.75).w_dense == 0.75
