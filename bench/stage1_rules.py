"""Stage-1 session rules for chats, replayed offline on recall traces (REALTALK).

    python -m bench stage1_rules dump FILE HOME --cache-dir DIR --out traces.json.gz
    python -m bench stage1_rules replay traces.json.gz --half tune

``dump`` runs hierarchical recall once per question on a home kept by ``eval realtalk
--keep-home`` and writes, per question, every Stage-1 candidate session with its score parts
(``RecallTrace.sessions_ranked``) and every scored Stage-2 turn (``RecallTrace.scored``).
``replay`` recomputes Stage 1, the chat pool rules (M = 10, session prior 0.2) and the top 10
from those traces under other Stage-1 rules, so a rule is measured in a second instead of a
recall run per question. The replay copies recall's chat formulas (``recall.stage1.rank_sessions``,
``recall.pool.post_filter`` and ``recall.pool.session_prior``), so it first checks that the default
rule reproduces recall's own Stage-1 sessions and final top 10 for every question and stops if
not (a change to recall's scoring needs the same change here). Flat's sessions are the first
distinct sessions of the same scored list (flat mode scores the same candidates).
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from bench import harness

K, M, PRIOR, TURN_W, TIME_W = 5, 10, 0.2, 0.6, 0.1
CHAT_DENSE = 0.7  # recall.tuning TUNING_DEFAULTS["chat_dense_share"]: a chat's summary blend


def dump(file: str, home: str, cache_dir: str, out: str) -> None:
    from memviewer.config import load_settings
    from memviewer.eval import conversations as ev
    from memviewer.eval.embed_cache import CachedEmbedder
    from memviewer.index.embedder import OnnxEmbedder
    from memviewer.recall.trace import RecallTrace
    from memviewer.service import MemoryService

    settings = load_settings(env={}, home=home, retention="keep_all")
    cache = CachedEmbedder(OnnxEmbedder(settings.model_dir), cache_dir)
    svc = MemoryService(settings, embedder=cache)
    rows = []
    try:
        for ci, conv in enumerate(ev.load_conversations(file)):
            as_of = max(t.ts for s in conv.sessions for t in s.turns) + 3600
            for q in conv.questions:
                gold = ev.gold_of(conv, q)
                if not gold.turns:
                    continue
                tr = RecallTrace()
                res = svc.recall(q.question, scope=ev.SCOPE, scope_id=conv.id, as_of=as_of, trace=tr)
                rows.append(
                    {
                        "conv": ci,
                        "question": q.question,
                        "gold_turns": sorted(gold.turns),
                        "gold_sessions": sorted(gold.sessions),
                        "stage1": [s["session_id"] for s in res["diagnostics"]["stage1"]],
                        "results": [r["turn_id"] for r in res["results"]],
                        "dated": res["diagnostics"]["time_window"] is not None,
                        "ranked": [[s["session_id"], s["score_breakdown"]] for s in tr.sessions_ranked],
                        "scored": [[c["turn_id"], c["session_id"], c["score"]] for c in tr.scored],
                    }
                )
    finally:
        cache.save()
        svc.close()
    with gzip.open(out, "wt") as f:
        json.dump(rows, f)
    print(f"{len(rows)} questions -> {out}")


Rule = Callable[[dict[str, Any]], dict[str, float]]


def turn_part(r: dict[str, Any], top_n: int = 1) -> dict[str, float]:
    """A session's best scored turn (plus ½ the next, ¼ …), over the best one anywhere."""
    got: dict[str, list[float]] = defaultdict(list)
    for _, sid, score in r["scored"]:
        if len(got[sid]) < top_n:
            got[sid].append(score)
    v = {s: sum(x * 0.5**i for i, x in enumerate(xs)) for s, xs in got.items()}
    top = max(v.values(), default=0.0)
    return {s: x / top if top > 0 else 0.0 for s, x in v.items()}


def blend_rule(turn_w: float = TURN_W, dense_share: float = CHAT_DENSE, top_n: int = 1) -> Rule:
    def rule(r: dict[str, Any]) -> dict[str, float]:
        mx = max((b["bm25"] for _, b in r["ranked"]), default=0.0)
        tp = turn_part(r, top_n)
        out = {}
        for sid, b in r["ranked"]:
            summary = dense_share * b["dense"] + (1 - dense_share) * (b["bm25"] / mx if mx > 0 else 0.0)
            s = (1 - turn_w) * summary + turn_w * tp.get(sid, 0.0)
            out[sid] = (1 - TIME_W) * s + TIME_W * b.get("time", 0.0) if r["dated"] else s
        return out

    return rule


def flat_sessions(r: dict[str, Any], depth: int = 50) -> list[str]:
    return list(dict.fromkeys(sid for _, sid, _ in r["scored"][:depth]))


def top_sessions(score: dict[str, float], k: int = K) -> list[str]:
    return sorted(score, key=lambda s: (-round(score[s], 6), s))[:k]


def final_turns(r: dict[str, Any], chosen: list[str], score: dict[str, float]) -> list[str]:
    top = max((score[s] for s in chosen), default=0.0)
    of = {s: score[s] / top if top > 0 else 0.0 for s in chosen}
    per: dict[str, int] = defaultdict(int)
    pool = []
    for tid, sid, sc in r["scored"][: len(chosen) * M * 3]:
        if sid in of and per[sid] < M:
            per[sid] += 1
            pool.append((tid, (1 - PRIOR) * sc + PRIOR * of[sid]))
    pool.sort(key=lambda x: -x[1])
    return [t for t, _ in pool[:10]]


def mass_rule(share: float, depth: int = 50) -> Rule:
    """The default blend, plus a share for how many of flat's top ``depth`` turns the session
    holds (an aggregate question's evidence is spread over many messages)."""
    base = blend_rule()

    def rule(r: dict[str, Any]) -> dict[str, float]:
        count: dict[str, int] = defaultdict(int)
        for _, sid, _ in r["scored"][:depth]:
            count[sid] += 1
        top = max(count.values(), default=1)
        return {s: (1 - share) * v + share * count.get(s, 0) / top for s, v in base(r).items()}

    return rule


def max_rule(lam: float) -> Rule:
    """max(default blend, λ · turn part): a strong turn cannot be pulled down by a weak summary."""
    base = blend_rule()

    def rule(r: dict[str, Any]) -> dict[str, float]:
        tp = turn_part(r)
        return {s: max(v, lam * tp.get(s, 0.0)) for s, v in base(r).items()}

    return rule


def rrf_rule(r: dict[str, Any]) -> dict[str, float]:
    """Reciprocal-rank fusion (k = 60) of the default Stage-1 ranking and flat's session ranking."""
    order = top_sessions(blend_rule()(r), 10**6)
    flat = {s: i for i, s in enumerate(flat_sessions(r, 10**6))}
    return {s: 1 / (60 + i) + 1 / (60 + flat.get(s, 999)) for i, s in enumerate(order)}


Select = Callable[[dict[str, Any], dict[str, float]], list[str]]


def select_top(r: dict[str, Any], score: dict[str, float]) -> list[str]:
    return top_sessions(score)


def fill_from_flat(n: int) -> Select:
    """The best K - n sessions of Stage 1, then flat's best sessions not chosen yet."""

    def select(r: dict[str, Any], score: dict[str, float]) -> list[str]:
        chosen = top_sessions(score, K - n)
        for s in flat_sessions(r, 10**6) + top_sessions(score, 10**6):
            if len(chosen) >= K:
                break
            if s not in chosen and s in score:
                chosen.append(s)
        return chosen

    return select


#: A question that asks for several things ("what foods does …", "share", "both", "how many").
AGGREGATE = re.compile(
    r"\b(what|which)\s+(\w+\s+){0,3}?(\w+s)\b.*\b(do|does|did|have|has)\b"
    r"|\b(how many|what kinds?|what types?|what sorts?|share|in common|usually|both|all the|list)\b",
    re.IGNORECASE,
)


def adaptive_k(aggregate_k: int, other_k: int) -> Select:
    """K sessions by the question's form (session R@5 still reads the first five)."""

    def select(r: dict[str, Any], score: dict[str, float]) -> list[str]:
        return top_sessions(score, aggregate_k if AGGREGATE.search(r["question"]) else other_k)

    return select


RULES: dict[str, tuple[Rule, Select]] = {
    "default (turn share 0.6)": (blend_rule(), select_top),
    **{f"turn share {w}": (blend_rule(turn_w=w), select_top) for w in (0.3, 0.4, 0.5, 1.0)},
    "best 2 turns, halving": (blend_rule(top_n=2), select_top),
    "best 3 turns, halving": (blend_rule(top_n=3), select_top),
    "summary dense share 0.25": (blend_rule(dense_share=0.25), select_top),
    "summary dense share 0.75": (blend_rule(dense_share=0.75), select_top),
    "flat fills the last slot": (blend_rule(), fill_from_flat(1)),
    "flat fills the last 2 slots": (blend_rule(), fill_from_flat(2)),
    "RRF with flat's ranking": (rrf_rule, select_top),
    "max(blend, 0.7 turn part)": (max_rule(0.7), select_top),
    "max(blend, 0.8 turn part)": (max_rule(0.8), select_top),
    "mass share 0.1": (mass_rule(0.1), select_top),
    "mass share 0.2": (mass_rule(0.2), select_top),
    "adaptive K: 6 aggregate, else 5": (blend_rule(), adaptive_k(6, 5)),
    "adaptive K: 8 aggregate, else 5": (blend_rule(), adaptive_k(8, 5)),
    "adaptive K: 5 aggregate, else 4": (blend_rule(), adaptive_k(5, 4)),
}


def replay(path: str, half: str, split: int) -> None:
    with gzip.open(path, "rt") as f:
        rows = json.load(f)
    default = RULES["default (turn share 0.6)"][0]
    bad = [r["question"] for r in rows if top_sessions(default(r)) != r["stage1"]]
    bad += [r["question"] for r in rows if final_turns(r, top_sessions(s := default(r)), s) != r["results"]]
    if bad:
        raise SystemExit(f"the replay does not reproduce recall on {len(bad)} questions, e.g. {bad[0]!r}")
    rows = [r for r in rows if half == "all" or (r["conv"] < split) == (half == "tune")]
    print(f"{len(rows)} questions ({half}); replay reproduces recall exactly")
    for name, (rule, select) in RULES.items():
        m: dict[str, list[float]] = defaultdict(list)
        for r in rows:
            score = rule(r)
            chosen = select(r, score)
            turns = final_turns(r, chosen, score)
            gs, gt = set(r["gold_sessions"]), set(r["gold_turns"])
            m["session R@5"].append(len(set(chosen[:K]) & gs) / len(gs))
            m["flat session R@5"].append(len(set(flat_sessions(r)[:K]) & gs) / len(gs))
            m["turn R@5"].append(len(set(turns[:5]) & gt) / len(gt))
            m["turn R@10"].append(len(set(turns) & gt) / len(gt))
        print(f"{name:34s} " + "  ".join(f"{k} {statistics.fmean(v):.4f}" for k, v in m.items()))


def main() -> int:
    ap = harness.parser(__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("file")
    d.add_argument("home")
    d.add_argument("--cache-dir", required=True)
    d.add_argument("--out", required=True)
    r = sub.add_parser("replay")
    r.add_argument("traces")
    r.add_argument("--half", choices=("tune", "holdout", "all"), default="tune")
    r.add_argument("--split", type=int, default=5)
    args = harness.parse(ap, needs="an evaluation file and a kept home, or recall traces")
    harness.header("stage1_rules")
    if args.cmd == "dump":
        dump(args.file, args.home, args.cache_dir, args.out)
    else:
        replay(args.traces, args.half, args.split)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
