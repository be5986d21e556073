"""In-process common-word search, interleaved per query: a base tree, this tree, and this tree
with its kept per-word match counts bypassed (``kc.MatchCounts``: every count fetched, as on
the first search after a write to the index). One worker process each; the parent sends the
same query to all three in turn, order alternating, and prints wall and thread-CPU medians.

    cd /tmp && PYTHONPATH=/path/to/tree python -m bench ab_common_counts --home HOME \
        --baseline BASE_TREE [--rounds 80]
"""

import json
import statistics
import subprocess
import sys
from pathlib import Path

from bench import harness, search_corpus

W = r"""
import sys, time, json, logging
sys.path.insert(0, sys.argv[1])
logging.disable(logging.WARNING)
from memviewer.recall.keyword import KeywordSearch
from memviewer.store import keyword_candidates as kc
from memviewer.store.db import Store
if sys.argv[2] == "cold":
    kc.MatchCounts.get = lambda self, db, lits, cap: kc.unit_match_counts(db, lits, cap)
store = Store.open(sys.argv[3], readonly=True)
ks = KeywordSearch(store)
for line in sys.stdin:
    q = json.loads(line)
    t = time.thread_time_ns(); w = time.perf_counter_ns(); ks.search(q, limit=5, window=5)
    print(json.dumps([(time.perf_counter_ns()-w)/1e6, (time.thread_time_ns()-t)/1e6]), flush=True)
"""
ap = harness.parser(__doc__)
ap.add_argument("--home", type=Path, required=True)
ap.add_argument("--baseline", type=Path, required=True)
ap.add_argument("--rounds", type=int, default=80)
args = harness.parse(
    ap, {"home": lambda: harness.search_home()[0], "baseline": harness.head_tree, "rounds": 2}
)
harness.header("ab_common_counts")
HERE = Path(__file__).resolve().parent

qs = search_corpus.COMMON_QUERIES[:6]
this = str(HERE.parent)
cfg = {
    "base": (str(args.baseline.resolve()), "warm"),
    "this": (this, "warm"),
    "this, counts not kept": (this, "cold"),
}
db = str(args.home / "memviewer.db")
procs = {
    k: subprocess.Popen(
        [sys.executable, "-c", W, t, m, db],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd="/tmp",
    )
    for k, (t, m) in cfg.items()
}


def ask(p, q):
    p.stdin.write(json.dumps(q) + "\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


for p in procs.values():
    for q in qs:
        ask(p, q)
res = {k: [] for k in procs}
order = list(procs)
for r in range(args.rounds):
    for q in qs:
        for k in order if r % 2 else order[::-1]:
            res[k].append(ask(procs[k], q))
harness.footer()
b = statistics.median(x[0] for x in res["base"])
bc = statistics.median(x[1] for x in res["base"])
print("| engine | n | wall p50 ms | CPU p50 ms | wall / base | CPU / base |")
print("|---|---:|---:|---:|---:|---:|")
for k, v in res.items():
    w = statistics.median(x[0] for x in v)
    c = statistics.median(x[1] for x in v)
    print(f"| {k} | {len(v)} | {w:.2f} | {c:.2f} | {w / b:.2f} | {c / bc:.2f} |")
