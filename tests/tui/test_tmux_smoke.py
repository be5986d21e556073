"""A smoke run of the README's first command in a real terminal (tmux, 80x24).

The install part (``python3 -m venv .venv && .venv/bin/pip install -e .``) is this test
run's own venv, linked in as ``.venv`` of a scratch folder (installing again would take
minutes); what follows it runs verbatim from the README: ``.venv/bin/memviewer demo &&
.venv/bin/memviewer``. The viewer must paint the demo sessions at 80x24 and quit on ``q``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.model]

ROOT = Path(__file__).resolve().parents[2]
INSTALL = "python3 -m venv .venv && .venv/bin/pip install -e . && "


def _readme_command() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.search(r"```bash\n(.+?)\n```", text, re.S)
    assert first, "the README opens with a bash block"
    line = first.group(1).strip()
    assert "\n" not in line and line.startswith(INSTALL), line  # one line, install first
    return line[len(INSTALL) :]


def _pane(session: str) -> str:
    return subprocess.run(
        ["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True, check=False
    ).stdout


def _wait(session: str, predicate, timeout: float, what: str) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = _pane(session)
        if predicate(text):
            return text
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; the pane shows:\n{_pane(session)}")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (CI installs it in .ci/run)")
def test_readme_first_command_in_tmux_at_80x24(tmp_path: Path, short_tmp: Path) -> None:
    rest = _readme_command()
    work = tmp_path / "checkout"
    work.mkdir()
    (work / ".venv").symlink_to(Path(sys.prefix))
    done = tmp_path / "exit-code"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "TERM": "xterm-256color",
        "MEMVIEWER_HOME": str(tmp_path / "home"),
        "MEMVIEWER_SOCKET": str(short_tmp / "smoke.sock"),
    }
    exports = " ".join(f"{k}={v!r}" for k, v in env.items())
    script = f"cd {str(work)!r} && env -i {exports} sh -c {rest!r}; echo $? > {str(done)!r}"
    session = f"mv-smoke-{os.getpid()}"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24", script], check=True, env=env
    )
    try:
        screen = _wait(
            session, lambda t: "Sessions 1–" in t or "Traceback" in t, 180, "the viewer on the demo data"
        )
        assert "Traceback" not in screen, screen
        assert re.search(r"Sessions 1–\d+ of \d+", screen)
        assert all(col in screen for col in ("Ep", "Act", "Arch", "Status")), screen
        assert "hosting hub on" in screen  # no hub ran: the viewer hosts one
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
        deadline = time.monotonic() + 30
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert done.exists() and done.read_text().strip() == "0", _pane(session)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False, capture_output=True)
