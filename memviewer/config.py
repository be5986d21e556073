"""Settings with provenance: default < TOML file < ``MEMVIEWER_*`` env < flag.

``memviewer config`` prints every effective value and where it came from, so a
user debugging recall can tell which weight or endpoint is really in force.
"""

from __future__ import annotations

import contextlib
import difflib
import math
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
    Key("recall_log_max", int, 5000, "searches and recalls kept in the recall log (0 = no logging)"),
    Key("recall_log_days", float, 30.0, "recall log entries older than this many days go (0 = no age limit)"),
    Key("recall_log_mb", float, 64.0, "recall log size cap in MiB: the oldest entries go first (0 = no cap)"),
    Key(
        "watch_praisonai",
        list,
        None,
        "PraisonAI session folders the hub follows (env: paths joined by the OS path separator)",
    ),
    Key(
        "watch_follow_symlinks",
        bool,
        False,
        "the PraisonAI watcher reads files whose real path is outside the watched folder",
    ),
    Key(
        "watch_max_file_bytes",
        int,
        1 << 30,
        "the PraisonAI watcher reports bigger files and does not read them",
    ),
    Key(
        "watch_read_timeout",
        float,
        30.0,
        "seconds one PraisonAI file read may take before the watcher skips it",
    ),
    Key("otlp", str, None, "OTLP/HTTP receiver address HOST:PORT (default off; a bare port is loopback)"),
)
KEY_BY_NAME = {k.name: k for k in KEYS}


TRUE_WORDS = ("true", "1", "yes", "on")
FALSE_WORDS = ("false", "0", "no", "off")
PATH_KEYS = ("home", "socket", "model_dir")  # an empty path would mean "the current folder"

# Lower bounds checked after the layers resolve: (minimum, inclusive?, why it matters).
RANGES: dict[str, tuple[float, bool]] = {
    "active_window": (2, True),
    "frame_limit": (1024, True),  # below this no hello frame fits: the hub would listen but answer nobody
    "subscriber_queue": (1, True),
    "embed_batch": (1, True),
    "embed_threads": (0, True),  # 0 = the runtime's default
    "llm_timeout": (0, False),
    "ann_threshold": (0, True),
    "recall_log_max": (0, True),
    "recall_log_days": (0, True),
    "recall_log_mb": (0, True),
    "watch_max_file_bytes": (1024, True),
    "watch_read_timeout": (0, False),
}


def _problem(key: Key, value: Any) -> tuple[Any, str | None]:
    """``(coerced value, None)`` or ``(None, why value cannot be read as key's type)``."""
    if key.type is bool:
        if isinstance(value, bool):
            return value, None
        if isinstance(value, int) and value in (0, 1):
            return bool(value), None
        if isinstance(value, str) and value.strip().lower() in TRUE_WORDS + FALSE_WORDS:
            return value.strip().lower() in TRUE_WORDS, None
        return None, f"{value!r} is not a boolean (use true/false, yes/no, on/off or 1/0)"
    if key.type is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value, None
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value), None
        if isinstance(value, str):
            try:
                return int(value.strip()), None
            except ValueError:
                pass
        return None, f"cannot read {value!r} as a whole number"
    if key.type is float:
        number: float | None = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            with contextlib.suppress(OverflowError):
                number = float(value)
        elif isinstance(value, str):
            with contextlib.suppress(ValueError):
                number = float(value.strip())
        if number is None:
            return None, f"cannot read {value!r} as a number"
        if not math.isfinite(number):
            return None, f"{value!r} is not a finite number"
        return number, None
    if key.type is list:  # a list of paths: a TOML array, or one string split on os.pathsep
        items = value.split(os.pathsep) if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
            return None, f"{value!r} is not a list of paths"
        items = [x for x in items if x.strip()]
        return items, None
    if not isinstance(value, str):
        return None, f"{value!r} is not a string"
    if key.name in PATH_KEYS and not value.strip():
        return None, "an empty path is not allowed (it would mean the current folder)"
    return value, None


def _coerce(key: Key, value: Any, source: str = "flag") -> Any:
    """``value`` as ``key``'s type; a ``ValueError`` naming the key and its layer otherwise."""
    if value is None:
        return None
    coerced, problem = _problem(key, value)
    if problem is not None:
        raise ValueError(f"setting {key.name!r} ({source}): {problem}")
    return coerced


@dataclass(frozen=True)
class Settings:
    """The effective settings: one typed field per key of ``KEYS``, plus where each came from.

    Built by ``load_settings`` (every value checked by type and range), never by hand.
    ``tests/test_config.py`` keeps the fields and ``KEYS`` the same set.
    """

    home: str
    socket: str
    model_dir: str | None = None
    embed_threads: int = 0
    embed_batch: int = 32
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_timeout: float = 5.0
    llm_api_key: str | None = None
    summary_llm: bool = False
    contextual_embeddings: bool = False
    retention: str = "compact"
    active_window: int = 100
    frame_limit: int = 1_048_576
    subscriber_queue: int = 10_000
    w_dense: float = 0.5
    w_keyword: float = 0.5
    w_recency: float = 0.0
    w_speaker: float = 0.2
    w_time: float = 0.1
    ann_threshold: int = 50_000
    recall_log_max: int = 5000
    recall_log_days: float = 30.0
    recall_log_mb: float = 64.0
    watch_praisonai: list[str] | None = None
    watch_follow_symlinks: bool = False
    watch_max_file_bytes: int = 1 << 30
    watch_read_timeout: float = 30.0
    otlp: str | None = None
    #: key -> "default" | "file:PATH" | "env:NAME" | "flag"
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    #: Problems that do not stop loading (an unknown key in the file); the CLI prints them.
    warnings: list[str] = field(default_factory=list, compare=False)
    #: The config file this was read from, or looked for (``config_found`` says which).
    config_file: str = field(default="", compare=False)
    config_found: bool = field(default=False, compare=False)

    @property
    def values(self) -> dict[str, Any]:
        """Every key's effective value, in ``KEYS`` order (``memviewer config``)."""
        return {k.name: getattr(self, k.name) for k in KEYS}

    @property
    def home_path(self) -> Path:
        return Path(self.home).expanduser()

    @property
    def socket_path(self) -> Path:
        return Path(self.socket).expanduser()

    def with_overrides(self, **overrides: Any) -> Settings:
        """A copy with ``overrides`` applied as flags (checked like any flag)."""
        values, sources = self.values, dict(self.sources)
        for name, value in overrides.items():
            if value is not None:
                values[name] = _coerce(KEY_BY_NAME[name], value)
                sources[name] = "flag"
        return Settings(
            **values,
            sources=sources,
            warnings=list(self.warnings),
            config_file=self.config_file,
            config_found=self.config_found,
        )


def _read_file(path: Path, required: bool) -> dict[str, Any]:
    """The TOML table in ``path``; ``{}`` when it is absent and not ``required``."""
    if not path.exists():
        if required:
            raise ValueError(f"config file {path} does not exist")
        return {}
    if path.is_dir():
        raise ValueError(f"config file {path} is a folder, not a TOML file")
    try:
        return tomllib.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"cannot read config file {path}: not UTF-8 text "
            f"(byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
        ) from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"cannot read config file {path}: {exc}") from exc


def _unknown_key_warnings(file_values: dict[str, Any], path: Path) -> list[str]:
    """One warning per key the file sets that no setting reads, with the closest known key."""
    out = []
    for name in sorted(set(file_values) - set(KEY_BY_NAME)):
        close = difflib.get_close_matches(name, list(KEY_BY_NAME), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        out.append(f"config file {path}: unknown key {name!r} is ignored{hint}")
    return out


def _check_ranges(values: dict[str, Any], sources: dict[str, str]) -> None:
    for name, (low, inclusive) in RANGES.items():
        v = values[name]
        if (v < low) if inclusive else (v <= low):
            bound = f"at least {low}" if inclusive else f"greater than {low}"
            raise ValueError(f"{name} must be {bound}, not {v} ({sources[name]})")
    for name in ("w_dense", "w_keyword", "w_recency"):  # relative weights, normalised by recall
        if values[name] < 0:
            raise ValueError(f"{name} must not be negative, not {values[name]} ({sources[name]})")
    for name in ("w_speaker", "w_time"):  # shares of the score
        if not 0.0 <= values[name] <= 1.0:
            raise ValueError(f"{name} must be between 0 and 1, not {values[name]} ({sources[name]})")
    if values["w_speaker"] + values["w_time"] > 1.0:
        raise ValueError("w_speaker + w_time must not exceed 1")


def load_settings(
    config_file: Path | None = None,
    env: dict[str, str] | None = None,
    *,
    config_required: bool = False,
    **flags: Any,
) -> Settings:
    """Resolve every key through the four layers and remember the winner.

    ``config_required``: the caller named ``config_file`` on purpose (``--config``,
    ``MEMVIEWER_CONFIG``), so a missing file is an error instead of "no settings".
    A folder or an unreadable file is always an error.
    """
    env = dict(os.environ) if env is None else env
    path = config_file or paths.default_config_file()
    file_values = _read_file(path, config_required)
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in KEYS:
        value, source = key.default, "default"
        if key.name in file_values:
            source = f"file:{path}"
            value = _coerce(key, file_values[key.name], source)
        env_name = f"MEMVIEWER_{key.name.upper()}"
        if env.get(env_name) not in (None, ""):
            source = f"env:{env_name}"
            value = _coerce(key, env[env_name], source)
        if flags.get(key.name) is not None:
            value, source = _coerce(key, flags[key.name], "flag"), "flag"
        values[key.name] = value
        sources[key.name] = source
    if values["home"] is None:
        values["home"] = str(paths.default_home())
    if values["socket"] is None:
        values["socket"] = str(paths.home_socket(values["home"]))  # follows the home
    if values["retention"] not in ("compact", "keep_all"):
        raise ValueError(
            f"retention must be 'compact' or 'keep_all', not {values['retention']!r} ({sources['retention']})"
        )
    _check_ranges(values, sources)
    return Settings(
        **values,
        sources=sources,
        warnings=_unknown_key_warnings(file_values, path),
        config_file=str(path),
        config_found=path.exists(),
    )
