"""The physical limit of an embedding: one typical turn with the int8 MiniLM, batch 32.

``OnnxEmbedder.embed`` on batches of 32 turns from LongMemEval-S and RealTalk (LoCoMo-like
chat), texts read from ``/work/shared/data`` (see ``bench_index.dataset_texts``); median
wall and CPU milliseconds per turn over ``--batches`` batches. The FTS5 floor of a keyword
query is the "bare FTS5 MATCH" column of ``bench_search_hub.py``.

    .venv/bin/python bench/bench_limits.py [--batches 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_index import dataset_texts  # noqa: E402

from memviewer.index.embedder import OnnxEmbedder  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=20)
    args = ap.parse_args()
    model = OnnxEmbedder()
    model.embed(["warm up"])
    print(f"load {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for name in ("realtalk", "longmemeval"):
        texts = dataset_texts(name, 32 * args.batches)
        wall, cpu = [], []
        for b in range(args.batches):
            batch = texts[b * 32 : (b + 1) * 32]
            t, c = time.perf_counter(), time.process_time()
            model.embed(batch)
            wall.append((time.perf_counter() - t) * 1000 / 32)
            cpu.append((time.process_time() - c) * 1000 / 32)
        chars = statistics.median(len(x) for x in texts)
        print(
            f"{name}: median {chars:.0f} chars/turn; per turn {statistics.median(wall):.2f} ms wall, "
            f"{statistics.median(cpu):.2f} ms CPU (batch 32) -> {1000 / statistics.median(wall):.0f} turns/s"
        )


if __name__ == "__main__":
    main()
