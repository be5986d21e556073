"""Benchmark: the whole CLI process of ``recall``, ``search`` and ``sessions`` against
``memviewer --version`` (and ``--help``),
with a hub serving the home (warm: the hub answers) and without one (cold: this process
opens the store, loads the model). Interleaved runs, medians, one run of the script.

    python -m bench bench_cli [--runs 7] [--before REV]

``--before REV`` also runs ``git archive REV``'s package (on this venv, ``PYTHONPATH`` pointing
at it) interleaved with the working tree, on the same home and hub: a side-by-side start-up
comparison (e.g. what a new import in the CLI's root costs every command).

A small home (tests/fixtures/praisonai imported with --wait) under a temporary folder.
Results: ``docs/benchmarks.md``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import harness
from memviewer.wire.testing import HubProcess

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "praisonai"


def _run(home: Path, sock: Path, *args: str, tree: Path | None = None) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVIEWER_")}
    env.update({"MEMVIEWER_CONFIG": os.devnull, "MEMVIEWER_SOCKET": str(sock)})
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "memviewer.cli", "--home", str(home), *args],
        capture_output=True,
        env=env,
        cwd=tempfile.gettempdir(),  # neither checkout's folder: PYTHONPATH alone picks the tree
    )
    took = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{args}: {proc.stderr.decode(errors='replace')}")
    return took


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--before", metavar="REV", help="also run this revision's package, interleaved")
    args = harness.parse(ap, {"runs": 1})
    harness.header("bench_cli")
    with tempfile.TemporaryDirectory(prefix="mvcli-", dir="/tmp") as tmp:
        home, nohub, sock = Path(tmp) / "home", Path(tmp) / "none.sock", Path(tmp) / "hub.sock"
        trees: dict[str, Path | None] = {"": Path(__file__).resolve().parents[1]}
        if args.before:
            from bench import baseline_tree

            trees[f" [{args.before}]"] = baseline_tree.extract(args.before, Path(tmp) / "before")
        _run(home, nohub, "import", "praisonai", str(FIXTURES), "--wait")
        cases = {
            "--version": ("--version",),
            "--help": ("--help",),
            "search": ("search", "refund policy", "--json"),
            "sessions": ("sessions", "--json"),
            "recall": ("recall", "what is the refund policy for annual plans?", "--json"),
        }
        times: dict[str, list[float]] = {}
        with HubProcess(home, sock, args=()):
            for cmd in cases.values():
                for tree in trees.values():
                    _run(home, sock, *cmd, tree=tree)  # page cache, the hub's model, bytecode
            for _ in range(args.runs):
                for name, cmd in cases.items():
                    for label, tree in trees.items():
                        times.setdefault(f"{name} (hub){label}", []).append(_run(home, sock, *cmd, tree=tree))
                        if not name.startswith("--"):  # --version/--help never reach a hub
                            times.setdefault(f"{name} (no hub){label}", []).append(
                                _run(home, nohub, *cmd, tree=tree)
                            )
    harness.footer()
    print(f"# {args.runs} interleaved runs")
    base = statistics.median(times["--version (hub)"])
    print("| command | median s | × --version |\n|---|---:|---:|")
    for name, xs in times.items():
        med = statistics.median(xs)
        print(f"| `{name}` | {med:.2f} | {med / base:.2f} |")


if __name__ == "__main__":
    main()
