"""Plain rows of the golden run history, shared by ``eval golden --history`` and the viewer."""

from __future__ import annotations

from typing import Any

from memviewer.timeutil import iso

METRICS = ("recall@5", "recall@10", "mrr", "ndcg@10")
SHOWN_PARAMS = (
    "mode",
    "top_sessions",
    "chunks_per_session",
    "top_k",
    "w_dense",
    "w_keyword",
    "w_speaker",
    "w_time",
)


def fmt(value: Any) -> str:
    return "—" if value is None else f"{value:.3f}"


def history_rows(runs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """One row per run (newest first), with the parameters that differ from the run before it."""
    rows = []
    for i, r in enumerate(runs):
        before = runs[i + 1]["params"] if i + 1 < len(runs) else {}
        changed = [
            f"{k}={r['params'].get(k)}"
            for k in SHOWN_PARAMS
            if before and before.get(k) != r["params"].get(k)
        ]
        rows.append(
            (
                r["run_id"],
                iso(r["ts"]),
                r["model"],
                " ".join(
                    f"{k}={r['params'].get(k)}" for k in ("top_sessions", "chunks_per_session", "top_k")
                ),
                r["cases"],
                *(fmt(r[m]) for m in METRICS),
                ", ".join(changed),
            )
        )
    return rows


HISTORY_COLUMNS = ("run", "when", "model", "K M top_k", "cases", *METRICS, "changed")
