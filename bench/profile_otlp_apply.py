"""The OTLP writer in-process: spans/s of mapping + applying the bench's chat spans.

The same spans as ``bench_otlp_rate.py`` (one question and one answer a span, in
``--conversations`` conversations) are mapped by ``GenAIMapper`` in requests of 512 and
each request's commands applied with ``MemoryService.apply_batch`` (what the hub's writer
does with one queued request), on a fresh home. Prints the mapping and applying rates;
``--profile`` prints the top of a cProfile of the applying.

    python -m bench profile_otlp_apply [--spans 2048] [--profile]
"""

from __future__ import annotations

import cProfile
import json
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import harness


def chat_spans(n: int, conversations: int, t0: float) -> list[Any]:
    """The bench's spans as the decoder hands them to the mapper."""
    from memviewer.sources.otlp_decode import SpanRecord

    out = []
    for i in range(n):
        conv = f"c-{i % conversations}"
        start = t0 + i / 1000.0
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.conversation.id": conv,
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": f"question {i} about {conv}"}]}]
            ),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": f"answer {i}"}]}]
            ),
        }
        out.append(
            SpanRecord(
                trace_id=f"{i:032x}",
                span_id=f"{i:016x}",
                parent_span_id="",
                name="chat m",
                start=start,
                end=start + 0.001,
                attrs=attrs,
                resource={"service.name": "rate-agent"},
            )
        )
    return out


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--spans", type=int, default=2048)
    ap.add_argument("--request", type=int, default=512, help="spans per request (the SDK's batch)")
    ap.add_argument("--conversations", type=int, default=50)
    ap.add_argument("--profile", action="store_true")
    args = harness.parse(ap, {"spans": 64, "request": 32, "conversations": 5})
    harness.header("profile_otlp_apply")

    from memviewer.config import load_settings
    from memviewer.index.embedder import HashEmbedder
    from memviewer.service import MemoryService
    from memviewer.sources.genai_map import GenAIMapper

    spans = chat_spans(args.spans, args.conversations, time.time() - 3600)
    with tempfile.TemporaryDirectory(prefix="mvotlp") as tmp:
        settings = load_settings(Path(tmp) / "none.toml", env={}, home=str(Path(tmp) / "home"))
        svc = MemoryService(settings, embedder=HashEmbedder())
        mapper = GenAIMapper()
        requests = []
        t = time.perf_counter()
        for i in range(0, len(spans), args.request):
            requests.append(mapper.map_spans(spans[i : i + args.request]).commands)
        map_s = time.perf_counter() - t
        prof = cProfile.Profile() if args.profile else None
        errors = 0
        t = time.perf_counter()
        if prof is not None:
            prof.enable()
        for commands in requests:
            errors += sum(1 for r in svc.apply_batch(commands) if "error" in r)
        if prof is not None:
            prof.disable()
        apply_s = time.perf_counter() - t
        n_commands = sum(len(c) for c in requests)
        svc.close()
    print(
        json.dumps(
            {
                "spans": len(spans),
                "commands": n_commands,
                "errors": errors,
                "map_spans_per_s": round(len(spans) / map_s),
                "apply_s": round(apply_s, 3),
                "apply_spans_per_s": round(len(spans) / apply_s),
                "apply_ms_per_span": round(apply_s * 1000 / len(spans), 3),
            }
        )
    )
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main()
