"""What merging the keyword index adds to ``memviewer import praisonai --no-index``: the same
folder imported into fresh homes by this tree (which merges before it returns) and by a base
tree (which does not), alternating, one process per import, cwd outside both trees.

    cd /tmp && PYTHONPATH=/path/to/tree python -m bench bench_import_merge --folder DIR \\
        --baseline BASE_TREE \\
        --work SCRATCH [--rounds 2]

Prints per import the wall time of the whole command, the load, and this tree's
``keyword_index`` report (segments before and after, the merge's seconds).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import harness


def _import(tree: Path, home: Path, sock: Path, folder: Path) -> tuple[float, dict | None]:
    shutil.rmtree(home, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    args = [sys.executable, "-c", "from memviewer.cli import main; main()", "--home", str(home)]
    args += ["--socket", str(sock), "import", "praisonai", "--no-index", "--json", str(folder)]
    t = time.perf_counter()
    out = subprocess.run(args, env=env, capture_output=True, text=True, check=True, cwd="/tmp")
    wall = time.perf_counter() - t
    return wall, json.loads(out.stdout).get("keyword_index")


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--folder", type=Path, required=True)
    ap.add_argument("--baseline", type=Path, required=True, help="a source tree without the merge")
    ap.add_argument("--work", type=Path, required=True, help="scratch folder for the homes")
    ap.add_argument("--rounds", type=int, default=2)
    args = harness.parse(ap, needs="a PraisonAI folder and a base tree")
    harness.header("bench_import_merge")
    this = Path(__file__).resolve().parents[1]
    args.work.mkdir(parents=True, exist_ok=True)
    sock_dir = args.work / "sock"
    sock_dir.mkdir(mode=0o700, exist_ok=True)
    walls: dict[str, list[float]] = {"this tree": [], "base": []}
    print(f"# {args.folder}")
    for rnd in range(args.rounds):
        order = [("this tree", this), ("base", args.baseline.resolve())]
        for name, tree in order if rnd % 2 == 0 else order[::-1]:
            load = harness.load()
            wall, merged = _import(
                tree, args.work / f"home-{name.split()[0]}", sock_dir / "hub.sock", args.folder
            )
            walls[name].append(wall)
            print(f"| {rnd + 1} | {name} | {wall:.2f} s | load {load} | {merged} |", flush=True)
    for name, ws in walls.items():
        print(f"# {name}: median {statistics.median(ws):.2f} s over {len(ws)}")


if __name__ == "__main__":
    main()
