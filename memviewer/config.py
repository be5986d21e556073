"""Settings with provenance: default < TOML file < ``MEMVIEWER_*`` env < flag.

Every key is declared once, as a field of ``Settings``: its type, default, bounds and help
text. pydantic-settings reads the layers and checks the values; ``load_settings`` remembers
which layer won each key, so ``memviewer config`` can say which weight or endpoint is really
in force, and an error names the key, the layer and what the key accepts.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from memviewer import paths
from memviewer.root_config import ENV_PREFIX, unknown_key_warnings

TRUE_WORDS = ("true", "1", "yes", "on")
FALSE_WORDS = ("false", "0", "no", "off")


# -- value types: the spellings each kind of key accepts, whatever layer it comes from -------------
def _switch(value: Any) -> Any:
    """Only the documented words, 1/0 and real booleans: a typo such as 'flase' is an error."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in TRUE_WORDS + FALSE_WORDS:
        return value.strip().lower() in TRUE_WORDS
    raise ValueError(f"{value!r} is not a boolean (use true/false, yes/no, on/off or 1/0)")


def _number_text(kind: str) -> Callable[[Any], Any]:
    """A before-check: a boolean is not a number (pydantic would read true as 1); text is stripped."""

    def check(value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"cannot read {value!r} as {kind}")
        return value.strip() if isinstance(value, str) else value

    return check


def _non_empty_path(value: str) -> str:
    if not value.strip():
        raise ValueError("an empty path is not allowed (it would mean the current folder)")
    return value


def _path_list(value: Any) -> Any:
    """A TOML array, or one string split on ``os.pathsep`` (the env form); blank items dropped."""
    items = value.split(os.pathsep) if isinstance(value, str) else value
    if isinstance(items, list):
        return [x for x in items if not isinstance(x, str) or x.strip()]
    return items


Switch = Annotated[bool, BeforeValidator(_switch)]
Whole = Annotated[int, BeforeValidator(_number_text("a whole number"))]
Number = Annotated[float, BeforeValidator(_number_text("a number"))]
PathText = Annotated[str, AfterValidator(_non_empty_path)]
# NoDecode: the env form is not JSON but paths joined by the OS path separator.
PathList = Annotated[list[str] | None, NoDecode, BeforeValidator(_path_list)]


def _default_home() -> str:
    return str(paths.default_home())


def _home_socket(data: dict[str, Any]) -> str:
    return str(paths.home_socket(data["home"]))  # the default socket follows the home


# -- the layers one load reads ----------------------------------------------------------------------
class _Environment(EnvSettingsSource):
    """``MEMVIEWER_*`` variables from a given mapping (the process environment, or a test's)."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]) -> None:
        self._given = env
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        fold = (lambda k: k) if self.case_sensitive else str.lower
        return {fold(k): v for k, v in self._given.items() if not (self.env_ignore_empty and v == "")}


class _TomlFile(TomlConfigSettingsSource):
    """The TOML file, read once, with errors that name it (absent is fine unless it was named)."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path, *, required: bool = False) -> None:
        if required and not path.exists():
            raise ValueError(f"config file {path} does not exist")
        if path.is_dir():
            raise ValueError(f"config file {path} is a folder, not a TOML file")
        self.path = path
        super().__init__(settings_cls, toml_file=path)

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        try:
            return tomllib.loads(Path(file_path).read_bytes().decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"cannot read config file {file_path}: not UTF-8 text "
                f"(byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"
            ) from None
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ValueError(f"cannot read config file {file_path}: {exc}") from exc


@dataclass(frozen=True)
class _Layers:
    """What ``load_settings`` hands to ``settings_customise_sources`` for one build."""

    env: _Environment
    file: _TomlFile


_LAYERS: ContextVar[_Layers | None] = ContextVar("memviewer_settings_layers", default=None)


class Settings(BaseSettings):
    """The effective settings: one typed, bounded, documented field per key.

    Built by ``load_settings`` (which also fills ``sources``); ``Settings()`` by hand reads the
    process environment and the default config file with the same precedence.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_ignore_empty=True,  # MEMVIEWER_X= means "not set", as in a shell
        extra="ignore",  # unknown file keys are warnings (load_settings), other MEMVIEWER_* are not keys
        frozen=True,
        allow_inf_nan=False,
    )

    home: PathText = Field(
        default_factory=_default_home, description="data folder (SQLite store, LanceDB index, spool)"
    )
    socket: PathText = Field(default_factory=_home_socket, description="hub Unix socket path")
    model_dir: PathText | None = Field(
        None, description="folder with model.onnx + tokenizer.json (default: packaged MiniLM)"
    )
    embed_threads: Whole = Field(0, ge=0, description="onnxruntime intra-op threads (0 = runtime default)")
    embed_batch: Whole = Field(32, ge=1, description="embedding batch size")
    llm_base_url: str | None = Field(
        None, description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1"
    )
    llm_model: str | None = Field(None, description="model name at the LLM endpoint")
    llm_timeout: Number = Field(5.0, gt=0, description="seconds before an LLM call counts as llm_timeout")
    llm_api_key: SecretStr | None = Field(None, description="bearer token for the LLM endpoint (optional)")
    summary_llm: Switch = Field(False, description="use the LLM endpoint for session summaries")
    contextual_embeddings: Switch = Field(
        False, description="prepend the session summary to each turn before embedding"
    )
    retention: Literal["compact", "keep_all"] = Field("compact", description="default session retention")
    active_window: Whole = Field(100, ge=2, description="active turns kept before compaction")
    frame_limit: Whole = Field(
        1_048_576,
        ge=1024,  # below this no hello frame fits: the hub would listen but answer nobody
        description="largest accepted protocol frame in bytes",
    )
    subscriber_queue: Whole = Field(
        10_000, ge=1, description="events buffered per subscriber before 'lagged'"
    )
    # Relative weights (recall normalises them) and shares of the score.
    w_dense: Number = Field(0.5, ge=0, description="recall blend weight of vector similarity")
    w_keyword: Number = Field(0.5, ge=0, description="recall blend weight of BM25 keyword evidence")
    w_recency: Number = Field(0.0, ge=0, description="recall blend weight of recency")
    w_speaker: Number = Field(
        0.2,
        ge=0,
        le=1,
        description="recall: share of the score for turns by the speaker the query asks about",
    )
    w_time: Number = Field(
        0.1, ge=0, le=1, description="recall: share of the score for closeness to a date the query names"
    )
    ann_threshold: Whole = Field(50_000, ge=0, description="turns in a scope before an IVF_PQ index is built")
    recall_log_max: Whole = Field(
        5000, ge=0, description="searches and recalls kept in the recall log (0 = no logging)"
    )
    recall_log_days: Number = Field(
        30.0, ge=0, description="recall log entries older than this many days go (0 = no age limit)"
    )
    recall_log_mb: Number = Field(
        64.0, ge=0, description="recall log size cap in MiB: the oldest entries go first (0 = no cap)"
    )
    watch_praisonai: PathList = Field(
        None,
        description="PraisonAI session folders the hub follows (env: paths joined by the OS path separator)",
    )
    watch_follow_symlinks: Switch = Field(
        False, description="the PraisonAI watcher reads files whose real path is outside the watched folder"
    )
    watch_max_file_bytes: Whole = Field(
        1 << 30, ge=1024, description="the PraisonAI watcher reports bigger files and does not read them"
    )
    watch_read_timeout: Number = Field(
        30.0, gt=0, description="seconds one PraisonAI file read may take before the watcher skips it"
    )
    otlp: str | None = Field(
        None, description="OTLP/HTTP receiver address HOST:PORT (default off; a bare port is loopback)"
    )
    listen: str | None = Field(None, description="hub TCP listener HOST:PORT (serve; TLS, tokens required)")
    tls_cert: str | None = Field(None, description="the TCP listener's TLS certificate chain (PEM)")
    tls_key: str | None = Field(None, description="the TCP listener's TLS private key (PEM)")
    hub: str | None = Field(
        None, description="a remote hub to read through, tls://HOST:PORT (with token and tls_ca)"
    )
    tls_ca: str | None = Field(
        None, description="CA certificate (PEM) that signed a remote hub's certificate"
    )
    token: SecretStr | None = Field(None, description="bearer token for a remote hub (MEMVIEWER_TOKEN)")
    token_file: str | None = Field(None, description="file holding the bearer token for a remote hub")

    #: key -> "default" | "file:PATH" | "env:NAME" | "flag"
    _sources: dict[str, str] = PrivateAttr(default_factory=dict)
    #: Problems that do not stop loading (an unknown key in the file); the CLI prints them.
    _warnings: list[str] = PrivateAttr(default_factory=list)
    _layers: _Layers | None = PrivateAttr(None)
    _flags: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _shares_fit(self) -> Settings:
        if self.w_speaker + self.w_time > 1.0:
            raise ValueError("w_speaker + w_time must not exceed 1")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The one precedence: flags > ``MEMVIEWER_*`` > the TOML file > defaults (no .env files)."""
        layers = _LAYERS.get()
        if layers is None:  # Settings() by hand: the process environment and the default file
            return init_settings, env_settings, _TomlFile(settings_cls, paths.default_config_file())
        return init_settings, layers.env, layers.file

    @property
    def sources(self) -> dict[str, str]:
        return self._sources

    @property
    def warnings(self) -> list[str]:
        return self._warnings

    @property
    def config_file(self) -> str:
        """The config file this was read from, or looked for (``config_found`` says which)."""
        return str(self._layers.file.path) if self._layers else ""

    @property
    def config_found(self) -> bool:
        return self._layers is not None and self._layers.file.path.exists()

    @property
    def values(self) -> dict[str, Any]:
        """Every key's effective value, in declaration order (secrets still wrapped)."""
        return {name: getattr(self, name) for name in type(self).model_fields}

    def shown(self) -> dict[str, Any]:
        """Every key as ``memviewer config`` prints it: secrets masked (the output ends up in bug reports)."""
        return {name: _masked(value) for name, value in self.values.items()}

    @property
    def home_path(self) -> Path:
        return Path(self.home).expanduser()

    @property
    def socket_path(self) -> Path:
        return Path(self.socket).expanduser()

    def with_overrides(self, **overrides: Any) -> Settings:
        """A copy with ``overrides`` applied as flags (checked like any flag)."""
        unknown = set(overrides) - set(type(self).model_fields)
        if unknown:
            raise KeyError(f"no such setting: {', '.join(sorted(unknown))}")
        flags = {**self._flags, **{k: v for k, v in overrides.items() if v is not None}}
        if self._layers is None:
            return type(self)(**flags)
        return _build(type(self), self._layers, flags)


def _masked(value: Any) -> Any:
    if isinstance(value, SecretStr):
        secret = value.get_secret_value()
        return "****" + (secret[-4:] if len(secret) >= 16 else "") if secret else ""
    return value


# -- what each key accepts, from its declaration (errors and `memviewer config --help`) -------------
def _kind(field: FieldInfo) -> str:
    if any(getattr(m, "func", None) is _non_empty_path for m in field.metadata):
        return "path"
    kind = field.annotation
    if get_origin(kind) in (Union, UnionType):  # ``X | None``: the key is optional, X says what it takes
        kind = next(a for a in get_args(kind) if a is not type(None))
    if get_origin(kind) is Literal:
        return " or ".join(repr(a) for a in get_args(kind))
    if get_origin(kind) is list:
        return "list of paths"
    words = {bool: "true/false", int: "whole number", float: "number", SecretStr: "secret text"}
    return words.get(kind, "text") if isinstance(kind, type) else "text"


def _bounds(field: FieldInfo) -> str:
    """``"at least 1024"``, ``"between 0 and 1"``, ``"greater than 0"`` or ``""``."""
    low: Any = None
    high: Any = None
    low_word = "at least"
    for m in field.metadata:
        if isinstance(m, annotated_types.Ge):
            low = m.ge
        elif isinstance(m, annotated_types.Gt):
            low, low_word = m.gt, "greater than"
        elif isinstance(m, annotated_types.Le):
            high = m.le
    if low is not None and high is not None and low_word == "at least":
        return f"between {low} and {high}"
    parts = ([f"{low_word} {low}"] if low is not None else []) + (
        [f"at most {high}"] if high is not None else []
    )
    return " and ".join(parts)


def accepted(name: str, settings_cls: type[Settings] = Settings) -> str:
    """What key ``name`` accepts, in words: its kind and its bounds."""
    field = settings_cls.model_fields[name]
    return ", ".join(x for x in (_kind(field), _bounds(field)) if x)


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:  # home and socket: resolved when loading
        return (
            "the platform's data folder" if "data folder" in str(field.description) else "the home's socket"
        )
    return "unset" if field.default is None else repr(field.default)


def describe(settings_cls: type[Settings] = Settings) -> list[tuple[str, str, str, str, str]]:
    """``(key, env var, accepted, default, help)`` per key, for ``memviewer config --help``."""
    return [
        (
            name,
            f"{ENV_PREFIX}{name.upper()}",
            accepted(name, settings_cls),
            _default(field),
            field.description or "",
        )
        for name, field in settings_cls.model_fields.items()
    ]


# -- loading -----------------------------------------------------------------------------------------
def _origins(layers: _Layers, flags: dict[str, Any], fields: Mapping[str, FieldInfo]) -> dict[str, str]:
    """Which layer won each key: the first of flag, env, file that sets it, else the default."""
    from_env, from_file = layers.env(), layers.file()
    names = {k.lower(): k for k in layers.env._given}
    out: dict[str, str] = {}
    for name in fields:
        if name in flags:
            out[name] = "flag"
        elif name in from_env:
            var = f"{ENV_PREFIX}{name}".lower()
            out[name] = f"env:{names.get(var, var.upper())}"
        elif name in from_file:
            out[name] = f"file:{layers.file.path}"
        else:
            out[name] = "default"
    return out


def _problem(error: Any, origins: dict[str, str], settings_cls: type[Settings]) -> str | None:
    """One pydantic error in our words: the key, the layer, what was wrong, what is accepted."""
    kind, loc, value = error["type"], error["loc"], error.get("input")
    if kind == "default_factory_not_called":  # the socket default waits on a bad home: said already
        return None
    if not loc:  # a check across keys: name the layers of the keys it names
        cause = str(error.get("ctx", {}).get("error", error["msg"]))
        named = [f"{k}: {v}" for k, v in origins.items() if re.search(rf"\b{k}\b", cause)]
        return f"{cause} ({', '.join(named)})" if named else cause
    name, source = str(loc[0]), origins.get(str(loc[0]), "?")
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "literal_error"):
        bound = _bounds(settings_cls.model_fields[name]) or _kind(settings_cls.model_fields[name])
        shown = value if kind != "literal_error" else repr(value)
        return f"{name} must be {bound}, not {shown} ({source})"
    where = f"item {loc[1]}: " if len(loc) > 1 else ""
    if kind == "value_error":  # our own checks say what they accept
        return f"setting {name!r} ({source}): {where}{error['ctx']['error']}"
    if kind.startswith("int_"):
        why = f"cannot read {value!r} as a whole number"
    elif kind.startswith("float_"):
        why = f"cannot read {value!r} as a number"
    elif kind == "finite_number":
        why = f"{value!r} is not a finite number"
    elif kind == "string_type":
        why = f"{value!r} is not a string"
    else:
        why = f"{value!r}: {error['msg']}"
    return f"setting {name!r} ({source}): {where}{why} (accepted: {accepted(name, settings_cls)})"


def _build(settings_cls: type[Settings], layers: _Layers, flags: dict[str, Any]) -> Settings:
    origins = _origins(layers, flags, settings_cls.model_fields)
    token = _LAYERS.set(layers)
    try:
        settings = settings_cls(**flags)
    except ValidationError as exc:
        problems = [p for e in exc.errors() if (p := _problem(e, origins, settings_cls))]
        raise ValueError("; ".join(problems)) from None
    finally:
        _LAYERS.reset(token)
    settings._sources = origins
    settings._layers = layers
    settings._flags = dict(flags)
    settings._warnings = _unknown_key_warnings(layers.file(), layers.file.path, settings_cls)
    return settings


def _unknown_key_warnings(file_values: dict[str, Any], path: Path, settings_cls: type[Settings]) -> list[str]:
    return unknown_key_warnings(file_values, path, settings_cls.model_fields)


def load_settings(
    config_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    *,
    config_required: bool = False,
    **flags: Any,
) -> Settings:
    """Resolve every key through the four layers and remember the winner.

    ``env``: the environment to read (default ``os.environ``). ``config_required``: the caller
    named ``config_file`` on purpose (``--config``, ``MEMVIEWER_CONFIG``), so a missing file is
    an error instead of "no settings". A folder or an unreadable file is always an error. A
    flag of ``None`` is "not given".
    """
    path = config_file or paths.default_config_file()
    layers = _Layers(
        env=_Environment(Settings, dict(os.environ) if env is None else env),
        file=_TomlFile(Settings, path, required=config_required),
    )
    return _build(Settings, layers, {k: v for k, v in flags.items() if v is not None})
