"""Benchmark: the hub's sources, side by side with the Publisher, in one real hub process.

1. OTLP ingest: chat spans as an instrumented agent sends them (each span re-sends the
   conversation's history and adds a user message and an answer), encoded as OTLP protobuf
   and POSTed to ``/v1/traces`` in requests of ``--spans-per-request`` spans, one request at a
   time (like a BatchSpanProcessor). spans/s and turns/s acknowledged (each 200 is sent after
   the commit), against the Publisher's own turns/s (default batching) on the same hub, in
   the same run, interleaved.
2. PraisonAI watch latency: ``--messages`` messages appended with praisonaiagents'
   ``DefaultSessionStore`` across ``--files`` session files (round robin, paced); for each,
   the time from ``add_message`` returning to the hub's ``session.imported`` event that
   covers it (the event is sent after the commit, and the keyword index is written in the
   same transaction, so the message is searchable then). A sample is checked by searching.

Run: ``python -m bench bench_sources [--runs 3] [--messages 1000 --files 100]``
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench import harness
from memviewer.client import Publisher
from memviewer.wire.remote import RemoteService
from memviewer.wire.testing import HubProcess

CONTENT = "Reading tests/test_scheduler.py and the CI log to find why the job fires a second late. " * 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- OTLP ------------------------------------------------------------------------------------
def build_requests(conversations: int, turns_per_conv: int, per_request: int, tag: str) -> list[bytes]:
    """Protobuf bodies; span k of a conversation carries history 0..2k and one new answer."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    def kv(key: str, value: str) -> KeyValue:
        return KeyValue(key=key, value=AnyValue(string_value=value))

    spans: list[Span] = []
    t0 = int(time.time() * 1e9)
    for c in range(conversations):
        history: list[dict[str, Any]] = []
        trace = os.urandom(16)
        for k in range(turns_per_conv // 2):
            history.append(
                {"role": "user", "parts": [{"type": "text", "content": f"{tag} question {c}.{k}"}]}
            )
            answer = {"role": "assistant", "parts": [{"type": "text", "content": f"{CONTENT} ({c}.{k})"}]}
            start = t0 + (c * 1000 + k) * 1_000_000
            spans.append(
                Span(
                    trace_id=trace,
                    span_id=os.urandom(8),
                    name="chat bench-model",
                    start_time_unix_nano=start,
                    end_time_unix_nano=start + 500_000,
                    attributes=[
                        kv("gen_ai.operation.name", "chat"),
                        kv("gen_ai.conversation.id", f"{tag}-conv-{c}"),
                        kv("gen_ai.agent.name", "bench-agent"),
                        kv("gen_ai.input.messages", json.dumps(history)),
                        kv("gen_ai.output.messages", json.dumps([answer])),
                    ],
                )
            )
            history.append(answer)
    bodies = []
    for i in range(0, len(spans), per_request):
        req = ExportTraceServiceRequest()
        rs = req.resource_spans.add()
        rs.resource.attributes.append(kv("service.name", "bench"))
        rs.scope_spans.add().spans.extend(spans[i : i + per_request])
        bodies.append(req.SerializeToString())
    return bodies


def otlp_run(url: str, bodies: list[bytes], token: str) -> float:
    t0 = time.perf_counter()
    headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {token}"}
    for body in bodies:
        req = urllib.request.Request(url, data=body, method="POST", headers=headers)
        with urllib.request.urlopen(req, timeout=120) as resp:
            assert resp.status == 200, resp.status
            resp.read()
    return time.perf_counter() - t0


def map_only(bodies: list[bytes]) -> float:
    """Decode + map in process (no HTTP, no store): the receiver's own CPU per span."""
    from memviewer.sources.genai_map import GenAIMapper
    from memviewer.sources.otlp_decode import decode_traces_pb

    mapper = GenAIMapper()
    t0 = time.perf_counter()
    for body in bodies:
        mapper.map_spans(decode_traces_pb(body))
    return time.perf_counter() - t0


def publisher_run(sock: Path, spool: Path, home: Path, turns: int) -> float:
    with Publisher(sock, spool, home=home) as pub:
        assert pub.flush(30)
        t0 = time.perf_counter()
        sid = eid = None
        for i in range(turns):
            if i % 1000 == 0:
                sid = pub.open_session(agent="bench-publisher")
            if i % 2 == 0:
                if eid is not None:
                    pub.finalize_episode(eid)
                eid = pub.start_episode(sid, f"question {i}")
            else:
                pub.add_turn(eid, "assistant", CONTENT)
        assert pub.flush(600)
        assert pub.errors == 0
        return time.perf_counter() - t0


# -- PraisonAI watch latency ---------------------------------------------------------------------
def watch_latency(folder: Path, sock: Path, messages: int, files: int, pace: float) -> dict[str, Any]:
    from praisonaiagents.session.store import DefaultSessionStore

    store = DefaultSessionStore(session_dir=str(folder))
    written: dict[str, list[float]] = {}  # session -> write time of message n (1-based index n-1)
    seen: list[tuple[float, str, int]] = []  # (received, session, turns in the file)
    stop = threading.Event()
    remote = RemoteService(sock)
    cursor = [remote.last_seq]

    def follow() -> None:
        with RemoteService(sock) as r:
            while not stop.is_set():
                events = r.events(cursor[0], 1000)
                now = time.perf_counter()
                for ev in events:
                    cursor[0] = ev.seq
                    if ev.kind == "session.imported":
                        seen.append((now, ev.session_id or "", int(ev.payload.get("turns") or 0)))
                if not events:
                    time.sleep(0.002)

    th = threading.Thread(target=follow, daemon=True)
    th.start()
    tokens = []
    for i in range(messages):
        sid = f"bench-{i % files:03d}"
        token = f"zq{i:05d}x"
        tokens.append((sid, token))
        store.add_message(
            sid, "user" if (i // files) % 2 == 0 else "assistant", f"message {token} {CONTENT[:80]}"
        )
        written.setdefault(sid, []).append(time.perf_counter())
        time.sleep(pace)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = {}
        for _, s, n in seen:
            got[s] = max(got.get(s, 0), n)
        if all(got.get(s, 0) >= len(w) for s, w in written.items()):
            break
        time.sleep(0.05)
    stop.set()
    th.join(5)
    lat = []
    for s, times in written.items():
        evs = [(t, n) for t, ss, n in seen if ss == s]
        for n, tw in enumerate(times, 1):
            first = min((t for t, m in evs if m >= n and t >= tw), default=None)
            if first is not None:
                lat.append(first - tw)
    missing = messages - len(lat)
    sample = tokens[:: max(1, messages // 20)]
    searchable = sum(
        1 for sid, tok in sample if any(h["session_id"] == sid for h in remote.search(tok)["results"])
    )
    remote.close()
    lat.sort()
    q = harness.percentiles(lat, (50, 99), scale=1000, digits=1)
    return {
        "messages": messages,
        "files": files,
        "measured": len(lat),
        "missing": missing,
        "p50_ms": q["p50"],
        "p99_ms": q["p99"],
        "max_ms": round(max(lat) * 1000, 1) if lat else None,
        "searchable_sample": f"{searchable}/{len(sample)}",
    }


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--conversations", type=int, default=50)
    ap.add_argument("--turns-per-conversation", type=int, default=40)
    ap.add_argument("--spans-per-request", type=int, default=100)
    ap.add_argument("--messages", type=int, default=1000)
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--pace", type=float, default=0.02, help="seconds between two appends")
    args = harness.parse(
        ap,
        {
            "runs": 1,
            "conversations": 3,
            "turns_per_conversation": 4,
            "spans_per_request": 10,
            "messages": 20,
            "files": 3,
            "pace": 0.001,
        },
    )
    harness.header("bench_sources")

    base = Path(tempfile.mkdtemp(prefix="mvs-", dir="/tmp"))
    folder = base / "praison"
    folder.mkdir()
    port = free_port()
    hub = HubProcess(
        base / "home",
        base / "hub.sock",
        args=("--no-index", "--otlp", f"127.0.0.1:{port}", "--watch-praisonai", str(folder)),
        log_level="WARNING",
    )
    hub.start()
    url = f"http://127.0.0.1:{port}/v1/traces"
    rows = []
    try:
        for run in range(args.runs):
            bodies = build_requests(
                args.conversations, args.turns_per_conversation, args.spans_per_request, f"r{run}"
            )
            spans = args.conversations * args.turns_per_conversation // 2
            turns = args.conversations * args.turns_per_conversation
            t_map = map_only(bodies)
            t_otlp = otlp_run(url, bodies, (base / "home" / "token").read_text().strip())
            t_pub = publisher_run(hub.socket_path, base / "spool", hub.home, turns)
            rows.append(
                {
                    "otlp_spans_s": spans / t_otlp,
                    "otlp_turns_s": turns / t_otlp,
                    "publisher_turns_s": turns / t_pub,
                    "map_only_spans_s": spans / t_map,
                }
            )
            print(json.dumps({k: round(v, 1) for k, v in rows[-1].items()}), flush=True)
        with RemoteService(hub.socket_path) as remote:
            counters = next(s for s in remote.stats()["hub"]["sources"] if s["kind"] == "otlp")["counters"]
        latency = watch_latency(folder, hub.socket_path, args.messages, args.files, args.pace)
    finally:
        hub.stop()
    med = {k: round(statistics.median(r[k] for r in rows), 1) for k in rows[0]}
    report = {
        **harness.machine(),
        "otlp": {
            "conversations": args.conversations,
            "turns_per_conversation": args.turns_per_conversation,
            "spans_per_request": args.spans_per_request,
            "runs": rows,
            "median": med,
            "ratio_otlp_to_publisher_turns": round(med["otlp_turns_s"] / med["publisher_turns_s"], 2),
            "receiver_turns": counters["turns"],
            "receiver_errors": counters["command_errors"],
        },
        "watch": latency,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
