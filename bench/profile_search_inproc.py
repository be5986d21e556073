"""Where an in-process keyword search spends its time, and what its recall log entry costs
the writer: this tree against a base tree, interleaved, one worker process per tree.

Each tree runs in a worker process of its own (``PYTHONPATH`` = the tree), which opens the
home read-only and answers the parent's requests on stdin/stdout; the parent sends the
same query list to both, order alternating, so the shared machine's load hits them alike.
Per search it reports the wall time and the thread's CPU time (``time.thread_time_ns``), the
number of SQL statements and the time spent inside them (``KeywordDb.all``, stamped only
with ``--sql``: the stamp costs a little itself); per recall log entry (``--record``, on a
writable copy of the home per tree, made once) the CPU and wall time of the writer's
``apply_batch([record_recall])``, the call the hub's writer thread makes per search.
``--cprofile rare|common`` prints this tree's profile of that query set instead.

    cd /tmp && PYTHONPATH=/path/to/tree python -m bench profile_search_inproc --work DIR --baseline BASE_TREE

``--work`` holds ``home-N`` and ``sessions-N.planted.json`` (``bench_search_hub.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import harness

ns = time.perf_counter_ns
cpu = time.thread_time_ns


def _queries(work: Path, n: int) -> dict[str, list[str]]:
    from bench import search_corpus

    planted = [p["query"] for p in json.loads((work / f"sessions-{n}.planted.json").read_text())]
    common = [q for q in search_corpus.COMMON_QUERIES if q.isascii()]
    return {
        "rare": planted,
        "common": common,
        "cjk": [q for q in search_corpus.COMMON_QUERIES if not q.isascii()],
    }


# -- the worker -------------------------------------------------------------------------
def worker(home: str, rec_home: str) -> None:
    import logging

    logging.disable(logging.WARNING)
    from memviewer.recall.keyword import KeywordSearch
    from memviewer.store import keyword_candidates as kc
    from memviewer.store.db import Store

    store = Store.open(Path(home) / "memviewer.db", readonly=True)
    ks = KeywordSearch(store)
    stamp = {"n": 0, "t": 0}
    orig_all = kc.KeywordDb.all

    def stamped_all(self: Any, sql: str, params: Any = ()) -> list[Any]:
        t = ns()
        r = orig_all(self, sql, params)
        stamp["t"] += ns() - t
        stamp["n"] += 1
        return r

    svc = None
    for line in sys.stdin:
        req = json.loads(line)
        op = req["op"]
        if op == "search":
            kc.KeywordDb.all = stamped_all if req.get("sql") else orig_all  # type: ignore[method-assign]
            out = []
            for q in req["queries"]:
                stamp["n"] = stamp["t"] = 0
                w, c = ns(), cpu()
                ks.search(q, limit=5, window=5)
                c, w = cpu() - c, ns() - w
                out.append([w, c, stamp["t"], stamp["n"]])
            print(json.dumps(out), flush=True)
        elif op == "record":
            from memviewer import recall_log
            from memviewer.recall_log import RecordAs

            if svc is None:
                from memviewer import config
                from memviewer.service import MemoryService

                os.environ["MEMVIEWER_HOME"] = rec_home
                os.environ["MEMVIEWER_CONFIG"] = os.devnull
                svc = MemoryService(config.load_settings())
            params = {"limit": 5, "window": 5}
            out = []
            for q in req["queries"]:
                answer = ks.search(q, limit=5, window=5)
                cmd = recall_log.search_command(q, params, answer, RecordAs("hub"))
                w, c = ns(), cpu()
                (res,) = svc.apply_batch([cmd])
                c, w = cpu() - c, ns() - w
                assert "ok" in res, res
                out.append([w, c, 0, 0])
            print(json.dumps(out), flush=True)
        elif op == "cprofile":
            import cProfile
            import pstats

            pr = cProfile.Profile()
            if req.get("record"):
                from memviewer import recall_log
                from memviewer.recall_log import RecordAs

                assert svc is not None, "send a record request first"
                cmds = [
                    recall_log.search_command(q, {}, ks.search(q, limit=5, window=5), RecordAs("hub"))
                    for q in req["queries"] * req["rounds"]
                ]
                pr.enable()
                for cmd in cmds:
                    svc.apply_batch([cmd])
                pr.disable()
            else:
                pr.enable()
                for _ in range(req["rounds"]):
                    for q in req["queries"]:
                        ks.search(q, limit=5, window=5)
                pr.disable()
            st = pstats.Stats(pr, stream=sys.stderr)
            st.sort_stats(os.environ.get("SORT", "tottime")).print_stats(int(os.environ.get("TOP", "30")))
            print("[]", flush=True)
    ks.close()
    store.close()


# -- the parent -------------------------------------------------------------------------
class Worker:
    def __init__(self, tree: Path, home: Path, rec_home: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(tree))
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "worker", str(home), str(rec_home)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, **req: Any) -> list[list[int]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("a worker died")
        return json.loads(line)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)


def _rec_home(home: Path, tag: str) -> Path:
    """A writable copy of the home for the recall log writes (made once, then reused)."""
    copy = home.with_name(f"{home.name}-rec-{tag}")
    if not (copy / "copied").exists():
        shutil.rmtree(copy, ignore_errors=True)
        copy.mkdir(parents=True)
        src = sqlite3.connect(f"file:{home / 'memviewer.db'}?mode=ro", uri=True)
        dst = sqlite3.connect(copy / "memviewer.db")
        src.backup(dst)
        dst.close()
        src.close()
        (copy / "copied").touch()
    return copy


def _load() -> str:
    return harness.load()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3])
        return
    ap = harness.parser(__doc__)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--size", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--baseline", type=Path, help="a source tree holding the base's memviewer package")
    ap.add_argument("--sql", action="store_true", help="stamp every SQL statement")
    ap.add_argument("--record", action="store_true", help="also time the recall log entry's write")
    ap.add_argument(
        "--cprofile",
        choices=("rare", "common", "record"),
        help="print this tree's profile of the rare or common searches, or of their recall log writes",
    )
    args = harness.parse(ap, {"work": harness.search_work, "size": 60, "rounds": 1})
    harness.header("profile_search_inproc")
    work = args.work.resolve()
    home = work / f"home-{args.size}"
    qs = _queries(work, args.size)
    this = Path(__file__).resolve().parents[1]
    trees = {"this tree": this}
    if args.baseline:
        trees["base"] = args.baseline.resolve()
    workers = {
        k: Worker(t, home, _rec_home(home, "this" if k == "this tree" else "base")) for k, t in trees.items()
    }
    try:
        if args.cprofile:
            w = workers["this tree"]
            record = args.cprofile == "record"
            kind = "rare" if record else args.cprofile
            w.ask(op="record" if record else "search", queries=qs[kind])
            w.ask(op="cprofile", queries=qs[kind], rounds=args.rounds, record=record)
            return
        print(f"# {args.size} sessions")
        for w in workers.values():  # warm up
            for kind in qs:
                w.ask(op="search", queries=qs[kind])
        ops = ["search"] + (["record"] if args.record else [])
        got: dict[tuple[str, str, str], list[list[int]]] = {}
        for rnd in range(args.rounds):
            for kind in ("rare", "common", "cjk"):
                for op in ops:
                    if op == "record" and kind == "cjk":
                        continue
                    order = list(workers.items())
                    if rnd % 2:
                        order.reverse()
                    for name, w in order:
                        got.setdefault((op, kind, name), []).extend(
                            w.ask(op=op, queries=qs[kind], sql=args.sql)
                        )
        print(f"# done, load {_load()}")
        print("| what | tree | n | wall p50 µs | CPU p50 µs | SQL p50 µs | statements |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for (op, kind, name), rows in got.items():
            med = [statistics.median(r[i] for r in rows) / 1e3 for i in range(3)]
            stmts = statistics.median(r[3] for r in rows)
            sql = f"{med[2]:.0f}" if args.sql and op == "search" else "–"
            st = f"{stmts:.0f}" if args.sql and op == "search" else "–"
            print(f"| {op} {kind} | {name} | {len(rows)} | {med[0]:.0f} | {med[1]:.0f} | {sql} | {st} |")
        if "base" in workers:
            print("\n| what | this tree / base, wall | CPU |")
            print("|---|---:|---:|")
            for op in ops:
                for kind in ("rare", "common", "cjk"):
                    a, b = got.get((op, kind, "this tree")), got.get((op, kind, "base"))
                    if not a or not b:
                        continue
                    ra = statistics.median(r[0] for r in a) / statistics.median(r[0] for r in b)
                    rc = statistics.median(r[1] for r in a) / statistics.median(r[1] for r in b)
                    print(f"| {op} {kind} | {ra:.2f} | {rc:.2f} |")
    finally:
        for w in workers.values():
            w.close()


if __name__ == "__main__":
    main()
