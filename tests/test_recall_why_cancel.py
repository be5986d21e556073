"""``recall --why`` in a real terminal: the fix search shows its re-runs, and Ctrl-C (SIGINT)
ends it with exit 130 and one clear line. Real CLI processes, the real ONNX model, the demo."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.model, pytest.mark.integration]

QUERY = "what backoff did we pick for webhooks"
EXE = [str(Path(sys.executable).parent / "memviewer")]  # the installed command, as a user runs it


def _target(home: Path) -> str:
    """The last turn of the session Stage 1 ranks last: its fix search is long."""
    import json

    def cli(*args: str) -> dict:
        done = subprocess.run([*EXE, "--home", str(home), *args], capture_output=True, text=True, check=True)
        return json.loads(done.stdout)

    sessions = cli("recall", QUERY, "--top-sessions", "50", "--json")["diagnostics"]["stage1"]
    export = subprocess.run(
        [*EXE, "--home", str(home), "export", sessions[-1]["session_id"], "--format", "jsonl"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = [json.loads(line) for line in export.stdout.splitlines() if line.strip()]
    return [r["turn_id"] for r in rows if r.get("turn_id")][-1]


def _read_until(fd: int, pattern: str, timeout: float = 120.0) -> str:
    seen = ""
    deadline = time.monotonic() + timeout
    while not re.search(pattern, seen):
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no {pattern!r} in {seen!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk.decode(errors="replace")
    return seen


def test_progress_then_ctrl_c_exits_130(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "MEMVIEWER_SOCKET": str(tmp_path / "no-hub.sock")}
    subprocess.run([*EXE, "--home", str(home), "demo"], env=env, capture_output=True, check=True)
    target = _target(home)
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [*EXE, "--home", str(home), "recall", QUERY, "--why", target],
        stdin=child,
        stdout=child,
        stderr=child,
        env=env,
        close_fds=True,
    )
    os.close(child)
    try:
        seen = _read_until(main, r"why-not: re-run \d+ of at most \d+")
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        seen += _read_until(main, r"cancelled \(Ctrl-C\)[^\n]*re-runs")
        assert proc.wait(timeout=60) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)
    line = re.search(r"recall --why cancelled \(Ctrl-C\) after (\d+) of at most (\d+) re-runs", seen)
    assert line and 1 <= int(line.group(1)) <= int(line.group(2)) <= 60, seen
    assert "Traceback" not in seen and "Aborted" not in seen
