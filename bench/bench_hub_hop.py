"""The hub's hop alone: this tree's hub against a base tree's hub, same home, one loop.

Two real hub processes (this tree on ``home-N``, the base on the copy ``home-N-base`` that
``bench_search_hub.py --baseline`` made), one client connection each (``hello``, then
searches), per query and order alternating: a planted rare phrase (``record: false``), a
query that matches nothing (the hop with no search and a tiny answer) and the rare phrase
again with its recall log entry written (``record`` absent, as a CLI search). 2 ms between
requests. p50 ms per engine and the ratio this tree / base.

``--common`` adds the common-word queries of ``bench/search_corpus.py`` (logged, as a CLI
search), each sent with every planted phrase's turn: "common words, logged".

``--after`` adds two kinds that show what the recall log write costs the *next* search:
a planted phrase (``record: false``) sent at once after another search of the same hub
was answered, that search logged ("after a logged search": its recall log entry is being
written by the hub's writer thread meanwhile) or not ("after an unlogged search").

    cd /tmp && python -m bench bench_hub_hop --work DIR --baseline BASE_TREE

Run from outside this tree (the script changes to ``--work`` itself): a hub runs
``python -c``, whose first import path is the working directory.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

from bench import harness
from memviewer.wire import protocol
from memviewer.wire.syncclient import RpcConnection
from memviewer.wire.testing import HubProcess

try:  # this tree's CLI reads answers through orjson (wire/fastjson.py); the base's did not
    from memviewer.wire.fastjson import decode_answer as _decode_answer
except ImportError:  # pragma: no cover - an older tree
    _decode_answer = protocol.decode_answer


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--baseline", type=Path, required=True)
    ap.add_argument("--size", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--after", action="store_true", help="also time searches sent right after another")
    ap.add_argument("--common", action="store_true", help="also time the common-word queries (logged)")
    ap.add_argument(
        "--base-fastjson",
        action="store_true",
        help="read the base hub's answers through this tree's wire/fastjson.py too (a base that has it)",
    )
    args = harness.parse(
        ap, {"work": harness.search_work, "baseline": harness.head_tree, "size": 60, "rounds": 1}
    )
    harness.header("bench_hub_hop")
    work, base_tree = args.work.resolve(), args.baseline.resolve()
    os.chdir(work)
    planted = [p["query"] for p in json.loads((work / f"sessions-{args.size}.planted.json").read_text())]
    hubs = {
        "this tree": HubProcess(work / f"home-{args.size}", work / "hop-this.sock").start(),
        "base": HubProcess(
            work / f"home-{args.size}-base", work / "hop-base.sock", extra_env={"PYTHONPATH": str(base_tree)}
        ).start(),
    }
    load0 = harness.load()
    try:
        conns = {
            k: RpcConnection(
                h.socket_path,
                decode=_decode_answer if k == "this tree" or args.base_fastjson else protocol.decode_answer,
            )
            for k, h in hubs.items()
        }
        for c in conns.values():
            c.call(protocol.HELLO, {"protocol": protocol.PROTOCOL_VERSION, "role": "reader"})
        times: dict[tuple[str, str], list[float]] = {}
        kinds: tuple[str, ...] = ("rare phrase", "matches nothing", "rare phrase, logged")
        if args.after:
            kinds += ("after a logged search", "after an unlogged search")
        common: list[str] = []
        if args.common:
            from bench import search_corpus

            common = [q for q in search_corpus.COMMON_QUERIES if q.isascii()]
            kinds += ("common words, logged",)
        for rnd in range(args.rounds):
            for i, q in enumerate(planted):
                for kind in kinds:
                    params: dict[str, object] = {"query": q, "limit": 5, "window": 5}
                    if kind == "matches nothing":
                        params["query"] = f"zzqx{i}nothing"
                    if kind == "common words, logged":
                        params["query"] = common[i % len(common)]
                    elif kind != "rare phrase, logged":
                        params["record"] = False
                    order = list(conns.items())
                    if (rnd + i) % 2:
                        order.reverse()
                    for name, conn in order:
                        if kind.startswith("after"):
                            before = {"query": planted[i - 1], "limit": 5, "window": 5}
                            if kind == "after an unlogged search":
                                before["record"] = False
                            conn.call(protocol.SEARCH, before)
                        t = time.perf_counter()
                        conn.call(protocol.SEARCH, params)
                        times.setdefault((kind, name), []).append((time.perf_counter() - t) * 1000)
                        time.sleep(0.002)
        threaded = conns["this tree"].call(protocol.STATS, {})["hub"].get("connections_threaded")
        for c in conns.values():
            c.close()
    finally:
        for h in hubs.values():
            h.stop()
    print(f"# load {load0} -> {harness.load()}, connections served by a thread: {threaded}")
    print("| queries | this tree p50 ms | base p50 ms | this tree / base | n |")
    print("|---|---:|---:|---:|---:|")
    for kind in kinds:
        mine, base = times[(kind, "this tree")], times[(kind, "base")]
        a, b = statistics.median(mine), statistics.median(base)
        print(f"| {kind} | {a:.3f} | {b:.3f} | {a / b:.2f} | {len(mine)} |")


if __name__ == "__main__":
    main()
