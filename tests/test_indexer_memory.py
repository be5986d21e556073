"""A hub indexing with the real model keeps a modest memory once it has caught up.

onnxruntime's CPU arena kept the largest buffers any batch shape needed (texts of varied
lengths give every batch its own shape): a hub with the indexer on reached 1.2-2 GB. The
embedder now runs without the arena and with at most ``ATTENTION_BUDGET`` (rows x width^2) per run.
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
from pathlib import Path

import pytest

from memviewer.client import Publisher
from memviewer.wire.testing import HubProcess

TURNS = 260
#: VmRSS of the hub once it has caught up (what a long-lived hub keeps). With the arena,
#: one catch-up over these texts kept 1,696 MB (the largest buffers of every batch shape);
#: without it 534 MB (peak 685 MB), loaded machine (docs/benchmarks.md, "Indexer memory").
RSS_BOUND_MB = 900

WORDS = "deploy cache index query agent memory session turn release docker cron login api schema".split()


def _texts(n: int) -> list[str]:
    rng = random.Random(5)
    sizes = [5, 20, 60, 150, 300, 400]  # 300+ words: the 256-token maximum, the largest batches
    return [" ".join(rng.choice(WORDS) for _ in range(rng.choice(sizes))) for _ in range(n)]


def _status_kb(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {key} for {pid}")


def _indexed(home: Path) -> int:
    try:
        return int(json.loads((home / "lance" / "state.json").read_text()).get("turn_num", 0))
    except (OSError, ValueError):
        return 0


def _max_num(home: Path) -> int:
    db = sqlite3.connect(f"file:{home / 'memviewer.db'}?mode=ro", uri=True, timeout=10)
    try:
        return int(db.execute("SELECT COALESCE(MAX(num), 0) FROM turns").fetchone()[0])
    finally:
        db.close()


@pytest.mark.integration
@pytest.mark.model
@pytest.mark.timeout(900)
def test_a_hub_catching_up_on_varied_texts_keeps_a_modest_rss(tmp_path: Path) -> None:
    home, sock = tmp_path / "home", tmp_path / "hub.sock"
    texts = _texts(TURNS)
    with HubProcess(home, sock), Publisher(sock, home=home) as pub:  # --no-index: a backlog
        sid = pub.open_session(agent="mem", scope="user", scope_id="u1")
        for start in range(0, TURNS, 10):
            eid = pub.start_episode(sid, texts[start])
            for text in texts[start + 1 : start + 10]:
                pub.add_turn(eid, "assistant", text)
            pub.finalize_episode(eid, r_task=1.0)
        assert pub.flush(timeout=60)
    total = _max_num(home)
    assert total >= TURNS
    with HubProcess(home, sock, args=()) as hub:  # the indexer catches up in one pass
        deadline = time.monotonic() + 600
        while _indexed(home) < total and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _indexed(home) >= total, "the indexer did not catch up"
        rss_mb = _status_kb(hub.pid, "VmRSS") / 1024
        hwm_mb = _status_kb(hub.pid, "VmHWM") / 1024
    assert rss_mb < RSS_BOUND_MB, f"hub RSS {rss_mb:.0f} MB after catching up (peak {hwm_mb:.0f} MB)"
