"""The hub's side of one OTLP export of the bench's chat spans, stage by stage, in-process.

The SDK's own protobuf encoding of ``--spans`` chat spans (``bench_otlp_rate.py``'s spans,
one question and one answer each, in ``--conversations`` conversations) is decoded
(``otlp_decode``), mapped (``GenAIMapper``: a fresh mapper a request, as if every span were
new, which is the bench's case), serialised for the durable queue (``otlp_queue.encode``)
and written (``DurableQueue.put``: the JSON again, the write and the fsync), ``--rounds``
times; the median of each stage is printed, and ``--profile`` prints the top of a cProfile
of the decode + mapping + queue JSON.

    python -m bench profile_otlp_request [--spans 512] [--rounds 20] [--profile]
"""

from __future__ import annotations

import cProfile
import json
import pstats
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import harness


def sdk_body(n: int, conversations: int) -> bytes:
    """What the OTLP/HTTP protobuf exporter sends for ``n`` of the bench's spans."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "rate-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    for i in range(n):
        conv = f"c-{i % conversations}"
        question = [{"role": "user", "parts": [{"type": "text", "content": f"question {i} about {conv}"}]}]
        answer = [{"role": "assistant", "parts": [{"type": "text", "content": f"answer {i}"}]}]
        with tracer.start_as_current_span("chat m") as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.conversation.id", conv)
            span.set_attribute("gen_ai.input.messages", json.dumps(question))
            span.set_attribute("gen_ai.output.messages", json.dumps(answer))
    return bytes(encode_spans(memory.get_finished_spans()).SerializeToString())


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--spans", type=int, default=512)
    ap.add_argument("--conversations", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--profile", action="store_true")
    args = harness.parse(ap, {"spans": 32, "conversations": 5, "rounds": 2})
    harness.header("profile_otlp_request")

    from memviewer.sources import otlp_decode, otlp_queue
    from memviewer.sources.genai_map import GenAIMapper

    body = sdk_body(args.spans, args.conversations)
    stages: dict[str, list[float]] = {"decode": [], "map": [], "queue_json": [], "queue_put": []}
    prof = cProfile.Profile() if args.profile else None
    commands: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="mvreq") as tmp:
        queue = otlp_queue.DurableQueue(Path(tmp) / "q")
        for _ in range(args.rounds):
            if prof is not None:
                prof.enable()
            t0 = time.perf_counter()
            spans = otlp_decode.decode_traces_pb(body)
            t1 = time.perf_counter()
            commands = GenAIMapper().map_spans(spans).commands
            t2 = time.perf_counter()
            otlp_queue.encode(commands)
            t3 = time.perf_counter()
            if prof is not None:
                prof.disable()
            queue.put(commands)
            t4 = time.perf_counter()
            for name, (a, b) in zip(stages, ((t0, t1), (t1, t2), (t2, t3), (t3, t4)), strict=True):
                stages[name].append(b - a)
    out = {name: round(statistics.median(v) * 1000, 2) for name, v in stages.items()}
    sizes = {"spans": args.spans, "body_bytes": len(body), "commands": len(commands)}
    print(json.dumps({**sizes, "median_ms": out}))
    if prof is not None:
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
