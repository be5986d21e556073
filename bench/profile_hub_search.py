"""Where a keyword ``search`` through the hub spends its time: stamps along one request.

Starts a real hub process running this script (``hub`` mode: the hub with timing
wrappers around its frame handler, the reader-thread call, the keyword search, the
annotation matching, the recall log hand-off, the encoding and the write), sends the
planted phrases of ``bench/search_corpus.py`` one at a time (5 ms apart, so each
request's recall log commit finishes before the next), stamps the client side, and
prints the p50 of each stretch. ``time.perf_counter_ns`` is CLOCK_MONOTONIC, the same
clock in both processes, so the gaps between them (thread and process wake-ups) show.

``--nothing`` sends queries that match nothing instead: the hop's floor, stamped.

``--baseline DIR`` profiles a hub from another source tree instead (``DIR`` holding a
``memviewer`` package) on the copy of the home ``bench_search_hub.py --baseline`` made,
read like this tree's client reads (``--base-client decode``: with ``protocol.decode``, as a
base older than ``decode_answer`` read). Results: ``docs/benchmarks.md``.

    python -m bench profile_hub_search --work /tmp/mvbench-hub [--baseline DIR]
"""

from __future__ import annotations

import argparse
import atexit
import json
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench import harness

ns = time.perf_counter_ns


def hub_main(out_path: str) -> None:
    """The hub process: ``memviewer serve --no-index`` with stamps, dumped at exit."""
    from memviewer import recall_log
    from memviewer import service as service_mod
    from memviewer.recall import keyword
    from memviewer.session import annotations
    from memviewer.wire import connection, protocol
    from memviewer.wire import hub as hub_mod

    recs: list[dict[str, Any]] = []
    cur: dict[str, Any] = {}
    atexit.register(lambda: Path(out_path).write_text(json.dumps(recs)))

    def timed(owner: Any, name: str, key: str) -> None:
        orig = getattr(owner, name)

        def run(*a: Any, **k: Any) -> Any:
            c = cur
            t = ns()
            r = orig(*a, **k)
            c[key] = ns() - t
            return r

        setattr(owner, name, run)

    frame = hub_mod.Hub._frame

    async def on_frame(self: Any, conn: Any, line: bytes) -> None:
        nonlocal cur
        t = ns()
        try:
            rid = json.loads(line).get("id")
        except ValueError:
            rid = None
        cur = {"id": rid, "frame": t}
        recs.append(cur)
        await frame(self, conn, line)

    hub_mod.Hub._frame = on_frame  # type: ignore[method-assign]
    search = hub_mod.Hub._search

    def on_search(self: Any, params: dict[str, Any]) -> Any:
        c = cur
        c["exec0"], c["thread"] = ns(), threading.get_ident()
        r = search(self, params)
        c["exec1"] = ns()
        return r

    hub_mod.Hub._search = on_search  # type: ignore[method-assign]
    timed(keyword.KeywordSearch, "search", "ks")
    timed(annotations, "_matches", "ann")
    timed(service_mod.MemoryService, "record_recall", "rec")
    timed(recall_log, "search_command", "sc")
    try:  # a tree whose hub encodes answers through orjson (wire/fastjson.py)
        from memviewer.wire import fastjson as encoder
    except ImportError:
        encoder = protocol  # type: ignore[assignment]
    response = encoder.response

    def on_response(rid: Any, result: Any) -> bytes:
        c = cur
        c["enc0"] = ns()
        r = response(rid, result)
        c["enc1"] = ns()
        return r

    encoder.response = on_response  # type: ignore[assignment]
    send = connection.Connection.send

    async def on_send(self: Any, data: bytes) -> None:
        c = cur
        c["send0"] = ns()
        await send(self, data)
        c["send1"] = ns()

    connection.Connection.send = on_send  # type: ignore[method-assign]
    try:  # a tree whose reader connections are served by their own thread (wire/threaded.py)
        from memviewer.wire import threaded
    except ImportError:
        threaded = None  # type: ignore[assignment]
    if threaded is not None:
        one = threaded.ThreadedReads._one

        def on_one(self: Any, conn: Any, line: bytes) -> bool:
            nonlocal cur
            t = ns()
            try:
                rid = json.loads(line).get("id")
            except ValueError:
                rid = None
            cur = {"id": rid, "frame": t}
            recs.append(cur)
            return one(self, conn, line)

        threaded.ThreadedReads._one = on_one  # type: ignore[method-assign]
        check = threaded.check_params

        def on_check(method: str, params: Any) -> None:
            cur["check0"] = ns()
            check(method, params)

        threaded.check_params = on_check  # type: ignore[assignment]
        try:  # a tree whose recall log route has a module of its own (wire/hub_records.py)
            from memviewer.wire.hub_records import HubRecords

            holder: Any = HubRecords
            hold_name = "hold"
        except ImportError:
            holder, hold_name = hub_mod.Hub, "_holding"
        holding = getattr(holder, hold_name)

        def on_holding(self: Any, held: Any, fn: Any, params: Any) -> Any:
            cur["hold0"] = ns()
            return holding(self, held, fn, params)

        setattr(holder, hold_name, on_holding)
        service_search = service_mod.MemoryService.search

        def on_service_search(self: Any, *a: Any, **k: Any) -> Any:
            cur["svc0"] = ns()
            r = service_search(self, *a, **k)
            cur["svc1"] = ns()
            return r

        service_mod.MemoryService.search = on_service_search  # type: ignore[method-assign]
        direct = connection.Connection.send_direct

        def on_direct(self: Any, data: bytes) -> bool:
            c = cur
            c["send0"] = ns()
            r = direct(self, data)
            c["send1"] = ns()
            return r

        connection.Connection.send_direct = on_direct  # type: ignore[method-assign]
    sys.argv = ["memviewer", "--log-level", "WARNING", "serve", "--no-index"]
    from memviewer.cli import main

    main()


STRETCHES = [
    ("total (client)", lambda c, h: c["c3"] - c["c0"]),
    ("client send → hub has the frame (loop, or the connection's thread)", lambda c, h: h["frame"] - c["c0"]),
    ("frame → reader thread starts the search", lambda c, h: h["exec0"] - h["frame"]),
    (
        "  of it: frame → params checked (decode, parse)",
        lambda c, h: h.get("check0", h["frame"]) - h["frame"],
    ),
    ("  of it: params checked → run starts (read slot)", lambda c, h: h.get("hold0", 0) - h.get("check0", 0)),
    ("  of it: run starts → search starts", lambda c, h: h["exec0"] - h.get("hold0", h["exec0"])),
    ("reader: KeywordSearch.search", lambda c, h: h.get("ks", 0)),
    ("reader: annotation matching", lambda c, h: h.get("ann", 0)),
    ("recall log entry built (this tree: on the loop, after the answer)", lambda c, h: h.get("sc", 0)),
    ("reader: recall log entry handed over", lambda c, h: h.get("rec", 0)),
    ("reader: whole call", lambda c, h: h["exec1"] - h["exec0"]),
    ("  of it: MemoryService.search", lambda c, h: h.get("svc1", 0) - h.get("svc0", 0)),
    ("  of it: before MemoryService.search", lambda c, h: h.get("svc0", h["exec0"]) - h["exec0"]),
    ("  of it: after MemoryService.search", lambda c, h: h["exec1"] - h.get("svc1", h["exec1"])),
    ("reader done → encoding starts (loop, or the same thread)", lambda c, h: h["enc0"] - h["exec1"]),
    ("JSON encoding", lambda c, h: h["enc1"] - h["enc0"]),
    ("write (+ drain on the loop)", lambda c, h: h["send1"] - h["send0"]),
    ("written → client has the line", lambda c, h: c["c2"] - h["send1"]),
    ("client: decode", lambda c, h: c["c3"] - c["c2"]),
]


def client_main(args: argparse.Namespace) -> None:
    from memviewer.wire import protocol
    from memviewer.wire.probe import hub_hello
    from memviewer.wire.testing import hub_env

    n, work = args.size, args.work
    base = args.baseline is not None
    home = work / (f"home-{n}-base" if base else f"home-{n}")
    sock = work / f"profile-{n}.sock"
    out = work / f"profile-{n}.stamps.json"
    planted = json.loads((work / f"sessions-{n}.planted.json").read_text())
    env = hub_env(home, sock)
    if base:
        env["PYTHONPATH"] = str(args.baseline.resolve())
    proc = subprocess.Popen([sys.executable, __file__, "hub", str(out)], env=env)
    try:
        deadline = time.monotonic() + 60
        while hub_hello(sock, timeout=0.5) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the hub did not start")
            time.sleep(0.05)
        decode = protocol.decode if base and args.base_client == "decode" else protocol.decode_answer
        if not base or args.base_client == "fastjson":  # read through orjson (wire/fastjson.py)
            from memviewer.wire import fastjson

            decode = fastjson.decode_answer
        stamps: list[dict[str, int]] = []
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(sock))
            rf = s.makefile("rb")
            qs = [p["query"] for p in planted]
            if args.nothing:  # the hop's floor: queries that match nothing (a 150-byte answer)
                qs = [f"zzqx{i}nothing" for i in range(len(qs))]
            for i, q in enumerate(qs * args.rounds, 1):
                data = protocol.request(protocol.SEARCH, {"query": q, "limit": 5, "window": 5}, i)
                c0 = ns()
                s.sendall(data)
                line = rf.readline()
                c2 = ns()
                msg = decode(line)
                c3 = ns()
                assert msg["id"] == i
                stamps.append({"id": i, "c0": c0, "c2": c2, "c3": c3, "bytes": len(line)})
                time.sleep(0.005)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    hub = {h["id"]: h for h in json.loads(out.read_text()) if h.get("id") is not None}
    rows = stamps[len(planted) :]  # the first round warms up
    print(
        f"# {'baseline ' + str(args.baseline) if base else 'this tree'}, {n} sessions, {len(rows)} searches, "
        f"answer p50 {statistics.median(r['bytes'] for r in rows):.0f} bytes, load {harness.load()}"
    )
    for name, fn in STRETCHES:
        vals = [fn(c, hub[c["id"]]) for c in rows]
        print(f"| {name} | {statistics.median(vals) / 1e3:.0f} |")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "hub":
        hub_main(sys.argv[2])
        return
    ap = harness.parser(__doc__)
    ap.add_argument("--work", type=Path, default=Path("/tmp/mvbench-hub"))
    ap.add_argument("--size", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--baseline", type=Path)
    ap.add_argument(
        "--base-client",
        choices=("same", "decode", "fastjson"),
        default="same",
        help="read the base's answers with the standard library's decode_answer (same), with "
        "protocol.decode (decode: a base older than decode_answer) or through wire/fastjson.py like "
        "this tree's (fastjson: a base that has it)",
    )
    ap.add_argument("--nothing", action="store_true", help="send queries that match nothing (the floor)")
    args = harness.parse(ap, {"work": harness.search_work, "size": 60, "rounds": 2})
    harness.header("profile_hub_search")
    client_main(args)


if __name__ == "__main__":
    main()
