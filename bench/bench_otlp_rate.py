"""The real OpenTelemetry SDK exporting GenAI chat spans to a hub at a steady rate.

A ``BatchSpanProcessor`` with the SDK's defaults (queue 2,048, batches of 512, a 5 s
schedule, the exporter's 10 s timeout) and the OTLP/HTTP protobuf exporter send ``--rate``
chat spans a second for ``--seconds`` to ``memviewer serve --no-index --otlp`` (a real hub
process), each span one user message and one answer in one of ``--conversations``
conversations. ``--procs N`` spreads the span creation over N processes (each ``rate / N``
spans a second, its own SDK and exporter, its own conversations), so one client
interpreter's contention (creating spans while its export thread encodes a batch) is not
counted as the hub's latency.

Reported, and which is which:

* ``export_ms``: the SDK's ``export()`` as the exporter sees it (median, p99, max): the
  client's protobuf encoding, the HTTP round trip and the hub's handling, all inside the
  client's interpreter (so its own GIL contention counts);
* ``hub_ack_ms``: the receiver's own time for the same requests, from its first byte read to
  its answer written (``stats`` → the OTLP source's ``ack_ms``): decode, mapping, the queue's
  write and fsync, the event loop's waits;
* spans created, spans the SDK dropped (its queue overflowed while exports were slow), what
  the hub stored (its OTLP counters, turns in the store) and how long after the burst, the
  peak RSS of the hub and of its child processes (the OTLP receiver's, when it has one), and
  the load average before and after.

    python -m bench bench_otlp_rate [--rate 1000] [--seconds 10] [--conversations 50] [--procs 1]
"""

from __future__ import annotations

import json
import multiprocessing as mp
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import harness


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def produce(
    endpoint: str,
    token: str,
    rate: float,
    n_total: int,
    conversations: int,
    k: int,
    procs: int,
    start: Any = None,
    go: Any = None,
    ready: Any = None,
) -> dict[str, Any]:
    """Create ``n_total`` chat spans at ``rate`` a second through one SDK and exporter: span
    ``i`` of producer ``k`` is the run's span ``i * procs + k`` (with ``conversations`` a
    multiple of ``procs``, each conversation comes from one producer). Returns what it saw."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    times: list[float] = []

    class Timed(OTLPSpanExporter):
        def export(self, spans: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return super().export(spans)
            finally:
                times.append(time.perf_counter() - t0)

    exporter = Timed(endpoint=endpoint, headers={"Authorization": f"Bearer {token}"})
    provider = TracerProvider(resource=Resource.create({"service.name": "rate-agent"}))
    processor = BatchSpanProcessor(exporter)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("bench")
    if ready is not None:  # every producer imported and built before the clock starts
        ready.put(k)
        go.wait()
    t_start = start.value if start is not None else time.monotonic()
    created = 0
    for i in range(n_total):
        due = t_start + i / rate
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        j = i * procs + k
        conv = f"c-{j % conversations}"
        question = [{"role": "user", "parts": [{"type": "text", "content": f"question {j} about {conv}"}]}]
        answer = [{"role": "assistant", "parts": [{"type": "text", "content": f"answer {j}"}]}]
        with tracer.start_as_current_span("chat m") as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.conversation.id", conv)
            span.set_attribute("gen_ai.input.messages", json.dumps(question))
            span.set_attribute("gen_ai.output.messages", json.dumps(answer))
        created += 1
    send_s = time.monotonic() - t_start
    provider.force_flush(60_000)
    inner = getattr(processor, "_batch_processor", processor)
    dropped = getattr(inner, "_dropped_spans", None)
    provider.shutdown()
    return {"created": created, "send_s": send_s, "dropped": dropped, "times": times}


def _child(args: tuple[Any, ...], out: Any) -> None:
    out.put(produce(*args))


def ms(values: list[float]) -> dict[str, float | None]:
    """Median, p99 (nearest rank) and max in ms."""
    ordered = sorted(values)
    if not ordered:
        return {"median": None, "p99": None, "max": None}
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {
        "median": round(statistics.median(ordered) * 1000, 1),
        "p99": round(p99 * 1000, 1),
        "max": round(ordered[-1] * 1000, 1),
    }


def peak_rss_mb(pid: int) -> dict[str, Any]:
    """The peak resident set (``VmHWM``, MiB) of the hub and of its child processes (Linux)."""

    def hwm(p: int) -> float | None:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
        except OSError:
            return None
        return None

    try:
        kids = [int(k) for k in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        kids = []
    return {"hub": hwm(pid), "children": [hwm(k) for k in kids]}  # the receiver, the resource tracker


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--conversations", type=int, default=50)
    ap.add_argument("--procs", type=int, default=1, help="span-creating processes (each rate/procs)")
    args = harness.parse(ap, {"rate": 100.0, "seconds": 1.0, "conversations": 5})
    harness.header("bench_otlp_rate")

    from memviewer.wire.remote import RemoteService
    from memviewer.wire.testing import HubProcess

    load_before = harness.load()
    with tempfile.TemporaryDirectory(prefix="mvrate") as tmp:
        base = Path(tmp)
        port = free_port()
        hub = HubProcess(base / "home", base / "hub.sock", args=("--no-index", "--otlp", f"127.0.0.1:{port}"))
        hub.start()
        remote = RemoteService(hub.socket_path)
        deadline = time.monotonic() + 60
        while not (base / "home" / "token").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        token = (base / "home" / "token").read_text().strip()
        endpoint = f"http://127.0.0.1:{port}/v1/traces"
        n_each = int(args.rate * args.seconds) // args.procs
        rate_each = args.rate / args.procs
        if args.procs == 1:
            results = [produce(endpoint, token, rate_each, n_each, args.conversations, 0, 1)]
        else:
            ctx = mp.get_context("spawn")
            out, ready, go, start = ctx.Queue(), ctx.Queue(), ctx.Event(), ctx.Value("d", 0.0)
            common = (endpoint, token, rate_each, n_each, args.conversations)
            children = [
                ctx.Process(target=_child, args=((*common, k, args.procs, start, go, ready), out))
                for k in range(args.procs)
            ]
            for c in children:
                c.start()
            for _ in children:
                ready.get(timeout=120)
            start.value = time.monotonic() + 0.1
            go.set()
            results = [out.get(timeout=600) for _ in children]
            for c in children:
                c.join(60)
        counters: dict[str, Any] = {}
        t_flushed = time.perf_counter()
        deadline = time.monotonic() + 300
        src: dict[str, Any] = {}
        while time.monotonic() < deadline:  # stored: nothing queued and the counters still
            src = next(s for s in remote.stats()["hub"]["sources"] if s["kind"] == "otlp")
            if src["counters"] == counters and not src.get("queued_bytes"):
                break
            counters = src["counters"]
            time.sleep(1.0)
        stored_after_s = time.perf_counter() - t_flushed
        turns = remote.stats()["counts"]["turns"]
        rss = peak_rss_mb(hub.pid)
        remote.close()
        hub.stop()
    times = [t for r in results for t in r["times"]]
    dropped = [r["dropped"] for r in results]
    print(
        json.dumps(
            {
                "procs": args.procs,
                "spans_created": sum(r["created"] for r in results),
                "send_s": round(max(r["send_s"] for r in results), 2),
                "sdk_dropped": None if None in dropped else sum(dropped),
                "exports": len(times),
                "export_ms": ms(times),
                "hub_ack_ms": src.get("ack_ms"),  # absent on a hub that does not time them
                "hub": {
                    k: counters.get(k)
                    for k in ("spans", "genai_spans", "turns", "overloaded", "store_refusals")
                },
                "turns_stored": turns,
                "rss_peak_mb": rss,  # the hub's and its child processes' (the OTLP receiver's)
                "all_stored_s_after_last_export": round(stored_after_s, 1),
                "load": [load_before, harness.load()],
            }
        )
    )


if __name__ == "__main__":
    main()
