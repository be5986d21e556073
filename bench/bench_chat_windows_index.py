"""What embedding a chat's windows adds to indexing it: fresh homes, the real ONNX model (no
cache), the same conversations indexed with windows and without (``chat_windows`` returning
none), alternating, one process.

    python -m bench bench_chat_windows_index FILE [--conversations 2] [--rounds 2]
"""

from __future__ import annotations

import statistics
import tempfile
import time

from bench import harness


def _none(turns: object) -> list[str]:
    return []


def main() -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("file")
    ap.add_argument("--conversations", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    args = harness.parse(ap, needs="a REALTALK evaluation file")
    harness.header("bench_chat_windows_index")

    from memviewer.config import load_settings
    from memviewer.eval import conversations as ev
    from memviewer.index import summarizer
    from memviewer.index.embedder import OnnxEmbedder
    from memviewer.index.lance import WINDOWS, LanceIndex
    from memviewer.paths import lance_dir
    from memviewer.service import MemoryService

    convs = ev.load_conversations(args.file)[: args.conversations]
    turns = sum(len(s.turns) for c in convs for s in c.sessions)
    real = summarizer.chat_windows
    embedder = OnnxEmbedder(load_settings(env={}, home=tempfile.mkdtemp(), retention="keep_all").model_dir)
    embedder.embed(["warm up"])
    times: dict[str, list[float]] = {"windows": [], "none": []}
    windows = 0
    for r in range(args.rounds):
        for name in ("windows", "none") if r % 2 == 0 else ("none", "windows"):
            summarizer.chat_windows = real if name == "windows" else _none  # type: ignore[assignment]
            with tempfile.TemporaryDirectory(dir="/tmp") as home:
                settings = load_settings(env={}, home=home, retention="keep_all")
                service = MemoryService(settings, embedder=embedder)
                try:
                    ev.ingest(service, convs)
                    t = time.perf_counter()
                    service.sync_index()
                    times[name].append(time.perf_counter() - t)
                    if name == "windows":
                        index = LanceIndex(lance_dir(settings.home_path))
                        windows = index.count(WINDOWS)
                        index.close()
                finally:
                    service.close()
    summarizer.chat_windows = real
    harness.footer()
    print(f"{len(convs)} conversations, {turns} turns, {windows} windows, {args.rounds} rounds")
    for name, v in times.items():
        print(
            f"{name:8s} sync_index median {statistics.median(v):.1f} s ({', '.join(f'{x:.1f}' for x in v)})"
        )
    print(
        f"ratio windows / none: {statistics.median(times['windows']) / statistics.median(times['none']):.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
