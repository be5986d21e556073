"""The real OpenTelemetry SDK exporting GenAI chat spans to a hub at a steady rate.

A ``BatchSpanProcessor`` with the SDK's defaults (queue 2,048, batches of 512, a 5 s
schedule, the exporter's 10 s timeout) and the OTLP/HTTP protobuf exporter send ``--rate``
chat spans a second for ``--seconds`` to ``memviewer serve --no-index --otlp`` (a real hub
process), each span one user message and one answer in one of ``--conversations``
conversations. Reported: spans created, spans the SDK dropped (its queue overflowed while
exports were slow), the exporter's export() times (median, p99, max) and what the hub stored
(its OTLP counters, turns in the store).

    .venv/bin/python bench/bench_otlp_rate.py [--rate 1000] [--seconds 10] [--conversations 50]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--conversations", type=int, default=50)
    args = ap.parse_args()

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from memviewer.wire.remote import RemoteService
    from memviewer.wire.testing import HubProcess

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
        times: list[float] = []

        class Timed(OTLPSpanExporter):
            def export(self, spans: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return super().export(spans)
                finally:
                    times.append(time.perf_counter() - t0)

        exporter = Timed(
            endpoint=f"http://127.0.0.1:{port}/v1/traces", headers={"Authorization": f"Bearer {token}"}
        )
        provider = TracerProvider(resource=Resource.create({"service.name": "rate-agent"}))
        processor = BatchSpanProcessor(exporter)
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("bench")
        created = 0
        t_start = time.perf_counter()
        n_total = int(args.rate * args.seconds)
        for i in range(n_total):
            due = t_start + i / args.rate
            now = time.perf_counter()
            if due > now:
                time.sleep(due - now)
            conv = f"c-{i % args.conversations}"
            with tracer.start_as_current_span("chat m") as span:
                span.set_attribute("gen_ai.operation.name", "chat")
                span.set_attribute("gen_ai.conversation.id", conv)
                span.set_attribute(
                    "gen_ai.input.messages",
                    json.dumps(
                        [
                            {
                                "role": "user",
                                "parts": [{"type": "text", "content": f"question {i} about {conv}"}],
                            }
                        ]
                    ),
                )
                span.set_attribute(
                    "gen_ai.output.messages",
                    json.dumps(
                        [{"role": "assistant", "parts": [{"type": "text", "content": f"answer {i}"}]}]
                    ),
                )
            created += 1
        send_s = time.perf_counter() - t_start
        provider.force_flush(60_000)
        dropped = getattr(processor, "_batch_processor", processor)
        dropped_n = getattr(dropped, "_dropped_spans", None)
        provider.shutdown()
        counters: dict[str, Any] = {}
        t_flushed = time.perf_counter()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # stored: nothing queued and the counters still
            src = next(s for s in remote.stats()["hub"]["sources"] if s["kind"] == "otlp")
            if src["counters"] == counters and not src.get("queued_bytes"):
                break
            counters = src["counters"]
            time.sleep(1.0)
        stored_after_s = time.perf_counter() - t_flushed
        turns = remote.stats()["counts"]["turns"]
        remote.close()
        hub.stop()
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else 0.0
    print(
        json.dumps(
            {
                "spans_created": created,
                "send_s": round(send_s, 2),
                "sdk_dropped": dropped_n,
                "exports": len(times),
                "export_ms": {
                    "median": round(statistics.median(times) * 1000, 1) if times else None,
                    "p99": round(p99 * 1000, 1),
                    "max": round(max(times) * 1000, 1) if times else None,
                },
                "hub": {
                    k: counters.get(k)
                    for k in ("spans", "genai_spans", "turns", "overloaded", "store_refusals")
                },
                "turns_stored": turns,
                "all_stored_s_after_last_export": round(stored_after_s, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
