"""Redaction: how much ordinary text survives (false positives) and what gets masked.

Two sources of ordinary text:

* the demo data: ``memviewer demo --no-index`` into a temporary home, exported as JSON
  without and with ``--redact standard|strict`` through the real CLI, turn by turn;
* a dev set of real chat transcripts: the LongMemEval haystack sessions of
  ``/work/shared/data/longmemeval_s_dev100.json.gz`` (read from there, never copied),
  run through ``Redactor`` directly (deduplicated turns).

"Words kept" counts whitespace-separated words of the original that are still present in
the redacted text (multiset intersection), so one mask over three words costs three.
Every mask is printed by class with a sample so a false positive can be judged by eye.

    .venv/bin/python bench/bench_redaction.py [--dev PATH] [--limit N]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from memviewer.io.redact import MASK_RE, Redactor

DEV = Path("/work/shared/data/longmemeval_s_dev100.json.gz")


def kept_fraction(pairs: list[tuple[str, str]]) -> tuple[int, int]:
    total = kept = 0
    for before, after in pairs:
        words = Counter(before.split())
        left = Counter(after.split())
        total += sum(words.values())
        kept += sum((words & left).values())
    return kept, total


def masked_spans(before: str, redactor: Redactor) -> list[tuple[str, str]]:
    """(class, original text) of each mask, found by re-running per class."""
    out = []
    after = redactor.redact(before)
    for m in MASK_RE.finditer(after):
        out.append((m.group().split(":")[1], m.group()))
    return out


def report(name: str, pairs: list[tuple[str, str]], samples: dict[str, list[str]], elapsed: float) -> None:
    kept, total = kept_fraction(pairs)
    print(
        f"{name}: {len(pairs)} texts, {total} words, kept {kept} "
        f"({100 * kept / max(total, 1):.3f} %), {elapsed:.2f} s"
    )
    for cls, texts in sorted(samples.items(), key=lambda kv: -len(kv[1])):
        shown = "; ".join(t[:60].replace("\n", " ") for t in texts[:4])
        print(f"    {cls}: {len(texts)} masks  e.g. {shown}")


def _samples(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    """For each mask in the redacted text, the original words it replaced (by alignment)."""
    out: dict[str, list[str]] = {}
    for before, after in pairs:
        if before == after:
            continue
        # walk the redacted text: literal pieces between masks anchor the original
        pos = 0
        pieces = re.split(r"(\[REDACTED:[a-z_]+:[0-9]+\])", after)
        for i, piece in enumerate(pieces):
            if i % 2 == 0:
                found = before.find(piece, pos) if piece else pos
                pos = found + len(piece) if found >= 0 else pos
                continue
            cls = piece.split(":")[1]
            nxt = pieces[i + 1] if i + 1 < len(pieces) else ""
            end = before.find(nxt, pos) if nxt else len(before)
            out.setdefault(cls, []).append(before[pos : end if end >= 0 else pos + 40])
            pos = end if end >= 0 else pos
    return out


def bench_demo(level: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        exe = [str(Path(sys.executable).with_name("memviewer")), "--home", str(home)]
        subprocess.run([*exe, "demo", "--no-index"], check=True, capture_output=True)
        plain, red = Path(tmp) / "plain.json", Path(tmp) / "red.json"
        subprocess.run(
            [*exe, "export", "--all", "--format", "json", "-o", str(plain)], check=True, capture_output=True
        )
        t = time.perf_counter()
        subprocess.run(
            [*exe, "export", "--all", "--format", "json", "-o", str(red), "--redact", level],
            check=True,
            capture_output=True,
        )
        elapsed = time.perf_counter() - t
        a, b = json.loads(plain.read_text()), json.loads(red.read_text())
        pairs = []
        for sa, sb in zip(a["sessions"], b["sessions"], strict=True):
            pairs.append((sa["session"]["title"] or "", sb["session"]["title"] or ""))
            for ta, tb in zip(sa["turns"], sb["turns"], strict=True):
                pairs.append((ta["content"] or "", tb["content"] or ""))
        report(f"demo export, {level}", pairs, _samples(pairs), elapsed)


def bench_dev(path: Path, level: str, limit: int | None) -> None:
    data = json.load(gzip.open(path))
    texts: dict[str, None] = {}
    for item in data[:limit]:
        for session in item["haystack_sessions"]:
            for turn in session:
                texts.setdefault(turn["content"], None)
    r = Redactor(level)
    t = time.perf_counter()
    pairs = [(text, r.redact(text)) for text in texts]
    elapsed = time.perf_counter() - t
    report(f"LongMemEval dev haystack, {level}", pairs, _samples(pairs), elapsed)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dev", type=Path, default=DEV)
    ap.add_argument("--limit", type=int, default=None, help="questions of the dev set to read")
    ap.add_argument("--skip-demo", action="store_true")
    args = ap.parse_args()
    for level in ("standard", "strict"):
        if not args.skip_demo:
            bench_demo(level)
        if args.dev.exists():
            bench_dev(args.dev, level, args.limit)
        else:
            print(f"dev set {args.dev} not found; skipped")


if __name__ == "__main__":
    main()
