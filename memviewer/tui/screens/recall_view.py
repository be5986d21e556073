"""Pure rendering helpers for the Recall screen (kept apart so they are testable
without a running app): score breakdowns, the trace, result detail."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from memviewer.present.snippets import text_or_tool_calls
from memviewer.present.why_view import demotions
from memviewer.timeutil import utc_minutes
from memviewer.tui.formatting import json_text, long_time, one_line, printable

BREAKDOWN_ORDER = (
    "dense",
    "keyword",
    "recency",
    "bm25",
    "coverage",
    "rerank",
    "pre_rerank",
    "best_turn",
    "window",
)


def breakdown_text(breakdown: dict[str, Any] | None, score: float | None = None) -> Text:
    """``dense 0.812 · keyword 0.400 · … → 0.623`` with the known parts first."""
    out = Text()
    parts = dict(breakdown or {})
    keys = [k for k in BREAKDOWN_ORDER if k in parts] + sorted(k for k in parts if k not in BREAKDOWN_ORDER)
    for i, key in enumerate(keys):
        if i:
            out.append(" · ", style="dim")
        out.append(f"{printable(key)} ", style="cyan")
        value = parts[key]
        out.append(f"{value:.3f}" if isinstance(value, int | float) else printable(value))
    if score is not None:
        out.append("  → ", style="dim")
        out.append(f"{score:.3f}", style="bold green")
    return out


def result_detail(result: dict[str, Any]) -> Text:
    out = Text()
    out.append(printable(f"#{result.get('index')} {result.get('role')}"), style="bold")
    out.append(f"  {long_time(result.get('timestamp'))}", style="dim")
    out.append(printable(f"  session {result.get('session_id')}"), style="blue")
    if result.get("archived"):
        out.append("  archived", style="magenta")
    out.append("\nscore  ")
    out.append_text(breakdown_text(result.get("score_breakdown"), result.get("score")))
    for text in demotions(result.get("score_breakdown")):  # "question 1.000" alone says nothing
        out.append("\ndemoted  ", style="yellow")
        out.append(text)
    out.append("\n\n")
    out.append(printable(text_or_tool_calls(result.get("content"), result.get("tool_calls"))))
    meta = result.get("metadata") or {}
    if meta:
        out.append("\n\nmetadata\n", style="dim")
        out.append_text(json_text(meta))
    return out


def trace_text(
    result: dict[str, Any], elapsed_ms: float | None = None, *, as_of: float | None = None
) -> Text:
    """Escalations, counts at each stage, timings and the effective parameters.

    ``as_of`` (epoch seconds) is the moment of asking when one was set: shown so a
    replayed question that names no relative date says so instead of staying silent.
    """
    diag = result.get("diagnostics") or {}
    out = Text()
    escalations = diag.get("escalations") or []
    out.append("escalations  ", style="bold")
    if escalations:
        out.append(", ".join(escalations), style="bold yellow")
    else:
        out.append("none", style="green")
    out.append("\nmode         ", style="bold")
    out.append(printable(diag.get("mode", "hierarchical")))
    searched = diag.get("search_query")
    if isinstance(searched, str) and searched != result.get("query"):
        out.append("\nsearched     ", style="bold")
        out.append(printable(f"“{searched}”"))
        out.append(
            "  (the names of this chat's people taken out; the name prior reads the question)", style="dim"
        )
    stage1 = diag.get("stage1") or []
    out.append("\nstages       ", style="bold")
    out.append(
        f"stage 1: {len(stage1)} sessions  →  stage 2: {_count(diag.get('stage2_candidates'))} candidates"
        f"  →  post-filter kept {_count(diag.get('post_filter'))}"
        f" (dropped {_count(diag.get('dropped'))}, over the per-session cap {_count(diag.get('capped'))})"
        f"  →  {len(result.get('results') or [])} results"
    )
    if as_of is not None:
        out.append("\nas of        ", style="bold")
        out.append(f"{utc_minutes(as_of)} UTC")
    window = diag.get("time_window")
    if window:
        out.append("\ntime         ", style="bold")
        out.append(
            printable(
                f"“{window.get('phrase')}” → {window.get('start')} … {window.get('end')} "
                f"(± {window.get('slack_days')} days decay)"
            )
        )
    elif as_of is not None:
        off = (diag.get("params") or {}).get("w_time") == 0
        out.append(
            "  (w_time is 0: dates ignored)" if off else "  (the query names no relative date)", style="dim"
        )
    out.append_text(_speaker_line(result, diag))
    out.append("\nrerank       ", style="bold")
    out.append("reranked" if diag.get("reranked") else "not reranked (blended score order)")
    if diag.get("rerank_error"):
        out.append(printable(f"  reranker failed, order kept: {diag['rerank_error']}"), style="red")
    timings = diag.get("timings_ms") or {}
    if timings:
        out.append("\ntimings ms   ", style="bold")
        out.append(printable("  ".join(f"{k} {float(v):.1f}" for k, v in timings.items())))
    if elapsed_ms is not None:
        out.append(f"  (screen round trip {elapsed_ms:.0f})", style="dim")
    for key in ("params", "index"):
        if diag.get(key):
            out.append(f"\n{key:<13}", style="bold")
            out.append(printable("  ".join(f"{k}={v}" for k, v in diag[key].items())), style="dim")
    if diag.get("stale"):
        out.append(
            f"\nstale        {len(diag['stale'])} indexed turns no longer in SQLite (run reindex)",
            style="yellow",
        )
    return out


def _speaker_line(result: dict[str, Any], diag: dict[str, Any]) -> Text:
    """The speaker hint read from the query (recall's own rule), next to the date hint."""
    from memviewer.present.speaker import addressed_speaker

    out = Text("\nspeaker      ", style="bold")
    whose = addressed_speaker(str(result.get("query") or ""))
    share = (diag.get("params") or {}).get("w_speaker")
    named = any("speaker" in (r.get("score_breakdown") or {}) for r in result.get("results") or [])
    if whose is None and named:
        out.append("names a person of this chat: the turns they wrote are favoured")
        if share is not None:
            out.append(f" (w_speaker {share})", style="dim")
    elif whose is None:
        out.append("the query names no speaker", style="dim")
    elif share == 0:
        out.append(f"asks about the {whose}'s words (w_speaker is 0: ignored)", style="dim")
    else:
        out.append(f"asks about the {whose}'s words: their turns are favoured")
        if share is not None:
            out.append(f" (w_speaker {share})", style="dim")
    return out


def _count(value: Any) -> int:
    if isinstance(value, list | tuple):
        return len(value)
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def summary_cell(summary: str | None, width: int = 90) -> Text:
    return Text(one_line(summary or "", width))
