"""Peak RSS of a real hub with the indexer on, while publishers stream turns into it.

Each run starts ``memviewer serve`` (the real ONNX model, real LanceDB) on a fresh home,
has ``--publishers`` Publishers (threads of this process) each publish ``--turns`` turns
into its own session (episodes of 10 turns, chat-like texts of 5–300 words, so sequence
lengths vary), waits until the index has caught up, and samples the hub's ``VmRSS``
from ``/proc`` every 0.1 s (``VmHWM`` at the end is the kernel's own peak).

Before/after in one run: ``--baseline REV`` (default ``main``) is exported with
``git archive`` into a temporary folder and the hub of the baseline runs from it
(``PYTHONPATH``); runs alternate baseline, this tree, baseline, … so machine noise hits
both.

``--embedder hash`` runs the same hubs with ``HashEmbedder`` instead of the model (a
``sitecustomize`` shim on the hub's ``PYTHONPATH`` hands it to ``IndexParts``): no model
memory and no embedding time, so what is left is the indexer's own growth (LanceDB,
Python), fast enough for 16,000 turns of both trees. Every run also prints the RSS
curve against the turns indexed (``--curve`` points), to tell a plateau from growth.

    python -m bench bench_indexer_memory [--publishers 8] [--turns 2000] [--runs 1]
        [--embedder model|hash] [--baseline REV]
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench import (
    baseline_tree,
    harness,
)
from memviewer.client import Publisher
from memviewer.wire.testing import HubProcess

ROOT = harness.ROOT

WORDS = (
    "the build deploy cache index query agent memory session turn user assistant tool release "
    "docker image cron job login page api database migration schema test suite flaky timeout "
    "error warning latency throughput benchmark vector search keyword ranking summary archive "
    "yesterday tomorrow monday friday meeting dentist flight hotel lisbon tokyo budget invoice"
).split()


def texts(n: int, seed: int) -> list[str]:
    """Chat-like turns, mostly short, some long answers (varied token counts)."""
    rng = random.Random(seed)
    sizes = [5, 8, 12, 20, 30, 45, 60, 90, 150, 300]
    return [" ".join(rng.choice(WORDS) for _ in range(rng.choice(sizes))) + "." for _ in range(n)]


def status_kb(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def publish(home: Path, sock: Path, n: int, seed: int) -> None:
    items = texts(n, seed)
    with Publisher(sock, home=home, max_batch=200) as pub:
        sid = pub.open_session(agent=f"bench-{seed}", scope="user", scope_id=f"u{seed}")
        for start in range(0, n, 10):
            eid = pub.start_episode(sid, items[start])
            for text in items[start + 1 : start + 10]:
                pub.add_turn(eid, "assistant", text)
            pub.finalize_episode(eid, r_task=1.0)
        assert pub.flush(timeout=1800.0), "publisher did not flush"  # a loaded machine


def caught_up(home: Path) -> tuple[int, int]:
    """(turns in SQLite, turns the index watermark covers)."""
    db = sqlite3.connect(f"file:{home / 'memviewer.db'}?mode=ro", uri=True)
    try:
        total = db.execute("SELECT COALESCE(MAX(num), 0) FROM turns").fetchone()[0]
    finally:
        db.close()
    try:
        state = json.loads((home / "lance" / "state.json").read_text())
    except (OSError, ValueError):
        state = {}
    return int(total), int(state.get("turn_num", 0) or 0)


#: Put on a hub's PYTHONPATH by ``--embedder hash``: the hub's IndexParts use HashEmbedder.
HASH_SHIM = """
from memviewer.index import parts as _parts
from memviewer.index.embedder import HashEmbedder as _Hash

_parts.IndexParts.embedder = property(lambda self: self._embedder or _Hash())
"""


def indexed_num(home: Path) -> int:
    try:
        return int(json.loads((home / "lance" / "state.json").read_text()).get("turn_num", 0) or 0)
    except (OSError, ValueError):
        return 0


def model_of(home: Path) -> str | None:
    """The embedding model the hub's index was built with (state.json)."""
    try:
        return json.loads((home / "lance" / "state.json").read_text()).get("model")
    except (OSError, ValueError):
        return None


def curve(samples: list[tuple[float, int, int]], total: int, points: int) -> list[tuple[int, float]]:
    """(turns indexed, RSS MB) at ``points`` even steps of the turns indexed (the max RSS up to there)."""
    out: list[tuple[int, float]] = []
    peak = 0
    step = 1
    for _t, rss_kb, done in samples:
        peak = max(peak, rss_kb)
        while step <= points and done >= total * step / points:
            out.append((int(total * step / points), round(peak / 1024, 1)))
            step += 1
    return out


def one_run(
    label: str,
    pythonpath: str | None,
    publishers: int,
    turns: int,
    tmp: Path,
    *,
    embedder: str = "model",
    points: int = 8,
    wait_s: float = 3600.0,
) -> dict:
    home, sock = tmp / f"{label}-home", tmp / f"{label}.sock"
    path = [pythonpath] if pythonpath else []
    if embedder == "hash":
        shim = tmp / "hash-shim"
        shim.mkdir(exist_ok=True)
        (shim / "sitecustomize.py").write_text(HASH_SHIM)
        path.insert(0, str(shim))
    env = {"PYTHONPATH": os.pathsep.join(path)} if path else {}
    hub = HubProcess(home, sock, args=(), extra_env=env).start(timeout=60)
    samples: list[tuple[float, int, int]] = []  # (s since start, VmRSS kB, turns indexed)
    stop = threading.Event()

    def sample() -> None:
        n = 0
        while not stop.is_set():
            done = indexed_num(home) if n % 5 == 0 else (samples[-1][2] if samples else 0)
            samples.append((time.monotonic(), status_kb(hub.pid, "VmRSS"), done))
            n += 1
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    try:
        workers = [
            threading.Thread(target=publish, args=(home, sock, turns, seed)) for seed in range(publishers)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        published = time.monotonic() - started
        deadline = time.monotonic() + wait_s
        total = done = 0
        while time.monotonic() < deadline:
            total, done = caught_up(home)
            if total >= publishers * turns and done >= total:
                break
            time.sleep(0.5)
        indexed = time.monotonic() - started
        time.sleep(1.0)  # the pass that saved the watermark finishes its summaries
        hwm = status_kb(hub.pid, "VmHWM")
    finally:
        stop.set()
        sampler.join()
        hub.stop(timeout=60)
    rss = [kb for _t, kb, _d in samples]
    total = max(d for _t, _kb, d in samples)
    return {
        "label": label,
        "embedder": embedder,
        "model": model_of(home),
        "published_s": round(published, 1),
        "indexed_s": round(indexed, 1),
        "caught_up": f"{done}/{total} turns",  # less than all: the wait (--wait) ran out
        "peak_rss_mb": round(max(rss) / 1024, 1),
        "vmhwm_mb": round(hwm / 1024, 1),
        "end_rss_mb": round(rss[-1] / 1024, 1),
        "curve_turns_peak_mb": curve(samples, total, points),
    }


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--publishers", type=int, default=8)
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--baseline", default="main", help="git revision to compare with ('' to skip)")
    ap.add_argument("--embedder", choices=("model", "hash"), default="model")
    ap.add_argument("--curve", type=int, default=8, help="points of the RSS curve per run")
    ap.add_argument("--wait", type=float, default=3600.0, help="seconds to wait for the index")
    args = harness.parse(
        ap, {"publishers": 2, "turns": 50, "baseline": "", "embedder": "hash", "curve": 2, "wait": 120.0}
    )
    harness.header("bench_indexer_memory")
    print(f"# {args.publishers} publishers x {args.turns} turns, embedder {args.embedder}")
    results: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        variants: list[tuple[str, str | None]] = []
        if args.baseline:
            base = baseline_tree.extract(args.baseline, tmp / "baseline")
            variants.append((f"baseline({args.baseline})", str(base)))
        variants.append(("this tree", str(ROOT)))
        for run in range(args.runs):
            for label, path in variants:
                r = one_run(
                    f"{label.split('(')[0].replace(' ', '')}{run}",
                    path,
                    args.publishers,
                    args.turns,
                    tmp,
                    embedder=args.embedder,
                    points=args.curve,
                    wait_s=args.wait,
                )
                r["label"] = label
                results.setdefault(label, []).append(r)
                print(json.dumps(r), f"load {harness.load()}", flush=True)
    for label, rows in results.items():
        print(
            f"{label:18} peak RSS median {statistics.median(r['peak_rss_mb'] for r in rows):7.1f} MB, "
            f"VmHWM median {statistics.median(r['vmhwm_mb'] for r in rows):7.1f} MB, "
            f"indexed in {statistics.median(r['indexed_s'] for r in rows):6.1f} s"
        )


if __name__ == "__main__":
    main()
