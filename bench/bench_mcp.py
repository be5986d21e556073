"""Benchmark: MCP tool calls against the same calls through the hub RPC, and what the
recall log costs.

One run on the demo home (``memviewer demo``, indexed with the real model), a real hub
(``memviewer serve``) and a real ``memviewer mcp`` subprocess spoken to by the official
``mcp`` SDK client over stdio. The MCP server reads through that hub, so the difference
between the two columns is what MCP adds: its JSON-RPC framing over pipes, the SDK's
validation of arguments and structured output, one more process hop.

1. ``session_search`` and ``recall`` latency p50/p99: MCP vs hub RPC, interleaved call by
   call (the machine is shared and noisy, so the two are measured side by side).
2. The recall log's cost on recall p50, logging on vs off, interleaved: through the hub
   (RPC ``record`` default vs ``record: false``; the hub queues the entry for its writer
   and answers without waiting) and in process without a hub (``MemoryService`` with and
   without ``record=``; the entry is committed, fsync included, before recall returns).

Run: ``python -m bench bench_mcp [--search-n 200] [--recall-n 60] [--json]``
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import harness
from memviewer.wire.remote import RemoteService
from memviewer.wire.testing import HubProcess, hub_env

SEARCHES = ["server-side cursor", "staging deploy", "缓存策略", "flaky test", "billing", "exporter memory"]
RECALLS = [
    "how does the orders exporter keep memory flat?",
    "what did you tell me about the staging deploy last week?",
    "which test was flaky and why?",
    "what did we decide about batching inserts?",
]


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_ms": round(statistics.median(values), 2),
        "p99_ms": round(harness.pct(values, 99), 2),
    }


def load_demo(home: Path, sock: Path) -> None:
    env = hub_env(home, sock)
    subprocess.run(
        [sys.executable, "-m", "memviewer.cli", "demo"],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def mcp_vs_rpc(home: Path, sock: Path, search_n: int, recall_n: int) -> dict[str, Any]:
    import anyio
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memviewer.cli", "mcp"], env=hub_env(home, sock)
    )
    out: dict[str, dict[str, list[float]]] = {
        "session_search": {"mcp": [], "rpc": []},
        "recall": {"mcp": [], "rpc": []},
    }

    async def main() -> None:
        rpc = RemoteService(sock)
        async with Client(params, read_timeout_seconds=300) as client:
            await client.list_tools()
            for q in SEARCHES[:2] + RECALLS[:1]:  # warm both paths (model load, caches)
                await client.call_tool("session_search", {"query": q})
                rpc.search(q, limit=5, window=5)
            await client.call_tool("recall", {"query": RECALLS[0]})
            rpc.recall(RECALLS[0])
            for i in range(search_n):
                q = SEARCHES[i % len(SEARCHES)]
                t0 = time.perf_counter()
                res = await client.call_tool("session_search", {"query": q, "limit": 5, "window": 5})
                t1 = time.perf_counter()
                assert not res.is_error, res.content
                rpc.search(q, limit=5, window=5)
                t2 = time.perf_counter()
                out["session_search"]["mcp"].append((t1 - t0) * 1000)
                out["session_search"]["rpc"].append((t2 - t1) * 1000)
            for i in range(recall_n):
                q = RECALLS[i % len(RECALLS)]
                t0 = time.perf_counter()
                res = await client.call_tool("recall", {"query": q})
                t1 = time.perf_counter()
                assert not res.is_error, res.content
                rpc.recall(q)
                t2 = time.perf_counter()
                out["recall"]["mcp"].append((t1 - t0) * 1000)
                out["recall"]["rpc"].append((t2 - t1) * 1000)
        rpc.close()

    anyio.run(main)
    return {tool: {side: summary(v) for side, v in sides.items()} for tool, sides in out.items()}


def logging_cost_hub(sock: Path, recall_n: int) -> dict[str, Any]:
    on: list[float] = []
    off: list[float] = []
    with RemoteService(sock) as rpc:
        for i in range(recall_n):
            q = RECALLS[i % len(RECALLS)]
            first_on = i % 2 == 0  # alternate which goes first
            for record in (True, False) if first_on else (False, True):
                t0 = time.perf_counter()
                rpc.call("recall", {"query": q, "record": record})
                (on if record else off).append((time.perf_counter() - t0) * 1000)
    return {"on": summary(on), "off": summary(off)}


def logging_cost_in_process(home: Path, sock: Path, recall_n: int) -> dict[str, Any]:
    from memviewer.config import load_settings
    from memviewer.recall_log import RecordAs
    from memviewer.service import MemoryService

    svc = MemoryService(load_settings(env={}, home=str(home), socket=str(sock)))
    on: list[float] = []
    off: list[float] = []
    try:
        svc.recall(RECALLS[0])  # model and index warm
        for i in range(recall_n):
            q = RECALLS[i % len(RECALLS)]
            for record in (True, False) if i % 2 == 0 else (False, True):
                t0 = time.perf_counter()
                svc.recall(q, record=RecordAs("cli") if record else None)
                (on if record else off).append((time.perf_counter() - t0) * 1000)
    finally:
        svc.close()
    return {"on": summary(on), "off": summary(off)}


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--search-n", type=int, default=200)
    ap.add_argument("--recall-n", type=int, default=60)
    ap.add_argument("--json", action="store_true")
    args = harness.parse(ap, {"search_n": 10, "recall_n": 4})
    harness.header("bench_mcp", file=sys.stderr if args.json else None)
    base = Path(tempfile.mkdtemp(prefix="mv-bench-mcp-", dir="/tmp"))
    home, sock = base / "home", base / "hub.sock"
    report: dict[str, Any] = {
        **harness.machine(),
    }
    try:
        load_demo(home, sock)
        with HubProcess(home, sock, args=("--no-index",)):
            report["mcp_vs_rpc"] = mcp_vs_rpc(home, sock, args.search_n, args.recall_n)
            report["log_cost_hub_recall"] = logging_cost_hub(sock, args.recall_n)
        report["log_cost_in_process_recall"] = logging_cost_in_process(home, sock, args.recall_n)
        report["load_after"] = harness.load()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for tool, sides in report["mcp_vs_rpc"].items():
        m, r = sides["mcp"], sides["rpc"]
        print(
            f"{tool:15} MCP p50 {m['p50_ms']:8.2f} p99 {m['p99_ms']:8.2f} | "
            f"hub RPC p50 {r['p50_ms']:8.2f} p99 {r['p99_ms']:8.2f}  (n={m['n']})"
        )
    for name in ("log_cost_hub_recall", "log_cost_in_process_recall"):
        c = report[name]
        print(f"{name:27} logging on p50 {c['on']['p50_ms']:8.2f} | off p50 {c['off']['p50_ms']:8.2f}")


if __name__ == "__main__":
    main()
