"""Memory of the OTLP receiver under many parallel big bodies, with its bounds and without.

One run, side by side: a receiver child process (spawned, an in-process ``OtlpReceiver`` on a
store-less hub stub, so only the receiver's own holding is measured) is sent ``--parallel``
requests of ``--mb`` MB at once (a valid JSON export request padded with whitespace: it is
read, decoded and answered 200 like a real one), ``--rounds`` times. Once with the shipped
bounds (``MAX_INFLIGHT_BYTES``, ``MAX_CONNECTIONS``), once with them lifted (what the receiver
did before it had them). Reported per mode: answers by status, the child's peak RSS
(``VmHWM``) and its RSS after the last round (``VmRSS``).

    python -m bench bench_otlp_pressure [--parallel 48] [--mb 31] [--rounds 2]
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import json
import multiprocessing as mp
import socket
import time
from pathlib import Path

from bench import harness

TOKEN = "b" * 32


def _proc_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def serve(limits: dict[str, int], port_q: mp.Queue, stop_q: mp.Queue) -> None:  # type: ignore[type-arg]
    """The child: a receiver until told to stop; then its memory figures."""
    from memviewer.sources.otlp_http import OtlpReceiver

    class NullHub:
        async def submit(self, commands: list[dict]) -> list[dict]:
            return [{"ok": True} for _ in commands]

    async def main() -> None:
        rx = OtlpReceiver("127.0.0.1", 0, token=TOKEN, **limits)
        await rx.start(NullHub())
        port_q.put(rx.address[1])
        while stop_q.empty():
            await asyncio.sleep(0.05)
        port_q.put({"VmHWM_MiB": _proc_kib("VmHWM") / 1024, "VmRSS_MiB": _proc_kib("VmRSS") / 1024})
        await rx.stop()

    asyncio.run(main())


def post(port: int, body: bytes) -> int:
    head = (
        "POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
        try:
            s.sendall(head + body)
        except OSError:
            pass  # refused on its headers and closed: the status line is still there to read
        status = s.recv(64)
    return int(status.split()[1]) if status.startswith(b"HTTP/1.1 ") else 0


def run(limits: dict[str, int], parallel: int, mb: int, rounds: int) -> dict[str, object]:
    ctx = mp.get_context("spawn")
    port_q: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    stop_q: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    child = ctx.Process(target=serve, args=(limits, port_q, stop_q))
    child.start()
    port = port_q.get(timeout=60)
    body = json.dumps({"resourceSpans": []}).encode()
    body = body[:-1] + b" " * (mb * 1024 * 1024) + body[-1:]
    statuses: collections.Counter[int] = collections.Counter()
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
        for _ in range(rounds):
            statuses.update(pool.map(lambda _i: post(port, body), range(parallel)))
    wall = time.perf_counter() - t0
    stop_q.put(True)
    mem = port_q.get(timeout=60)
    child.join(30)
    return {"statuses": dict(sorted(statuses.items())), "wall_s": round(wall, 2), **mem}


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--parallel", type=int, default=48)
    ap.add_argument("--mb", type=int, default=31)
    ap.add_argument("--rounds", type=int, default=2)
    args = harness.parse(ap, {"parallel": 2, "mb": 1, "rounds": 1})
    harness.header("bench_otlp_pressure")
    lifted = {"max_inflight_bytes": 1 << 40, "max_connections": 1 << 20}
    for name, limits in (("bounded (shipped)", {}), ("bounds lifted", lifted)):
        out = run(limits, args.parallel, args.mb, args.rounds)
        print(f"{name:18} {json.dumps(out)}", flush=True)


if __name__ == "__main__":
    main()
