"""Default locations, standard library only (the publisher imports this).

Resolution order for the data home: ``MEMVIEWER_HOME``, then the platform's
user data folder. The default socket follows the home: one home, one hub. It lives in
a per-user runtime folder (0700), in a subfolder named by a short hash of the home's
resolved path, so two homes never share a default hub.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path


def default_home() -> Path:
    env = os.environ.get("MEMVIEWER_HOME")
    if env:
        return Path(env).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "memviewer"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "memviewer"


def default_config_file() -> Path:
    env = os.environ.get("MEMVIEWER_CONFIG")
    if env:
        return Path(env).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "memviewer" / "config.toml"
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "memviewer" / "config.toml"


def runtime_dir() -> Path:
    """A per-user folder for the socket; created 0700 by whoever binds."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg):
        return Path(xdg) / "memviewer"
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"memviewer-{uid}"


def home_key(home: str | Path) -> str:
    """A short, stable name for a home: the first 12 hex digits of the SHA-256 of its resolved path."""
    resolved = str(Path(home).expanduser().resolve(strict=False))
    return hashlib.sha256(os.fsencode(resolved)).hexdigest()[:12]


def home_socket(home: str | Path) -> Path:
    """The default socket of the hub serving ``home``: ``runtime_dir()/<home_key>/hub.sock``."""
    return runtime_dir() / home_key(home) / "hub.sock"


def default_socket(home: str | Path | None = None) -> Path:
    """``MEMVIEWER_SOCKET``, else the socket that follows ``home`` (default: ``default_home()``)."""
    env = os.environ.get("MEMVIEWER_SOCKET")
    if env:
        return Path(env).expanduser()
    return home_socket(home if home is not None else default_home())


def db_path(home: Path) -> Path:
    return home / "memviewer.db"


def lance_dir(home: Path) -> Path:
    return home / "lance"


def spool_dir(home: Path) -> Path:
    return home / "spool"


def cache_dir(home: Path) -> Path:
    return home / "cache"
