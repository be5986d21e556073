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


def screen_rows(runs: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The viewer's form of ``history_rows``: minutes for the time, ``5 3 10`` under the
    ``K M top_k`` heading (the CLI's keys are long), one dict per run by column name."""
    from memviewer.timeutil import utc_minutes

    out = []
    for r, row in zip(runs, history_rows(runs), strict=True):
        cells = dict(zip(HISTORY_COLUMNS, (str(v) for v in row), strict=True))
        p = r["params"]
        cells["when"] = utc_minutes(r["ts"])
        cells["K M top_k"] = f"{p.get('top_sessions')} {p.get('chunks_per_session')} {p.get('top_k')}"
        out.append(cells)
    return out
