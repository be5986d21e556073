"""The home and the hub socket as ``Settings`` would resolve them, with the standard library.

The CLI's root group needs only these two (and the config file's unknown-key warnings) to
probe which hub serves the home; ``memviewer.config`` imports pydantic-settings (~0.1 s),
which a ``search`` through the hub never needs. Same precedence as ``Settings``: flag >
``MEMVIEWER_*`` (case-insensitive, empty means unset) > the TOML file > the default. Where
the answer is not plain (the file cannot be read, a value is not a non-empty string),
``resolve`` returns None and the caller builds ``Settings``, which words the error.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memviewer import paths
from memviewer.contract.cli_table import SETTING_KEYS

ENV_PREFIX = "MEMVIEWER_"


@dataclass(frozen=True)
class RootConfig:
    """``home`` and ``socket`` with the layer each came from (``Settings.sources``' words)."""

    home: str
    socket: str
    sources: dict[str, str]
    #: The config file's unknown keys, worded as ``Settings.warnings``.
    warnings: list[str] = field(default_factory=list)

    @property
    def home_path(self) -> Path:
        return Path(self.home).expanduser()

    @property
    def socket_path(self) -> Path:
        return Path(self.socket).expanduser()

    def with_socket(self, socket: str) -> RootConfig:
        """A copy with ``socket`` given as a flag (``Settings.with_overrides(socket=...)``)."""
        return replace(self, socket=socket, sources={**self.sources, "socket": "flag"})


def resolve(
    config_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    *,
    config_required: bool = False,
    home: str | None = None,
    socket: str | None = None,
) -> RootConfig | None:
    """``load_settings``' home and socket (same arguments), or None when only ``Settings``
    can say (an error to word, a value to check)."""
    path = config_file or paths.default_config_file()
    file_values = _file_values(path, required=config_required)
    if file_values is None:
        return None
    given = dict(os.environ) if env is None else env
    names = {k.lower(): k for k, v in given.items() if v != ""}
    if f"{ENV_PREFIX}hub".lower() in names or file_values.get("hub"):
        return None  # a remote hub: its token and CA are Settings' to read
    values: dict[str, str] = {}
    sources: dict[str, str] = {}
    for key, flag in (("home", home), ("socket", socket)):
        var = names.get(f"{ENV_PREFIX}{key}".lower())
        if flag is not None:
            value, source = flag, "flag"
        elif var is not None:
            value, source = given[var], f"env:{var}"
        elif key in file_values:
            value, source = file_values[key], f"file:{path}"
        else:
            continue
        if not isinstance(value, str) or not value.strip():
            return None  # Settings refuses it, in its words
        values[key], sources[key] = value, source
    resolved_home = values.get("home") or str(paths.default_home())
    return RootConfig(
        home=resolved_home,
        socket=values.get("socket") or str(paths.home_socket(resolved_home)),
        sources={"home": sources.get("home", "default"), "socket": sources.get("socket", "default")},
        warnings=unknown_key_warnings(file_values, path, SETTING_KEYS),
    )


def _file_values(path: Path, *, required: bool) -> dict[str, Any] | None:
    """The TOML file's table ({} when absent and not required); None on any problem."""
    try:
        if not path.exists():
            return None if required else {}
        if path.is_dir():
            return None
        return tomllib.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


def unknown_key_warnings(file_values: Mapping[str, Any], path: Path, known: Iterable[str]) -> list[str]:
    """One warning per key the file sets that no setting reads, with the closest known key."""
    names = list(known)
    out = []
    for name in sorted(set(file_values) - set(names)):
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        out.append(f"config file {path}: unknown key {name!r} is ignored{hint}")
    return out
