"""Settings with provenance: default < TOML file < ``MEMVIEWER_*`` env < flag.

``memviewer config`` prints every effective value and where it came from, so a
user debugging recall can tell which weight or endpoint is really in force.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memviewer import paths


@dataclass(frozen=True)
class Key:
    name: str
    type: type
    default: Any
    help: str


KEYS: tuple[Key, ...] = (
    Key("home", str, None, "data folder (SQLite store, LanceDB index, spool)"),
    Key("socket", str, None, "hub Unix socket path"),
    Key("model_dir", str, None, "folder with model.onnx + tokenizer.json (default: packaged MiniLM)"),
    Key("embed_threads", int, 0, "onnxruntime intra-op threads (0 = runtime default)"),
    Key("embed_batch", int, 32, "embedding batch size"),
    Key("llm_base_url", str, None, "OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1"),
    Key("llm_model", str, None, "model name at the LLM endpoint"),
    Key("llm_timeout", float, 5.0, "seconds before an LLM call counts as llm_timeout"),
    Key("llm_api_key", str, None, "bearer token for the LLM endpoint (optional)"),
    Key("summary_llm", bool, False, "use the LLM endpoint for session summaries"),
    Key("contextual_embeddings", bool, False, "prepend the session summary to each turn before embedding"),
    Key("retention", str, "compact", "default session retention: compact | keep_all"),
    Key("active_window", int, 100, "active turns kept before compaction"),
    Key("frame_limit", int, 1_048_576, "largest accepted protocol frame in bytes"),
    Key("subscriber_queue", int, 10_000, "events buffered per subscriber before 'lagged'"),
    Key("w_dense", float, 0.5, "recall blend weight of vector similarity"),
    Key("w_keyword", float, 0.5, "recall blend weight of BM25 keyword evidence"),
    Key("w_recency", float, 0.0, "recall blend weight of recency"),
    Key("w_speaker", float, 0.2, "recall: share of the score for turns by the speaker the query asks about"),
    Key("w_time", float, 0.1, "recall: share of the score for closeness to a date the query names"),
    Key("ann_threshold", int, 50_000, "turns in a scope before an IVF_PQ index is built"),
)
KEY_BY_NAME = {k.name: k for k in KEYS}


def _coerce(key: Key, value: Any) -> Any:
    if value is None:
        return None
    if key.type is bool:
        if isinstance(value, str):
            return value.strip().lower() in ("1", "true", "yes", "on")
        return bool(value)
    try:
        return key.type(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"setting {key.name!r}: cannot read {value!r} as {key.type.__name__}") from exc


@dataclass
class Settings:
    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def home_path(self) -> Path:
        return Path(self.values["home"]).expanduser()

    @property
    def socket_path(self) -> Path:
        return Path(self.values["socket"]).expanduser()

    def with_overrides(self, **overrides: Any) -> Settings:
        values, sources = dict(self.values), dict(self.sources)
        for name, value in overrides.items():
            if value is not None:
                values[name] = _coerce(KEY_BY_NAME[name], value)
                sources[name] = "flag"
        return Settings(values, sources)


def load_settings(
    config_file: Path | None = None,
    env: dict[str, str] | None = None,
    **flags: Any,
) -> Settings:
    """Resolve every key through the four layers and remember the winner."""
    env = dict(os.environ) if env is None else env
    path = config_file or paths.default_config_file()
    file_values: dict[str, Any] = {}
    if path.is_file():
        try:
            file_values = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ValueError(f"cannot read config file {path}: {exc}") from exc
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in KEYS:
        value, source = key.default, "default"
        if key.name in file_values:
            value, source = _coerce(key, file_values[key.name]), f"file:{path}"
        env_name = f"MEMVIEWER_{key.name.upper()}"
        if env.get(env_name) not in (None, ""):
            value, source = _coerce(key, env[env_name]), f"env:{env_name}"
        if flags.get(key.name) is not None:
            value, source = _coerce(key, flags[key.name]), "flag"
        values[key.name] = value
        sources[key.name] = source
    if values["home"] is None:
        values["home"] = str(paths.default_home())
    if values["socket"] is None:
        values["socket"] = str(paths.default_socket())
    if values["retention"] not in ("compact", "keep_all"):
        raise ValueError(f"retention must be 'compact' or 'keep_all', not {values['retention']!r}")
    if values["active_window"] < 2:
        raise ValueError("active_window must be at least 2")
    for name in ("w_dense", "w_keyword", "w_recency"):  # relative weights, normalised by recall
        if values[name] < 0:
            raise ValueError(f"{name} must not be negative, not {values[name]} ({sources[name]})")
    for name in ("w_speaker", "w_time"):  # shares of the score
        if not 0.0 <= values[name] <= 1.0:
            raise ValueError(f"{name} must be between 0 and 1, not {values[name]} ({sources[name]})")
    if values["w_speaker"] + values["w_time"] > 1.0:
        raise ValueError("w_speaker + w_time must not exceed 1")
    return Settings(values, sources)
