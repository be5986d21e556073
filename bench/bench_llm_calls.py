"""LLM calls: what one call costs to ingest and to store, and what its anatomy costs.

* **Ingest and storage**: a conversation of ``--calls`` chat calls, each sending a
  20-message prompt (a system prompt and the last 19 messages of a growing history, about
  60 words each), so consecutive calls share 18–19 of their 20 messages. Each call is one
  ``record_llm_call`` in its own ``apply_batch`` (one transaction, as the hub's writer
  applies a publish), on a real SQLite store in a temporary home. Reported: ms per call
  (median, p95), bytes the calls and messages tables grew per call (``dbstat``), and what
  storing every prompt whole would have taken (its canonical JSON).
* **Anatomy**: ``MemoryService.llm_call`` (the message rows, classification, a recall of
  5 results matched by text, token counts with the packaged tokenizer, the diff from the
  call before) for a 100-message prompt, median of ``--repeat`` runs after one warm-up.

    python -m bench bench_llm_calls [--calls 300] [--repeat 30]
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import harness
from memviewer.config import load_settings
from memviewer.index.embedder import HashEmbedder
from memviewer.service import MemoryService
from memviewer.store.llm_calls import canonical

WORDS = (
    "invoice billing vendor refund approval deploy rollback latency cache schema migration "
    "customer ticket report summary budget quarter review retry queue worker index search"
).split()


def sentence(rng: random.Random, n: int = 60) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def table_bytes(svc: MemoryService) -> int:
    with svc.store.read() as conn:
        rows = conn.exec_driver_sql(
            "SELECT SUM(pgsize) FROM dbstat WHERE name IN "
            "('llm_calls', 'llm_messages', 'sqlite_autoindex_llm_messages_1', 'ix_llm_calls_id', "
            "'ix_llm_calls_session_id', 'ix_llm_calls_ts')"
        ).scalar()
    return int(rows or 0)


def ingest(svc: MemoryService, calls: int, rng: random.Random) -> dict[str, Any]:
    system = {"role": "system", "content": "You are the billing agent. " + sentence(rng, 40)}
    history: list[dict[str, Any]] = []
    times: list[float] = []
    whole = 0
    t0 = time.time() - 3600
    before = table_bytes(svc)
    for i in range(calls):
        history.append({"role": "user" if i % 2 == 0 else "assistant", "content": sentence(rng)})
        prompt = [system, *history[-19:]]
        whole += sum(len(canonical(m).encode()) for m in prompt)
        cmd = {
            "op": "record_llm_call",
            "call_id": f"c-{i:06d}",
            "session_id": "s-bench",
            "input": prompt,
            "output": [{"role": "assistant", "content": sentence(rng, 20)}],
            "usage": {"input_tokens": 1500, "output_tokens": 30},
            "model": "bench-model",
            "ts": t0 + i,
        }
        start = time.perf_counter()
        (res,) = svc.apply_batch([cmd])
        times.append(time.perf_counter() - start)
        assert "ok" in res, res
    grown = table_bytes(svc) - before
    times.sort()
    ep = svc.start_episode(svc.open_session(agent="bench")["session_id"], "reference")["episode_id"]
    turn_times = []
    for _ in range(min(calls, 100)):  # the reference: one turn per transaction, same store
        start = time.perf_counter()
        svc.apply_batch([{"op": "add_turn", "episode_id": ep, "role": "assistant", "content": sentence(rng)}])
        turn_times.append(time.perf_counter() - start)
    return {
        "calls": calls,
        "ms_median": statistics.median(times) * 1000,
        "ms_p95": times[int(len(times) * 0.95)] * 1000,
        "turn_ms_median": statistics.median(turn_times) * 1000,
        "bytes_per_call": grown / calls,
        "whole_prompt_bytes_per_call": whole / calls,
    }


def anatomy(svc: MemoryService, repeat: int, rng: random.Random) -> dict[str, Any]:
    docs = [sentence(rng, 30) for _ in range(5)]
    t = time.time()
    svc.apply_batch(
        [
            {
                "op": "record_recall",
                "recall_id": "r-bench",
                "query": "billing vendor",
                "session_id": "s-anat",
                "results": [{"text": d, "score": 0.5} for d in docs],
                "ts": t - 10,
            }
        ]
    )
    prompt = [{"role": "system", "content": "Memories:\n" + "\n".join(docs[:3])}]
    prompt += [{"role": "user" if i % 2 else "assistant", "content": sentence(rng)} for i in range(99)]
    svc.apply_batch(
        [
            {
                "op": "record_llm_call",
                "call_id": "a-1",
                "session_id": "s-anat",
                "input": prompt[:-2],
                "ts": t - 5,
            },
            {
                "op": "record_llm_call",
                "call_id": "a-2",
                "session_id": "s-anat",
                "input": prompt,
                "ts": t - 4,
                "recall_ids": ["r-bench"],
            },
        ]
    )
    out = svc.llm_call("a-2")  # warm-up: loads the tokenizer
    assert len(out["anatomy"]["messages"]) == 100 and out["anatomy"]["counts"]["in_prompt"] == 3
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        svc.llm_call("a-2")
        times.append(time.perf_counter() - start)
    return {
        "messages": 100,
        "input_tokens": out["anatomy"]["input_tokens"],
        "ms_median": statistics.median(times) * 1000,
        "ms_min": min(times) * 1000,
    }


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=30)
    args = harness.parse(ap, {"calls": 20, "repeat": 2})
    harness.header("bench_llm_calls")
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as d:
        settings = load_settings(Path(d) / "none.toml", env={}, home=f"{d}/home", socket=f"{d}/hub.sock")
        with MemoryService(settings, embedder=HashEmbedder()) as svc:
            harness.footer()
            ing = ingest(svc, args.calls, rng)
            print(
                f"ingest: {ing['calls']} calls of 20 messages, {ing['ms_median']:.2f} ms median, "
                f"{ing['ms_p95']:.2f} ms p95 per call (one transaction each); one add_turn the same way: "
                f"{ing['turn_ms_median']:.2f} ms"
            )
            print(
                f"storage: {ing['bytes_per_call']:.0f} bytes per call in llm_calls + llm_messages; "
                f"the prompt stored whole would be {ing['whole_prompt_bytes_per_call']:.0f} bytes "
                f"({ing['whole_prompt_bytes_per_call'] / max(ing['bytes_per_call'], 1):.1f}x)"
            )
            an = anatomy(svc, args.repeat, rng)
            print(
                f"anatomy: {an['messages']}-message prompt ({an['input_tokens']} tokens), "
                f"{an['ms_median']:.1f} ms median, {an['ms_min']:.1f} ms min "
                "(with the diff from the call before)"
            )
            harness.footer()


if __name__ == "__main__":
    main()
