"""Benchmark: indexer throughput (turns/s) against the bare embedding model, side by side.

The indexer reads turns from SQLite, embeds them, writes LanceDB rows and the
session summaries; the raw number is ``OnnxEmbedder.embed`` on the very same
texts. Runs alternate (raw, indexer, raw, indexer, …) so machine noise hits
both; medians are reported, in wall-clock turns/s and in turns per CPU-second
of this process (``time.process_time``, all threads), which other jobs on a
shared machine disturb much less.

Run: ``python -m bench bench_index [--turns 2000] [--runs 3] [--per-session 40]
[--texts synthetic|longmemeval|realtalk]``. ``longmemeval`` and ``realtalk`` read turn texts
(in order) from the shared data folder (``harness.data_dir``; LongMemEval-S: long assistant
answers, median ~400 characters; RealTalk, LoCoMo-like chat: median ~60), never committed to the repository.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time

from bench import harness
from memviewer.config import load_settings
from memviewer.index.embedder import OnnxEmbedder
from memviewer.service import MemoryService

WORDS = (
    "the build deploy cache index query agent memory session turn user assistant tool release "
    "docker image cron job login page api database migration schema test suite flaky timeout "
    "error warning latency throughput benchmark vector search keyword ranking summary archive "
    "yesterday tomorrow monday friday meeting dentist flight hotel lisbon tokyo budget invoice "
    "recipe garden guitar running marathon passport appointment birthday gift museum concert"
).split()


def chat_texts(n: int, seed: int = 7) -> list[str]:
    """Chat-like turns: mostly short questions, some long assistant answers."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        length = rng.choice([6, 10, 14, 20, 30, 45, 60, 90]) if i % 2 else rng.choice([5, 8, 12, 18, 25])
        out.append(" ".join(rng.choice(WORDS) for _ in range(length)).capitalize() + ".")
    return out


DATA = harness.data_dir()


def dataset_texts(name: str, n: int) -> list[str]:
    """The first ``n`` turn texts of a shared data set (see the module docstring)."""
    import gzip
    import json

    file = "longmemeval_s_dev100.json.gz" if name == "longmemeval" else "realtalk_dev.json.gz"
    harness.data_file(file)
    out: list[str] = []
    if name == "longmemeval":
        for q in json.load(gzip.open(DATA / "longmemeval_s_dev100.json.gz")):
            for session in q["haystack_sessions"]:
                out += [t["content"] for t in session if t.get("content")]
            if len(out) >= n:
                break
    else:
        for conv in json.load(gzip.open(DATA / "realtalk_dev.json.gz")):
            for key, value in conv.items():
                if key.startswith("session_") and isinstance(value, list):
                    out += [t.get("clean_text") or t.get("text") or "" for t in value if isinstance(t, dict)]
        out = [t for t in out if t]
    if len(out) < n:
        raise SystemExit(f"{name} has only {len(out)} turns")
    return out[:n]


def fill(svc: MemoryService, texts: list[str], per_session: int) -> None:
    for s in range(0, len(texts), per_session):
        chunk = texts[s : s + per_session]
        svc.import_session(
            {"id": f"bench-{s}", "scope": "user", "scope_id": "bench"},
            [
                {
                    "id": f"bench-{s}-{i}",
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": t,
                    "timestamp": 1_700_000_000.0 + s + i,
                }
                for i, t in enumerate(chunk)
            ],
        )


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--per-session", type=int, default=40)
    ap.add_argument("--texts", choices=("synthetic", "longmemeval", "realtalk"), default="synthetic")
    args = harness.parse(ap, {"turns": 32, "runs": 1, "per_session": 16})
    harness.header("bench_index")
    texts = chat_texts(args.turns) if args.texts == "synthetic" else dataset_texts(args.texts, args.turns)
    model = OnnxEmbedder()
    model.embed(["warm up"])
    import lancedb  # noqa: F401 - a running hub has paid this ~1-2 s import already

    raw, indexed, raw_cpu, indexed_cpu, summaries = [], [], [], [], 0
    for run in range(args.runs):
        t0, c0 = time.perf_counter(), time.process_time()
        model.embed(texts)
        raw.append(args.turns / (time.perf_counter() - t0))
        raw_cpu.append(args.turns / (time.process_time() - c0))
        with tempfile.TemporaryDirectory(prefix="mv-bench-index-") as home:
            settings = load_settings(env={}, home=home)
            with MemoryService(settings, embedder=model) as svc:
                fill(svc, texts, args.per_session)
                t0, c0 = time.perf_counter(), time.process_time()
                report = svc.sync_index()
                indexed.append(args.turns / (time.perf_counter() - t0))
                indexed_cpu.append(args.turns / (time.process_time() - c0))
                summaries = report["summaries"]
        print(
            f"run {run + 1}: raw {raw[-1]:.0f} turns/s ({raw_cpu[-1]:.0f}/cpu-s), "
            f"indexer {indexed[-1]:.0f} turns/s ({indexed_cpu[-1]:.0f}/cpu-s)",
            flush=True,
        )
    r, i = statistics.median(raw), statistics.median(indexed)
    rc, ic = statistics.median(raw_cpu), statistics.median(indexed_cpu)
    harness.footer()
    print(f"texts={args.texts}")
    print(f"turns={args.turns} sessions={summaries} (each summary embedded too)")
    print(f"raw model   median {r:.0f} turns/s, {rc:.0f} turns/cpu-s")
    print(f"indexer     median {i:.0f} turns/s ({i / r:.0%} of raw), {ic:.0f} turns/cpu-s ({ic / rc:.0%})")


if __name__ == "__main__":
    main()
