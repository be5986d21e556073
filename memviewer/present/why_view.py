"""Plain-text lines of a ``why`` object (recall --why), shared by the CLI and the viewer."""

from __future__ import annotations

from typing import Any

from memviewer.words import plural


def short(text: str | None, n: int = 60) -> str:
    s = " ".join((text or "").split())
    return s if len(s) <= n else s[: n - 1] + "…"


def _rank(entry: dict[str, Any] | None) -> str:
    if not entry or entry.get("rank") is None:
        return "—"
    score = entry.get("score")
    return f"#{entry['rank']}" + (f" ({score:.3f})" if isinstance(score, (int, float)) else "")


def _mark(passed: bool | None) -> str:
    return {True: "✓", False: "✗", None: "·"}[passed]


#: Stage-2 rules that lower a turn's score, as the ``score_breakdown`` key each one sets.
DEMOTIONS = {
    "question": (
        "it only asks (a chat: chat_question_penalty; an agent's request to recall: question_penalty)"
    ),
    "echo": "a question echoing the query (echo_penalty)",
    "short": "a short message (chat_length_prior / length_prior)",
}


def demotions(breakdown: dict[str, Any] | None) -> list[str]:
    """What each demoting rule that fired on a turn did, with its tuning key (``DEMOTIONS``):
    ``score_breakdown`` holds only the rule's key and number, which do not say why."""
    return [text for key, text in DEMOTIONS.items() if (breakdown or {}).get(key)]


def _demoted(breakdown: dict[str, Any] | None) -> str:
    """``"; demoted: …"`` for the demoting rules that fired on the turn, else ``""``."""
    fired = demotions(breakdown)
    return "; demoted: " + "; ".join(fired) if fired else ""


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
                ) + _demoted(s2.get("score_breakdown"))
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
            if s.get("reason"):
                detail += f"; {s['reason']}"
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


def verdict(why: dict[str, Any]) -> str:
    """One line: retrieved at #n, or where it was eliminated."""
    if why["retrieved"]:
        return f"retrieved at #{why['rank']}"
    return f"not retrieved; eliminated at {why['eliminated_at']}"


def fix_line(why: dict[str, Any]) -> str:
    """The verified fix (``key=value`` pairs) or that none was found."""
    if why["retrieved"]:
        return ""
    if why.get("fix"):
        change = ", ".join(f"{k}={v}" for k, v in why["fix"].items())
        return f"fix: {change} (re-run: retrieved at #{why['fix_rank']}; {plural(why['reruns'], 're-run')})"
    return f"fix: none found ({plural(why.get('reruns', 0), 're-run')} of recall)"
