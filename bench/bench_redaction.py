"""Redaction: how much ordinary text survives (false positives) and what gets masked.

Two sources of ordinary text:

* the demo data: ``memviewer demo --no-index`` into a temporary home, exported as JSON
  without and with ``--redact standard|strict`` through the real CLI, turn by turn;
* a dev set of real chat transcripts: the LongMemEval haystack sessions of
  the shared data folder's ``longmemeval_s_dev100.json.gz`` (read from there, never copied),
  run through ``Redactor`` directly (deduplicated turns).

"Words kept" counts whitespace-separated words of the original that are still present in
the redacted text (multiset intersection), so one mask over three words costs three.
Every mask is printed by class with a sample so a false positive can be judged by eye.

``--compare REV`` measures before and after side by side in one run: the redactor of git
revision REV (loaded from ``git show REV:memviewer/io/redact*.py`` into private modules) and
the working tree's, on the same texts: leaks of the audit corpus per class
(tests/redaction_corpus.py, issue 32 row 17), words kept on the first ``--limit`` questions of
the dev haystack at both levels, every text whose redaction changed (with the masked words),
and the spans the added rules find on the whole haystack (rules alone: fast).

    python -m bench bench_redaction [--dev PATH] [--limit N] [--compare REV]
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

from bench import harness
from memviewer.io import redact_rules
from memviewer.io.redact import MASK_RE, Redactor

DEV = harness.data_dir() / "longmemeval_s_dev100.json.gz"


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


def load_baseline(rev: str) -> ModuleType:
    """The ``redact`` module of git revision ``rev``, with its own copy of the rules."""
    root = Path(__file__).resolve().parent.parent
    tmp = Path(tempfile.mkdtemp(prefix="redact-baseline-"))
    modules: dict[str, ModuleType] = {}
    for name in ("redact_rules", "redact"):
        src = subprocess.run(
            ["git", "-C", str(root), "show", f"{rev}:memviewer/io/{name}.py"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        src = src.replace("from memviewer.io.redact_rules import", "from baseline_redact_rules import")
        path = tmp / f"baseline_{name}.py"
        path.write_text(src, encoding="utf-8")
        spec = importlib.util.spec_from_file_location(f"baseline_{name}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[f"baseline_{name}"] = module
        spec.loader.exec_module(module)
        modules[name] = module
    return modules["redact"]


def _dev_texts(path: Path, limit: int | None) -> list[str]:
    data = json.load(gzip.open(path))
    texts: dict[str, None] = {}
    for item in data[:limit]:
        for session in item["haystack_sessions"]:
            for turn in session:
                texts.setdefault(turn["content"], None)
    return list(texts)


def compare_corpus(old: ModuleType) -> None:
    """Leaks of the audit corpus per class, old and new redactor, both levels."""
    corpus = harness.test_module("redaction_corpus")
    AUDIT_CLASSES, audit_corpus, azure_tool_calls = (
        corpus.AUDIT_CLASSES,
        corpus.audit_corpus,
        corpus.azure_tool_calls,
    )

    items = [(cls, value, text) for cls, value, text in audit_corpus().values()]
    items += [("azure_client_secret", value, args) for value, args in azure_tool_calls()]
    print(
        f"audit corpus: {len(items)} items; leaks per class"
        " (old standard / new standard / old strict / new strict)"
    )
    for cls in AUDIT_CLASSES:
        row = [sum(1 for c, _, _ in items if c == cls)]
        for level in ("standard", "strict"):
            for redactor in (old.Redactor(level), Redactor(level)):
                row.append(sum(1 for c, v, t in items if c == cls and v in redactor.redact_obj(t)))
        print(f"    {cls}: of {row[0]}: {row[1]} / {row[2]} / {row[3]} / {row[4]}")


def compare_dev(old: ModuleType, texts: list[str], level: str) -> None:
    """Words kept by the old and the new redactor on the same texts, and what changed."""
    results: dict[str, list[tuple[str, str]]] = {}
    for name, redactor in (("old", old.Redactor(level)), ("new", Redactor(level))):
        t = time.perf_counter()
        pairs = [(text, redactor.redact(text)) for text in texts]
        elapsed = time.perf_counter() - t
        results[name] = pairs
        report(
            f"LongMemEval dev haystack ({len(texts)} turns), {level}, {name}", pairs, _samples(pairs), elapsed
        )
    changed = [
        (before, a, b) for (before, a), (_, b) in zip(results["old"], results["new"], strict=True) if a != b
    ]
    print(f"    texts redacted differently: {len(changed)}")
    for _before, a, b in changed[:40]:
        gone = Counter(a.split()) - Counter(b.split())
        back = Counter(b.split()) - Counter(a.split())
        print(f"      new masks {' '.join(back)[:70]!r} over {' '.join(gone)[:90]!r}")


def added_rule_spans(old: ModuleType, texts: list[str]) -> None:
    """What the rules this change adds or widens find on the whole haystack, rules alone."""
    old_rules = sys.modules["baseline_redact_rules"]
    new_assign = next(r for r in redact_rules.RULES["secret"] if isinstance(r, redact_rules._AssignmentRule))
    old_assign = next(r for r in old_rules.RULES["secret"] if type(r).__name__ == "_AssignmentRule")
    azure = next(
        r for r in redact_rules.RULES["api_key"] if "Q~" in getattr(getattr(r, "regex", None), "pattern", "")
    )
    rules: dict[str, Any] = {
        "password in a sentence": redact_rules._PasswordSentenceRule(),
        "key named by its sentence": redact_rules._NamedKeyRule(),
        "azure client secret": azure,
    }
    t = time.perf_counter()
    lost = 0  # spans the old assignment rule found and the new one does not
    found: dict[str, list[str]] = {
        name: [] for name in [*rules, "assignment (nested, new spans)", "private_key_id"]
    }
    for text in texts:
        for name, rule in rules.items():
            found[name] += [text[max(0, a - 40) : a] + "[[" + text[a:b] + "]]" for a, b in rule.spans(text)]
        new_spans, old_spans = set(new_assign.spans(text)), set(old_assign.spans(text))
        extra = new_spans - old_spans
        lost += len(old_spans - new_spans)
        found["assignment (nested, new spans)"] += [
            text[max(0, a - 40) : a] + "[[" + text[a:b] + "]]" for a, b in extra
        ]
        if "private_key_id" in text or "privateKeyId" in text:
            found["private_key_id"].append(text[:60])
    print(f"added rules alone on {len(texts)} turns ({time.perf_counter() - t:.1f} s):")
    for name, hits in found.items():
        print(f"    {name}: {len(hits)} spans")
        for hit in hits[:20]:
            print(f"        {hit.replace(chr(10), ' ')!r}")
    print(f"    assignment spans the old rule found and the new one does not: {lost}")


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--dev", type=Path, default=DEV)
    ap.add_argument("--limit", type=int, default=None, help="questions of the dev set to read")
    ap.add_argument("--skip-demo", action="store_true")
    ap.add_argument(
        "--compare", metavar="REV", help="also run the redactor of git revision REV, side by side"
    )
    args = harness.parse(ap, {"limit": 3, "skip_demo": True, "compare": "HEAD"})
    harness.header("bench_redaction")
    if args.compare:
        old = load_baseline(args.compare)
        compare_corpus(old)
        if args.dev.exists():
            added_rule_spans(old, _dev_texts(args.dev, None))
            subset = _dev_texts(args.dev, args.limit)
            for level in ("standard", "strict"):
                compare_dev(old, subset, level)
        return
    for level in ("standard", "strict"):
        if not args.skip_demo:
            bench_demo(level)
        if args.dev.exists():
            bench_dev(args.dev, level, args.limit)
        else:
            print(f"dev set {args.dev} not found; skipped")


if __name__ == "__main__":
    main()
