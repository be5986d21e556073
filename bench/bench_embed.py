"""Benchmark: raw onnxruntime throughput vs ``OnnxEmbedder.embed`` on chat-like turns.

Shows how much the wrapper (tokenising, padding, pooling, re-ordering) costs on
top of the bare model, so regressions in the embedding path are visible.

Run: ``/tmp/venv/bin/python -m bench bench_embed [--turns 2000] [--runs 5] [--threads N]``
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable

import numpy as np
import onnxruntime as ort

from bench import harness
from memviewer.index.embedder import OnnxEmbedder, default_model_files

BATCH = 32

_SUBJECTS = [
    "the build",
    "my deploy",
    "the migration",
    "our test suite",
    "the recall query",
    "this function",
    "the API",
    "the cache",
    "the new index",
    "the login page",
    "the agent",
    "the memory store",
    "the release",
    "the docker image",
    "the cron job",
]
_VERBS = [
    "fails",
    "is slow",
    "returns empty results",
    "crashes on startup",
    "times out",
    "works locally but not in CI",
    "uses too much memory",
    "needs a refactor",
    "looks correct now",
    "drops the last item",
    "logs a warning",
    "hangs forever",
]
_FILLERS = [
    "after I upgraded the dependencies",
    "when the input is large",
    "since yesterday",
    "only on Linux",
    "with the default config",
    "if I run it twice",
    "under load",
    "when the network is flaky",
    "for some users",
    "on the staging server",
]
_OPENERS = [
    "Hi,",
    "Quick question:",
    "Okay so",
    "Thanks!",
    "Hmm,",
    "Update:",
    "Sorry,",
    "FYI",
    "Can you check why",
    "I noticed that",
    "It seems",
    "Good news:",
]
_ASKS = [
    "Can you help me figure out why?",
    "What should I try next?",
    "Any ideas?",
    "Please summarise what changed.",
    "Should we roll back?",
    "Let's write a test for it.",
    "I'll paste the stack trace below.",
    "Does that make sense?",
    "Remind me tomorrow.",
]
_WORDS = (
    "memory vector search keyword ranking episode session turn archive active window "
    "threshold latency embedding tokenizer batch thread socket protocol frame summary "
    "recency weight score explanation python rust sqlite lance config flag error retry"
).split()


def make_turns(n: int, seed: int = 1234) -> list[str]:
    """Deterministic, varied chat turns of 5-60 words."""
    rng = random.Random(seed)
    turns: list[str] = []
    for _ in range(n):
        target = rng.randint(5, 60)
        words: list[str] = []
        while len(words) < target:
            kind = rng.random()
            if kind < 0.45:
                part = f"{rng.choice(_OPENERS)} {rng.choice(_SUBJECTS)} {rng.choice(_VERBS)}"
                if rng.random() < 0.6:
                    part += f" {rng.choice(_FILLERS)}"
                part += "."
            elif kind < 0.7:
                part = rng.choice(_ASKS)
            elif kind < 0.9:
                part = " ".join(rng.choices(_WORDS, k=rng.randint(3, 10))) + "."
            else:
                part = f"Error {rng.randint(100, 599)} at line {rng.randint(1, 900)}."
            words.extend(part.split())
        turns.append(" ".join(words[:target]))
    return turns


def median_seconds(fn: Callable[[], object], runs: int) -> float:
    fn()  # warm-up: first run pays allocator and cache costs
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def raw_batches(embedder: OnnxEmbedder, turns: list[str], *, sort: bool) -> list[dict[str, np.ndarray]]:
    """Pre-tokenised, per-batch padded inputs; tokenising is not timed for the raw path."""
    tokenizer = embedder._tokenizer
    assert tokenizer is not None
    encodings = tokenizer.encode_batch(turns)
    if sort:
        encodings = sorted(encodings, key=lambda e: len(e.ids), reverse=True)
    batches = []
    for start in range(0, len(encodings), BATCH):
        chunk = encodings[start : start + BATCH]
        width = max(len(e.ids) for e in chunk)
        ids = np.zeros((len(chunk), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, enc in enumerate(chunk):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        types = np.zeros_like(ids)
        batches.append({"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
    return batches


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="intra-op threads")
    args = harness.parse(parser, {"turns": 16, "runs": 1})
    harness.header("bench_embed")

    turns = make_turns(args.turns)
    embedder = OnnxEmbedder(threads=args.threads, batch_size=BATCH)
    embedder.load()

    options = ort.SessionOptions()  # same settings as the wrapper, built by hand
    if args.threads:
        options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(
        str(default_model_files()[0]), sess_options=options, providers=["CPUExecutionProvider"]
    )

    def run_raw(batches: list[dict[str, np.ndarray]]) -> Callable[[], None]:
        def go() -> None:
            for feeds in batches:
                session.run(["last_hidden_state"], feeds)

        return go

    def wrapped() -> None:
        embedder.embed(turns)

    unsorted = raw_batches(embedder, turns, sort=False)
    by_length = raw_batches(embedder, turns, sort=True)
    runs = args.runs
    rows = [
        ("raw session.run, input order", median_seconds(run_raw(unsorted), runs)),
        ("raw session.run, length-sorted", median_seconds(run_raw(by_length), runs)),
        ("OnnxEmbedder.embed (tokenise+pad+pool)", median_seconds(wrapped, runs)),
    ]
    words = [len(t.split()) for t in turns]
    tokens = [len(e.ids) for e in embedder._tokenizer.encode_batch(turns)]  # type: ignore[union-attr]

    print(f"# embedding benchmark ({embedder.name}, {args.turns} turns, batch {BATCH})\n")
    print(f"- intra-op threads: {args.threads or 'ort default'}")
    print(
        f"- turns: {min(words)}-{max(words)} words (mean {statistics.mean(words):.1f}), "
        f"{min(tokens)}-{max(tokens)} tokens (mean {statistics.mean(tokens):.1f})"
    )
    print(f"- median of {args.runs} runs after one warm-up; raw rows are pre-tokenised\n")
    base = rows[0][1]
    print("| path | median s | turns/s | vs raw input order |")
    print("|---|---:|---:|---:|")
    for label, seconds in rows:
        print(f"| {label} | {seconds:.3f} | {args.turns / seconds:,.0f} | {base / seconds:.2f}x |")


if __name__ == "__main__":
    main()
