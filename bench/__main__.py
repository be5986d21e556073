"""``python -m bench NAME [--quick] [args…]``: run one benchmark; ``--list`` lists them;
``--all --quick`` runs every one in quick mode, each in its own process (what CI does), and fails
when one fails. ``MEMVIEWER_BENCH_JOBS`` (2) sets how many run at once, ``MEMVIEWER_BENCH_TIMEOUT``
(180 s) the limit of each."""

from __future__ import annotations

import ast
import os
import runpy
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from bench import harness

BENCH = Path(__file__).resolve().parent
NOT_BENCHMARKS = {"__init__", "__main__", "harness"}
# Modules the benchmarks import, not benchmarks themselves.
HELPERS = {"baseline_tree", "search_corpus", "chat_context_rules"}


def benchmarks() -> dict[str, str]:
    """Every script of ``bench/`` but its helpers, with its docstring's first sentence."""
    out: dict[str, str] = {}
    for path in sorted(BENCH.glob("*.py")):
        if path.stem in NOT_BENCHMARKS:
            continue
        text = path.read_text()
        if path.stem in HELPERS or "harness" not in text:
            continue
        tree = ast.parse(text)
        doc = (ast.get_docstring(tree) or "").strip().split("\n\n")[0]
        first = " ".join(doc.split())
        line = first.split(". ")[0].rstrip(".")
        out[path.stem] = line if len(line) <= 100 else line[:99] + "…"
    return out


def _name(arg: str) -> str:
    return Path(arg).stem


def run_one(name: str, args: list[str]) -> None:
    known = benchmarks()
    if name not in known:
        sys.exit(f"no benchmark {name!r}; python -m bench --list")
    sys.argv = [str(BENCH / f"{name}.py"), *args]
    runpy.run_module(f"bench.{name}", run_name="__main__", alter_sys=True)


def _run_child(name: str, extra: list[str], timeout: float, env: dict[str, str]) -> tuple[int, str, float]:
    """One benchmark in its own process group, so a timeout also ends the hubs it started."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench", name, *extra],
        cwd=BENCH.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        rc, out = -1, f"{out}\ntimed out after {timeout:.0f} s"
    return rc, out, time.perf_counter() - start


def run_all(extra: list[str], timeout: float, jobs: int) -> int:
    """Every benchmark in a child process, ``jobs`` at a time; a failure fails the whole run."""
    failed: list[str] = []
    skipped: list[str] = []
    total = time.perf_counter()
    path = [str(BENCH.parent), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p))
    names = list(benchmarks())
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(_run_child, name, extra, timeout, env): name for name in names}
        for future in as_completed(futures):
            name = futures[future]
            rc, out, took = future.result()
            status = "ok"
            if rc != 0:
                status = "FAILED"
                failed.append(name)
            elif any(line.startswith("# skip ") for line in out.splitlines()):
                status = "skip"
                skipped.append(name)
            print(f"{status:6} {took:6.1f} s  {name}", flush=True)
            if rc != 0 or status == "skip":
                tail = out.strip().splitlines()[-15 if rc else -1 :]
                print("\n".join(f"         {line}" for line in tail), flush=True)
    took = time.perf_counter() - total
    print(
        f"bench: {len(names)} benchmarks in {took:.1f} s ({jobs} at a time), {len(skipped)} skipped, "
        f"{len(failed)} failed{': ' + ', '.join(sorted(failed)) if failed else ''}; load {harness.load()}"
    )
    return 1 if failed else 0


def main() -> None:
    argv = sys.argv[1:]
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return
    if argv[0] == "--list":
        known = benchmarks()
        width = max(map(len, known))
        for name, line in known.items():
            print(f"{name:{width}}  {line}")
        return
    if argv[0] == "--all":
        timeout = float(os.environ.get("MEMVIEWER_BENCH_TIMEOUT", "180"))
        jobs = int(os.environ.get("MEMVIEWER_BENCH_JOBS", "2"))
        sys.exit(run_all(argv[1:], timeout, jobs))
    run_one(_name(argv[0]), argv[1:])


if __name__ == "__main__":
    main()
