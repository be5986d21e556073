"""Default locations, standard library only (the publisher imports this).

Resolution order for the data home: ``MEMVIEWER_HOME``, then the platform's
user data folder. The socket lives in a per-user runtime folder (0700).
"""

from __future__ import annotations

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


def default_socket() -> Path:
    env = os.environ.get("MEMVIEWER_SOCKET")
    if env:
        return Path(env).expanduser()
    return runtime_dir() / "hub.sock"


def db_path(home: Path) -> Path:
    return home / "memviewer.db"


def lance_dir(home: Path) -> Path:
    return home / "lance"


def spool_dir(home: Path) -> Path:
    return home / "spool"


def cache_dir(home: Path) -> Path:
    return home / "cache"
