"""The README's Publisher example, run as written (issue 34 item 8): with a hub it prints
nothing and its session is stored; with no hub it says the commands were not stored yet,
keeps them in the spool, and the next hub stores them."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from memviewer import paths
from memviewer.store.db import Store
from memviewer.wire.testing import HubProcess, hub_env

pytestmark = pytest.mark.integration

# The episode's task is its first turn, then the two turns the example adds.
TURNS = ["fix the flaky test", "Reading the log…", "<log output>"]
README = Path(__file__).resolve().parents[1] / "README.md"


def example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    found = [b for b in blocks if "with Publisher() as pub:" in b]
    assert len(found) == 1, "the README holds one Publisher example"
    return found[0]


def run_example(home: Path, sock: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", example()],
        env=hub_env(home, sock),
        capture_output=True,
        text=True,
        timeout=60,
    )


def stored_turns(home: Path) -> list[str]:
    if not paths.db_path(home).exists():
        return []
    store = Store.open(paths.db_path(home), readonly=True)
    try:
        with store.read() as conn:
            rows = conn.execute(
                text("SELECT content FROM turns WHERE NOT is_compaction_summary ORDER BY idx")
            ).all()
        return [r[0] for r in rows]
    finally:
        store.close()


def test_with_a_hub_the_example_prints_nothing_and_is_stored(tmp_path: Path, short_tmp: Path) -> None:
    home, sock = tmp_path / "home", short_tmp / "hub.sock"
    with HubProcess(home, sock):
        done = run_example(home, sock)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert stored_turns(home) == TURNS


def test_without_a_hub_the_example_says_so_and_the_next_hub_stores_it(
    tmp_path: Path, short_tmp: Path
) -> None:
    home, sock = tmp_path / "home", short_tmp / "hub.sock"
    done = run_example(home, sock)
    assert done.returncode == 0, done.stderr
    assert "not stored yet" in done.stdout and "memviewer serve" in done.stdout
    spool = paths.spool_dir(home)
    assert str(spool) in done.stderr and "replays them" in done.stderr
    assert any(p.stat().st_size > 0 for p in spool.rglob("*") if p.is_file())
    assert stored_turns(home) == []
    with HubProcess(home, sock):
        deadline = time.monotonic() + 30
        while stored_turns(home) != TURNS:
            assert time.monotonic() < deadline, f"the hub did not replay the spool: {stored_turns(home)}"
            time.sleep(0.05)
