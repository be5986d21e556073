"""Recall latency of two revisions, interleaved query by query (issue 16 item 4).

    python -m bench ab_recall --before 4f76bc4 [--sizes 10000,100000] [--queries 30] [--rounds 5]

``bench_recall.py`` measures one tree at a time, so on a shared machine a load change between
the two runs reads as a code change. Here each revision (``--before`` from ``git archive``,
``after`` = the working tree) runs in its own long-lived child process that builds its own home
with *its own* ``bench_recall.build`` (same synthetic turns, same random vectors), then answers
one recall per request line. The parent sends every query to both, alternating which goes
first, so both see the same load at the same moment. Latency is the recall's own
``timings_ms.total`` (query embedding excluded, as in ``bench_recall.py``); the table gives p50 /
p99 per revision and the ratio of the p50s, exact vector search and IVF_PQ, both modes.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import baseline_tree, harness

ROOT = Path(__file__).resolve().parents[1]

WORKER = r"""
import json, sys, tempfile, importlib.util
spec = importlib.util.spec_from_file_location("bench_recall", sys.argv[1])
br = importlib.util.module_from_spec(spec); spec.loader.exec_module(br)
n, nq = int(sys.argv[2]), int(sys.argv[3])
home = tempfile.mkdtemp(prefix="mv-ab-recall-")
svc, info = br.build(home, n)
qs = br.queries(nq)
lance = svc.parts.lance if hasattr(svc, "parts") else br.lance_index_for(svc)  # older trees
ann = lance.has_vector_index()
print(json.dumps({"ready": True, "ann": ann, **info}), flush=True)
for line in sys.stdin:
    mode, use_ann, i = line.split()
    svc.settings = svc.settings.with_overrides(ann_threshold=0 if use_ann == "1" else 10**12)
    if hasattr(svc, "parts"):  # recall reads the index parts' settings (older trees: the service's)
        svc.parts.settings = svc.settings
    out = svc.recall(qs[int(i)], scope="user", scope_id="bench", mode=mode)
    ids = [r["turn_id"] for r in out["results"]]
    path = out["diagnostics"]["index"]["vector_search"]
    print(json.dumps({"ms": out["diagnostics"]["timings_ms"]["total"], "ids": ids, "path": path}), flush=True)
svc.close()
import shutil; shutil.rmtree(home, ignore_errors=True)
"""


class Worker:
    def __init__(self, tree: Path, n: int, nq: int) -> None:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.log = tempfile.NamedTemporaryFile("w+", prefix="mv-ab-worker-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tree / "bench" / "bench_recall.py"), str(n), str(nq)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            cwd=tempfile.gettempdir(),
            env=env,
        )
        self.info = self._read()

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.log.seek(0)
            raise SystemExit(f"worker exited with {self.proc.wait()}:\n{self.log.read()[-2000:]}")
        return json.loads(line)

    def ask(self, mode: str, ann: bool, i: int) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{mode} {int(ann)} {i}\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--before", help="git revision to compare the working tree with")
    ap.add_argument("--before-tree", help="or a folder holding memviewer/ and bench/ (e.g. a patched copy)")
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=5)
    args = harness.parse(ap, {"before": "HEAD", "sizes": "300", "queries": 3, "rounds": 1})
    harness.header("ab_recall")
    with tempfile.TemporaryDirectory(prefix="mv-ab-trees-") as tmp:
        if args.before_tree:
            before = Path(args.before_tree).resolve()
        elif args.before:
            before = baseline_tree.extract(args.before, Path(tmp) / "before", paths=("memviewer", "bench"))
        else:
            raise SystemExit("give --before REV or --before-tree DIR")
        trees = {"before": before, "after": ROOT}
        print(f"# before = {args.before_tree or args.before}, after = working tree")
        print(
            "| turns | mode | search | before p50 / p99 ms | after p50 / p99 ms "
            "| after / before p50 | same top 10 |"
        )
        print("|---:|---|---|---:|---:|---:|---:|")
        for n in (int(x) for x in args.sizes.split(",")):
            workers = {name: Worker(tree, n, args.queries) for name, tree in trees.items()}
            cells = [(m, False) for m in ("hierarchical", "flat")]
            if all(w.info["ann"] for w in workers.values()):
                cells += [(m, True) for m in ("hierarchical", "flat")]
            for mode, ann in cells:
                times: dict[str, list[float]] = {k: [] for k in workers}
                same = 0
                for i in range(min(5, args.queries)):  # warm both
                    for w in workers.values():
                        w.ask(mode, ann, i)
                for r in range(args.rounds):
                    for i in range(args.queries):
                        order = list(workers) if (r + i) % 2 == 0 else list(reversed(workers))
                        got = {name: workers[name].ask(mode, ann, i) for name in order}
                        for name, out in got.items():
                            want = "ivf_pq" if ann else "exact"
                            if out["path"] != want:
                                raise SystemExit(f"{name}: asked for {want}, recall ran {out['path']}")
                            times[name].append(out["ms"])
                        same += got["before"]["ids"] == got["after"]["ids"]
                b, a = times["before"], times["after"]
                ratio = statistics.median(a) / statistics.median(b)
                print(
                    f"| {n:,} | {mode} | {'IVF_PQ' if ann else 'exact'} | "
                    f"{statistics.median(b):.1f} / {harness.pct(b, 99):.1f} | "
                    f"{statistics.median(a):.1f} / {harness.pct(a, 99):.1f} | "
                    f"{ratio:.2f} | {same}/{len(a)} |",
                    flush=True,
                )
            for w in workers.values():
                w.close()
        harness.footer()


if __name__ == "__main__":
    main()
