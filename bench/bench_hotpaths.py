"""Benchmark: the hot paths of two checkouts side by side (did a refactor slow them down?).

Three measures, each run in a child process whose ``PYTHONPATH`` is the checkout under
test, alternating the checkouts run by run so load drifts hit both alike:

* publish: acknowledged turns/s through a real hub process (``--no-index``), one
  ``Publisher`` sending ``--turns`` turns, from the first ``add_turn`` until ``flush()``;
* recall: in-process hierarchical recall p50 over the demo home (real ONNX model, warm);
* first paint: the viewer on a pseudo-terminal (120x36) until the Sessions screen shows
  its first page (the viewer's own paint report), on the same demo home.

The "before" tree is ``git archive REV`` of this repository, so nothing is checked out in
place. Both trees run on this venv (its packages are a superset of what older commits need).

Run: ``python -m bench bench_hotpaths --before 0dee4fa [--runs 5] [--turns 5000]``
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path
from typing import Any

from bench import baseline_tree, harness

ROOT = Path(__file__).resolve().parents[1]
QUERIES = [
    "what did we decide about the deploy",
    "flaky test",
    "database migration",
    "refund",
    "the user's cat",
]

PUBLISH = """
import json, sys, time
from pathlib import Path
from memviewer.client import Publisher
from memviewer.wire.testing import HubProcess
work, n = Path(sys.argv[1]), int(sys.argv[2])
with HubProcess(work / "home", work / "hub.sock", args=("--no-index",)):
    with Publisher(work / "hub.sock", work / "spool") as pub:
        sid = pub.open_session(agent="bench", retention="keep_all")
        eid = pub.start_episode(sid, "bench")
        assert pub.flush(60)
        t0 = time.perf_counter()
        for i in range(n):
            if i and i % 100 == 0:
                pub.finalize_episode(eid)
                eid = pub.start_episode(sid, f"bench {i}")
            text = f"step {i}: reading the CI log for the flaky scheduler test"
            pub.add_turn(eid, "tool", text, metadata={"tool": "x"})
        assert pub.flush(120)
        print(json.dumps({"turns_per_s": n / (time.perf_counter() - t0)}))
"""

RECALL = """
import json, statistics, sys, time
from memviewer.config import load_settings
from memviewer.service import MemoryService
home, queries, repeat = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
settings = load_settings(None, env={}, home=home, socket=home + "/unused.sock")
svc = MemoryService(settings)
try:
    svc.recall(queries[0])  # warm: model, LanceDB tables
    times = []
    for _ in range(repeat):
        for q in queries:
            t0 = time.perf_counter()
            svc.recall(q)
            times.append((time.perf_counter() - t0) * 1000)
finally:
    svc.close()
print(json.dumps({"recall_ms": times}))
"""


def _env(tree: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVIEWER_")}
    return {**env, "PYTHONPATH": str(tree), "MEMVIEWER_CONFIG": os.devnull, **extra}


# Children run in a neutral folder: ``python -c`` puts the working folder first on sys.path,
# which would shadow PYTHONPATH with whatever memviewer/ the caller stands in.
NEUTRAL = Path(tempfile.gettempdir())


def _child(tree: Path, code: str, *args: str, **env: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=_env(tree, **env),
        cwd=NEUTRAL,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"{tree}: child failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _which(tree: Path) -> str:
    code = "import memviewer, json; print(json.dumps({'file': memviewer.__file__}))"
    return str(_child(tree, code)["file"])


def demo_home(tree: Path, work: Path) -> Path:
    home = work / "demo-home"
    sock = work / "demo.sock"
    subprocess.run(
        [sys.executable, "-m", "memviewer.cli", "demo"],
        env=_env(tree, MEMVIEWER_HOME=str(home), MEMVIEWER_SOCKET=str(sock)),
        capture_output=True,
        check=True,
        cwd=NEUTRAL,
    )
    return home


def _drain(fd: int, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            if not os.read(fd, 65536):
                return
        except OSError:
            return


def first_paint(tree: Path, home: Path) -> float:
    sock_dir = Path(tempfile.mkdtemp(prefix="mvh-", dir="/tmp"))
    report = sock_dir / "paint.json"
    env = _env(
        tree,
        MEMVIEWER_HOME=str(home),
        MEMVIEWER_SOCKET=str(sock_dir / "hub.sock"),
        MEMVIEWER_TUI_PAINT_REPORT=str(report),
        TERM="xterm-256color",
    )
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))
    stop = threading.Event()
    threading.Thread(target=_drain, args=(master, stop), daemon=True).start()
    t0 = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memviewer.cli"],
        env=env,
        cwd=NEUTRAL,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    try:
        proc.wait(timeout=90)
    finally:
        stop.set()
        os.close(master)
    paint = float(json.loads(report.read_text())["t_paint"]) - t0
    shutil.rmtree(sock_dir, ignore_errors=True)
    return paint


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--before", default="0dee4fa", help="the git revision to compare against")
    ap.add_argument("--after", type=Path, default=ROOT, help="the checkout under test (default: this one)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--turns", type=int, default=5000)
    ap.add_argument("--recall-repeat", type=int, default=4)
    args = harness.parse(ap, {"before": "HEAD", "runs": 1, "turns": 200, "recall_repeat": 1})
    harness.header("bench_hotpaths")

    work = Path(tempfile.mkdtemp(prefix="mv-hot-", dir="/tmp"))
    before = baseline_tree.extract(args.before, work / "before", paths=())
    trees = {"before": before, "after": args.after.resolve()}
    for name, tree in trees.items():
        loaded = _which(tree)
        assert loaded.startswith(str(tree)), f"{name} imports memviewer from {loaded}, not {tree}"
    homes = {name: demo_home(tree, work / name) for name, tree in trees.items()}
    load_start = harness.load()
    got: dict[str, dict[str, list[float]]] = {n: {"publish": [], "recall": [], "paint": []} for n in trees}
    try:
        for run in range(args.runs):
            order = list(trees) if run % 2 == 0 else list(reversed(trees))
            for name in order:
                tree = trees[name]
                pub_dir = Path(tempfile.mkdtemp(prefix="mvp-", dir="/tmp"))
                try:
                    got[name]["publish"].append(
                        _child(
                            tree, PUBLISH, str(pub_dir), str(args.turns), MEMVIEWER_HOME=str(pub_dir / "home")
                        )["turns_per_s"]
                    )
                finally:
                    shutil.rmtree(pub_dir, ignore_errors=True)
                rec = _child(tree, RECALL, str(homes[name]), json.dumps(QUERIES), str(args.recall_repeat))
                got[name]["recall"].extend(rec["recall_ms"])
                got[name]["paint"].append(first_paint(tree, homes[name]))
            print(f"run {run + 1}/{args.runs} done", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def med(name: str, key: str) -> float:
        return statistics.median(got[name][key])

    report = {
        **harness.machine(),
        "load": {"start": load_start, "end": harness.load()},
        "before": args.before,
        "runs": args.runs,
        "publish_turns_per_s": {n: round(med(n, "publish")) for n in trees},
        "recall_p50_ms": {n: round(med(n, "recall"), 1) for n in trees},
        "first_paint_s": {n: round(med(n, "paint"), 3) for n in trees},
        "ratios_after_over_before": {
            "publish": round(med("after", "publish") / med("before", "publish"), 3),
            "recall_p50": round(med("after", "recall") / med("before", "recall"), 3),
            "first_paint": round(med("after", "paint") / med("before", "paint"), 3),
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
