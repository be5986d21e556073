"""Recall's pool: the Stage-2 turns of the Stage-1 sessions, at most M each, and the rules a
chat's pool adds (the flat safety net, the session prior)."""

from __future__ import annotations

from typing import Any, cast


def post_filter(
    candidates: list[dict[str, Any]], sessions: list[dict[str, Any]], m: int, mmr: float = 0.0
) -> tuple[list[dict[str, Any]], int, list[dict[str, Any]], list[dict[str, Any]]]:
    """Keep Stage-1 sessions' turns, top ``m`` each, grouped in Stage-1 order."""
    order = {s["session_id"]: i for i, s in enumerate(sessions)}
    members: dict[str, list[dict[str, Any]]] = {sid: [] for sid in order}
    dropped = []
    for c in candidates:  # already best-first
        sid = c["session_id"]
        if sid not in members:
            dropped.append({"turn_id": c["turn_id"], "session_id": sid, "score": round(c["score"], 6)})
            continue
        members[sid].append(c)
    kept = sum(len(v) for v in members.values())
    pool: list[dict[str, Any]] = []
    capped: list[dict[str, Any]] = []
    for sid in sorted(members, key=order.__getitem__):
        picked = _pick(members[sid], m, mmr)
        ids = {c["turn_id"] for c in picked}
        pool.extend(sorted(picked, key=lambda c: -c["score"]))
        capped.extend(
            {"turn_id": c["turn_id"], "session_id": sid, "score": round(c["score"], 6)}
            for c in members[sid]
            if c["turn_id"] not in ids
        )
    return pool, kept, dropped, capped


def add_flat(pool: list[dict[str, Any]], candidates: list[dict[str, Any]], n: int) -> list[str]:
    """Append the best ``n`` candidates not pooled yet (they may come from any session);
    returns their turn ids."""
    have = {c["turn_id"] for c in pool}
    added = [c for c in candidates[:n] if c["turn_id"] not in have]
    pool.extend(added)
    return [c["turn_id"] for c in added]


def session_prior(pool: list[dict[str, Any]], sessions: list[dict[str, Any]], share: float) -> None:
    """``score *= (1 - share) + share * session score / best session score``: a turn keeps its
    own order against the turns of its session and loses at most ``share`` of its score for a
    weaker session (a product, not a sum: the sum lifted a top session's weak turns over a
    second answer from a lower one; REALTALK docs/benchmarks.md). A turn the safety net
    brought from a session outside Stage 1 takes the weakest Stage-1 session's part: with none,
    the prior would push the net's turns below everything it is meant to rescue."""
    top = max((s["score"] for s in sessions), default=0.0)
    of = {s["session_id"]: s["score"] / top if top > 0 else 0.0 for s in sessions}
    floor = min(of.values(), default=0.0)
    for i, c in enumerate(pool):
        c = pool[i] = {**c, "score_breakdown": dict(c["score_breakdown"])}
        part = of.get(c["session_id"], floor)
        c["score_breakdown"]["session"] = round(part, 6)
        c["score"] *= 1.0 - share + share * part


def _pick(group: list[dict[str, Any]], m: int, mmr: float) -> list[dict[str, Any]]:
    """Top ``m`` by score; with ``mmr`` > 0, penalise turns that repeat an already picked one."""
    if mmr <= 0 or len(group) <= m:
        return group[:m]
    import numpy as np

    picked: list[dict[str, Any]] = []
    rest = list(group)
    while rest and len(picked) < m:

        def value(c: dict[str, Any]) -> float:
            if not picked:
                return cast("float", c["score"])
            return cast("float", c["score"] - mmr * max(float(np.dot(c["_vec"], p["_vec"])) for p in picked))

        best = max(rest, key=value)
        picked.append(best)
        rest.remove(best)
    return picked
