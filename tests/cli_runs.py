"""Running the CLI from tests: in-process (click's ``CliRunner``) or as a real process.

One place for what every CLI test needs: the home and socket on the command line, no user
config, no ``MEMVIEWER_*`` variables from the surrounding shell.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from memviewer.cli import cli


def invoke(
    home: Path | None,
    *args: str,
    socket: Path | None = None,
    env: dict[str, str] | None = None,
    catch_exceptions: bool = True,
) -> Result:
    """``memviewer [--home H] [--socket S] ARGS`` in this process."""
    base = ["--home", str(home)] if home is not None else []
    if socket is not None:
        base += ["--socket", str(socket)]
    return CliRunner().invoke(cli, [*base, *args], env=env, catch_exceptions=catch_exceptions)


def invoke_on(settings: Any, *args: str, catch_exceptions: bool = True) -> Result:
    """``invoke`` on a ``Settings``' home and socket (the ``settings`` fixture's)."""
    return invoke(settings.home_path, *args, socket=settings.socket_path, catch_exceptions=catch_exceptions)


def run_cli(
    home: Path, *args: str, socket: Path | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """``python -m memviewer.cli --home H ARGS`` as a real process (a fresh interpreter)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVIEWER_")}
    env["MEMVIEWER_CONFIG"] = os.devnull  # a named config file must exist: an empty one
    if socket is not None:
        env["MEMVIEWER_SOCKET"] = str(socket)
    return subprocess.run(
        [sys.executable, "-m", "memviewer.cli", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
