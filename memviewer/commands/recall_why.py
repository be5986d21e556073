"""Human output of ``recall --why`` (a turn's fate per stage) and ``recall --vs`` (A/B)."""

from __future__ import annotations

from typing import Any

import click

from memviewer.commands.common import print_table, short

ARROWS = {"up": "↑", "down": "↓", "same": "=", "new": "new", "dropped": "dropped"}


def _rank(entry: dict[str, Any] | None) -> str:
    if not entry or entry.get("rank") is None:
        return "—"
    score = entry.get("score")
    return f"#{entry['rank']}" + (f" ({score:.3f})" if isinstance(score, (int, float)) else "")


def _mark(passed: bool | None) -> str:
    return {True: "✓", False: "✗", None: "·"}[passed]


def stage_lines(why: dict[str, Any]) -> list[str]:
    """One line per stage: ✓ passed, ✗ eliminated there, · not reached / not used."""
    lines = []
    for s in why["stages"]:
        name, mark = s["stage"], _mark(s.get("passed"))
        if name == "index":
            if not s.get("passed"):
                detail = "not in the vector index. " + s.get("hint", "")
            else:
                s2 = s.get("stage2") or {}
                detail = (
                    f"over {s['scope_turns']} turns in scope: dense {_rank(s.get('dense'))}, "
                    f"keyword {_rank(s.get('keyword'))}, bm25 {_rank(s.get('bm25'))}; "
                    f"stage-2 blend {_rank(s2)} of {s2.get('scored', 0)} scored"
                )
        elif name == "stage1":
            if s.get("skipped"):
                detail = f"skipped ({s['skipped']})"
            else:
                detail = (
                    f"session {short(s['session_id'], 24)} {_rank(s)} of {s.get('candidates', 0)} "
                    f"candidates, K = {s['top_sessions']}"
                )
                if s.get("summary"):
                    detail += f"; summary: {short(s['summary'], 80)}"
        elif name == "pool":
            detail = f"stage-2 pool of {s['pool']}: " + (f"#{s['rank']}" if s.get("rank") else "not in it")
        elif name == "post_filter":
            detail = s.get("reason") or ("kept" if s.get("passed") else "not reached")
        elif name == "session_cap":
            detail = f"M = {s['chunks_per_session']}" + (
                f", #{s['rank_in_session']} of its session's {s.get('session_pool_turns')} pool turns"
                if s.get("rank_in_session")
                else ""
            )
        elif name == "rerank":
            if s.get("rank_before") is None:
                detail = "not reached"
            else:
                how = "reranked" if s.get("reranked") else "no reranker"
                detail = f"{how}: #{s['rank_before']} → #{s['rank_after']}"
            if s.get("error"):
                detail += f" (reranker failed: {s['error']})"
        else:
            detail = f"top_k = {s['top_k']}" + (f", at #{s['rank']}" if s.get("rank") else "")
            if s.get("rank_before_cut") and not s.get("rank"):
                detail += f", was #{s['rank_before_cut']} before the cut"
        lines.append(f"  {mark} {name:<12} {detail}")
    return lines


def human_why(why: dict[str, Any]) -> None:
    click.echo("")
    head = f"why {why['turn_id']}: "
    if why["retrieved"]:
        click.echo(head + f"retrieved at #{why['rank']}")
    else:
        click.echo(head + f"not retrieved; eliminated at {why['eliminated_at']}")
    for line in stage_lines(why):
        click.echo(line)
    if why["retrieved"]:
        return
    if why.get("fix"):
        flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in why["fix"].items())
        click.echo(f"fix: {flags}  (re-run: retrieved at #{why['fix_rank']}; {why['reruns']} re-runs)")
    else:
        click.echo(f"fix: none found ({why.get('reruns', 0)} re-runs of recall)")


def human_ab(svc: Any, ab: dict[str, Any]) -> None:
    """Each turn of either side with its rank in A and B and how it moved."""
    by_id = {r["turn_id"]: r for side in ("a", "b") for r in ab[side]["results"]}
    changed = {k: v for k, v in ab["b"]["params"].items() if ab["a"]["params"].get(k) != v}
    rows = []
    for d in ab["diff"]:
        r = by_id[d["turn_id"]]
        rows.append(
            (
                d["rank_a"] or "",
                d["rank_b"] or "",
                ARROWS[d["change"]],
                short(r["session_id"], 20),
                r["index"],
                short(" ".join(str(r["content"]).split()), 60),
            )
        )
    title = "A/B: B = A with " + (", ".join(f"{k}={v}" for k, v in changed.items()) or "no change")
    print_table(("A", "B", "", "session", "idx", "snippet"), rows, title=title)
    counts = {c: sum(1 for d in ab["diff"] if d["change"] == c) for c in ARROWS}
    click.echo(
        f"{counts['up']} ↑  {counts['down']} ↓  {counts['same']} =  "
        f"{counts['new']} new  {counts['dropped']} dropped"
    )
