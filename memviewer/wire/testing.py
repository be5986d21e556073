"""Run a real ``memviewer serve`` process (tests and benchmarks).

The hub runs in a fresh interpreter started with ``subprocess`` (never
``fork``), against its own home and socket, so tests can kill -9 it, restart
it and look at its RSS like any user would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from memviewer.wire.probe import hub_hello

SERVE = "from memviewer.cli import main; main()"


def hub_env(home: Path, socket_path: Path | None, **settings: Any) -> dict[str, str]:
    """The environment for a memviewer process on ``home``/``socket_path`` (no user config).

    With ``socket_path=None`` the default socket applies (``XDG_RUNTIME_DIR`` …).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVIEWER_")}
    env.update(
        {
            "MEMVIEWER_HOME": str(home),
            "MEMVIEWER_CONFIG": os.devnull,  # a named config file must exist: an empty one
        }
    )
    if socket_path is not None:
        env["MEMVIEWER_SOCKET"] = str(socket_path)
    for key, value in settings.items():
        env[f"MEMVIEWER_{key.upper()}"] = str(value)
    return env


class HubProcess:
    def __init__(
        self,
        home: Path,
        socket_path: Path,
        *,
        args: tuple[str, ...] = ("--no-index",),
        log_level: str = "INFO",
        extra_env: dict[str, str] | None = None,
        export_socket: bool = True,
        **settings: Any,
    ) -> None:
        self.home = Path(home)
        self.socket_path = Path(socket_path)
        self.args = args
        self.log_level = log_level
        self.env = hub_env(self.home, self.socket_path if export_socket else None, **settings)
        self.env.update(extra_env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.home.parent / f"hub-{self.socket_path.name}.log"
        self.starts = 0

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def spawn(self) -> subprocess.Popen[bytes]:
        """Start the process without waiting for it to answer."""
        self.home.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVE, "--log-level", self.log_level, "serve", *self.args],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        self.starts += 1
        return self.proc

    def start(self, timeout: float = 20.0) -> HubProcess:
        """Start and wait until the hub answers ``hello`` on its socket."""
        proc = self.spawn()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"hub exited with {proc.returncode}:\n{self.log()}")
            hello = hub_hello(self.socket_path, timeout=0.5)
            if hello is not None and hello.get("pid") == proc.pid:
                return self
            time.sleep(0.03)
        self.kill()
        raise TimeoutError(f"hub did not answer within {timeout}s:\n{self.log()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        """Send ``sig`` and wait for the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """kill -9: no shutdown code runs."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def rss_bytes(self) -> int:
        """Resident set size of the hub process (Linux /proc)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def __enter__(self) -> HubProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.stop(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
