"""Time and peak RSS of ``memviewer import praisonai --no-index`` on one big file, before/after.

A generated PraisonAI file (``tests/praisonai_big.py``: many short messages, the worst case
of objects per byte) is imported by the CLI of ``--baseline REV`` (default ``main``,
exported with ``git archive`` and run through ``PYTHONPATH``) and by this tree, into fresh
homes, alternating; then this tree imports the same file again (the re-run: nothing new).
Peak RSS is ``ru_maxrss`` of the child (``RUSAGE_CHILDREN`` of a wrapper process that runs
only it).

    python -m bench bench_praisonai_chunked [--mb 200] [--runs 1] [--baseline main]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import baseline_tree, harness

ROOT = harness.ROOT

write_big_session = harness.test_module("praisonai_big").write_big_session

CLI = """
import resource, subprocess, sys, time
t = time.perf_counter()
r = subprocess.run(sys.argv[1:], capture_output=True)
assert r.returncode == 0, r.stderr[-2000:]
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
"""


def run(tree: Path, home: Path, path: Path) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(tree), "MEMVIEWER_CONFIG": os.devnull}
    cmd = [sys.executable, "-m", "memviewer.cli", "--home", str(home), "import", "praisonai", "--no-index"]
    out = subprocess.run(
        [sys.executable, "-c", CLI, *cmd, str(path)], capture_output=True, text=True, env=env, check=True
    )
    secs, rss = out.stdout.split()
    return float(secs), float(rss)


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--baseline", default="main", help="git revision to compare with ('' to skip)")
    args = harness.parse(ap, {"mb": 1, "baseline": ""})
    harness.header("bench_praisonai_chunked")
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        path = tmp / "big.json"
        n = write_big_session(path, args.mb * 1_000_000)
        size = path.stat().st_size / 1e6
        print(
            f"# file {size:.0f} MB, {n} messages",
            flush=True,
        )
        trees: list[tuple[str, Path]] = []
        if args.baseline:
            base = baseline_tree.extract(args.baseline, tmp / "baseline")
            trees.append((f"baseline ({args.baseline})", base))
        trees.append(("this tree", ROOT))
        for i in range(args.runs):
            for label, tree in trees:
                home = tmp / f"home-{i}-{label[:4]}"
                secs, rss = run(tree, home, path)
                print(
                    f"  {label:18} import: {secs:6.1f} s, peak RSS {rss:6.0f} MB ({rss / size:.2f}x), "
                    f"load {harness.load()}",
                    flush=True,
                )
                if tree == ROOT:
                    secs, rss = run(tree, home, path)
                    print(f"  {label:18} re-run: {secs:6.1f} s, peak RSS {rss:6.0f} MB", flush=True)


if __name__ == "__main__":
    main()
