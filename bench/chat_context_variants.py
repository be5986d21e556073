"""Contextual text for chat turns (issue 16): re-embed a kept REALTALK home's chat turns by one
rule of ``bench/chat_context_rules.py`` and score recall on it.

    python -m bench chat_context_variants FILE HOME_COPY --cache-dir DIR --mode prev [--bm25] \\
        [--text-mode RULE] [--second-mode RULE [--second-score max]] [--short-words N] \\
        [--tuning KEY=VALUE] [--half tune] [--system hierarchical --system flat] [--json]

``HOME_COPY`` must be a *copy* of a home kept by ``eval realtalk --keep-home`` (its LanceDB
turns are rewritten in place): the vectors of the turns of the evaluated half's conversations
are replaced by embeddings of ``chat_context.embed_text(..., mode)``; with ``--bm25`` the
``text`` column the full-text index reads carries the same text (results are still hydrated
from SQLite, so what a user sees does not change); ``--text-mode`` gives that column its own
rule. ``--second-mode RULE`` also embeds the turns by ``RULE`` into a second table whose dense
top hits only add Stage-2 candidates (scored by the first vector, or with ``--second-score max``
by the closer of the two). Mode ``off`` re-writes the plain texts (the baseline, and a check
that the script itself changes nothing). Prints one line of metrics per
system and the time the embedding took; ``--json`` writes the report to stdout.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from bench import chat_context_rules as chat_context
from bench import harness


def main() -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("file")
    ap.add_argument("home")
    ap.add_argument("--cache-dir", required=True)
    ap.add_argument("--mode", required=True)
    ap.add_argument("--bm25", action="store_true", help="the full-text column carries the text too")
    ap.add_argument(
        "--text-mode",
        default=None,
        help="rule for the full-text column (default: --mode with --bm25, else off)",
    )
    ap.add_argument(
        "--tuning", action="append", default=[], help="KEY=VALUE recall tuning on top of the defaults"
    )
    ap.add_argument("--half", choices=("tune", "holdout", "all"), default="tune")
    ap.add_argument("--split", type=int, default=None)
    ap.add_argument("--system", action="append", default=None)
    ap.add_argument("--second-score", choices=("first", "max"), default="first")
    ap.add_argument("--short-words", type=int, default=None)
    ap.add_argument(
        "--second-mode",
        default=None,
        help="also embed the turns by this rule into a second table whose dense top hits only "
        "add candidates (scored with the first vector as before)",
    )
    ap.add_argument("--json", action="store_true")
    args = harness.parse(ap, needs="a kept REALTALK home")
    harness.header("chat_context_variants")
    if Path(args.home).resolve().is_relative_to("/work/cache"):
        sys.exit("refusing to rewrite a shared kept home: give a copy")

    from memviewer.config import load_settings
    from memviewer.eval import conversations as ev
    from memviewer.eval.embed_cache import CachedEmbedder
    from memviewer.index.embedder import OnnxEmbedder
    from memviewer.index.lance import TURNS, LanceIndex, in_filter
    from memviewer.service import MemoryService

    if args.mode not in chat_context.RULES or (args.text_mode or "off") not in chat_context.RULES:
        sys.exit(f"--mode and --text-mode must be one of {', '.join(chat_context.RULES)}")
    data = ev.load_conversations(args.file)
    split = args.split or (len(data) + 1) // 2
    data = {"tune": data[:split], "holdout": data[split:], "all": data}[args.half]
    convs = [c.id for c in data]

    settings = load_settings(env={}, home=args.home, retention="keep_all")
    cache = CachedEmbedder(OnnxEmbedder(settings.model_dir), args.cache_dir)
    db = sqlite3.connect(Path(args.home) / "memviewer.db")
    db.row_factory = sqlite3.Row
    marks = ",".join("?" * len(convs))
    rows = [
        dict(r)
        for r in db.execute(
            "SELECT t.id, t.session_id, t.idx, t.content, t.meta FROM turns t JOIN sessions s"
            f" ON s.id = t.session_id WHERE s.scope_id IN ({marks}) ORDER BY t.session_id, t.idx",
            convs,
        )
    ]
    db.close()
    near = chat_context.neighbours(rows)

    def texts_of(mode: str) -> list[str]:
        return [
            chat_context.embed_text(
                str(r["content"]),
                chat_context.author(r["meta"]),
                near.get((r["session_id"], int(r["idx"]) - 1)),
                near.get((r["session_id"], int(r["idx"]) + 1)),
                mode,
                args.short_words or chat_context.SHORT_WORDS,
            )
            for r in rows
        ]

    texts = texts_of(args.mode)
    text_mode = args.text_mode or (args.mode if args.bm25 else "off")
    fts_texts = dict(zip([r["id"] for r in rows], texts_of(text_mode), strict=True))
    t0 = time.perf_counter()
    misses0 = cache.misses
    vectors = cache.embed(texts)
    embed_s = time.perf_counter() - t0
    cache.save()
    new = {r["id"]: (t, v) for r, t, v in zip(rows, texts, vectors, strict=True)}

    index = LanceIndex(Path(args.home) / "lance")
    ids = list(new)
    out_rows: list[dict[str, Any]] = []
    cols = ["turn_id", "num", "session_id", "episode_id", "scope", "scope_id", "role", "archived"]
    cols += ["is_summary", "timestamp", "text", "text_hash"]
    for i in range(0, len(ids), 500):
        for r in index.rows(TURNS, in_filter("turn_id", ids[i : i + 500]), cols):
            text, vec = new[r["turn_id"]]
            r["vector"] = vec
            r["text"] = fts_texts[r["turn_id"]]
            out_rows.append(r)
    with index.write_lock():
        index.upsert_turns(out_rows)
        index.optimize(keep_versions_s=0.0)
        if args.second_mode:
            second = cache.embed(texts_of(args.second_mode))
            by_id = dict(zip([r["id"] for r in rows], second, strict=True))
            index.db().create_table(
                SECOND, data=[{**r, "vector": by_id[r["turn_id"]]} for r in out_rows], mode="overwrite"
            )
    index.close()

    service = MemoryService(settings, embedder=cache)
    if args.second_mode:
        second_candidates(service.parts.lance, args.second_score == "max")
    systems = args.system or ["hierarchical", "flat"]
    try:
        t1 = time.perf_counter()
        tuning = {k: float(v) for k, _, v in (t.partition("=") for t in args.tuning)}
        kw: dict[str, Any] = {"tuning": tuning} if tuning else {}
        rep = ev.evaluate(service, data, systems=systems, **kw)
        eval_s = time.perf_counter() - t1
        reach = candidate_reach(service, data)
    finally:
        cache.save()
        service.close()
    label = (
        f"{args.mode}/{text_mode}"
        + (f"/w{args.short_words}" if args.short_words else "")
        + ("" if not args.tuning else "+" + ",".join(args.tuning))
        + (f"+2nd:{args.second_mode}/{args.second_score}" if args.second_mode else "")
    )
    for s in systems:
        g = rep["systems"][s]["all"]
        print(
            f"{label:16s} {args.half:7s} {s:12s} R@5 {g['turn_r@5']:.4f} R@10 {g['turn_r@10']:.4f} "
            f"sR@5 {g['session_r@5']:.4f} any@5 {g['session_any@5']:.4f} MRR {g['mrr']:.4f}",
            flush=True,
        )
    print(
        f"{label:16s} evidence among Stage-2 candidates (top 100 each): dense {reach['dense']:.4f}"
        f" bm25 {reach['bm25']:.4f} union {reach['union']:.4f}",
        flush=True,
    )
    print(
        f"{label:16s} {len(rows)} turns, {cache.misses - misses0} embedded in {embed_s:.0f}s, "
        f"eval {eval_s:.0f}s",
        flush=True,
    )
    if args.json:
        json.dump(
            {
                "mode": label,
                "half": args.half,
                "reach": reach,
                "systems": rep["systems"],
                "questions": rep["questions"],
            },
            sys.stdout,
        )
    return 0


SECOND = "turns_second"


def second_candidates(index: Any, score_max: bool = False) -> None:
    """Make ``index.dense`` over the turns also return the second table's nearest turns (as the
    first table's rows, so recall scores them with their first vector). With ``score_max`` every
    turn row recall reads (dense and BM25 hits) carries whichever of its two vectors is closer
    to the query, so the dense part of its score is the better of the two cosines."""
    import numpy as np

    from memviewer.index.lance import TURNS, in_filter

    first, fulltext = index.dense, index.fulltext
    last: dict[str, Any] = {}

    def closer(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        q = last.get("q")
        if not score_max or q is None or not rows:
            return rows
        other = index.vectors(SECOND, "turn_id", [r["turn_id"] for r in rows if "vector" in r])
        for r in rows:
            v2 = other.get(r["turn_id"])
            if v2 is not None and float(v2 @ q) > float(np.asarray(r["vector"], dtype=np.float32) @ q):
                r["vector"] = v2
        return rows

    def dense(
        name: str, vector: Any, where: str | None, limit: int, columns: Any, *, use_ann: bool = False
    ) -> list[dict[str, Any]]:
        rows = first(name, vector, where, limit, columns, use_ann=use_ann)
        if name != TURNS:
            return rows
        last["q"] = np.asarray(vector, dtype=np.float32)
        have = {r["turn_id"] for r in rows}
        extra = [
            r["turn_id"] for r in first(SECOND, vector, where, limit, ["turn_id"]) if r["turn_id"] not in have
        ]
        if extra:
            cols = list(dict.fromkeys([*columns, "vector"]))
            for r in index.rows(TURNS, in_filter("turn_id", extra), cols):
                r["_distance"] = 1.0 - float(np.asarray(r["vector"], dtype=np.float32) @ vector)
                rows.append(r)
        return closer(rows)

    def keyword(name: str, query: str, where: str | None, limit: int, columns: Any) -> list[dict[str, Any]]:
        rows = fulltext(name, query, where, limit, columns)
        return closer(rows) if name == TURNS else rows

    index.dense = dense
    index.fulltext = keyword


DEPTH = 100  # recall's Stage-2 candidate depth for chats (dense top 100, BM25 top 100)


def candidate_reach(service: Any, data: Any) -> dict[str, float]:
    """Mean share of a question's evidence turns among the dense top 100, the BM25 top 100 and
    their union of its conversation: what Stage 2 can rank at all."""
    import numpy as np

    from memviewer.eval import conversations as ev
    from memviewer.index.lance import TURNS, scope_filter
    from memviewer.recall import lexical

    index = service.parts.lance
    got: dict[str, list[float]] = {"dense": [], "bm25": [], "union": []}
    for conv in data:
        where = scope_filter(ev.SCOPE, conv.id)
        for q in conv.questions:
            gold = ev.gold_of(conv, q).turns
            if not gold:
                continue
            qvec = np.asarray(service.embedder.embed([q.question])[0], dtype=np.float32)
            d = {r["turn_id"] for r in index.dense(TURNS, qvec, where, DEPTH, ["turn_id"])}
            b = {r["turn_id"] for r in lexical.turn_hits(index, q.question, where, DEPTH, ["turn_id"])}
            for key, ids in (("dense", d), ("bm25", b), ("union", d | b)):
                got[key].append(len(ids & gold) / len(gold))
    return {k: sum(v) / len(v) for k, v in got.items()}


if __name__ == "__main__":
    raise SystemExit(main())
