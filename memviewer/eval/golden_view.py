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


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(b - a, 4)


def _change(a: dict[str, Any], b: dict[str, Any]) -> str:
    """``up`` when B scores the case better (nDCG@10 first, then MRR, recall@10, recall@5)."""
    if a["status"] != "scored" or b["status"] != "scored":
        return "skipped"
    order = ("ndcg@10", "mrr", "recall@10", "recall@5")
    ka, kb = tuple(a[m] for m in order), tuple(b[m] for m in order)
    return "up" if kb > ka else "down" if kb < ka else "same"


def compare_runs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """``eval golden --vs``: both runs and what changed, by average and by case (the shape of
    ``recall --vs``: ``a``, ``b``, ``diff``)."""
    b_cases = {c["id"]: c for c in b["per_case"]}
    per_case = []
    for ca in a["per_case"]:
        cb = b_cases[ca["id"]]
        per_case.append(
            {
                "id": ca["id"],
                "query": ca["query"],
                "change": _change(ca, cb),
                "a": {"ranks": ca.get("ranks"), **{m: ca.get(m) for m in METRICS}},
                "b": {"ranks": cb.get("ranks"), **{m: cb.get(m) for m in METRICS}},
            }
        )
    return {"a": a, "b": b, "diff": {**{m: _delta(a[m], b[m]) for m in METRICS}, "per_case": per_case}}


ARROWS = {"up": "↑", "down": "↓", "same": "=", "skipped": "skipped"}
COMPARE_COLUMNS = ("case", "query", "found A", "found B", "mrr A", "mrr B", "ndcg@10 A", "ndcg@10 B", "B")


def _found(ranks: dict[str, Any] | None, expected: int) -> str:
    return f"{sum(1 for r in (ranks or {}).values() if r)}/{expected}"


def compare_rows(ab: dict[str, Any]) -> list[tuple[Any, ...]]:
    """One row per case: A and B side by side, and B's change (↑ ↓ =)."""
    expected = {c["id"]: len(c["expected"]) for c in ab["a"]["per_case"]}
    return [
        (
            d["id"],
            d["query"],
            _found(d["a"]["ranks"], expected[d["id"]]),
            _found(d["b"]["ranks"], expected[d["id"]]),
            fmt(d["a"]["mrr"]),
            fmt(d["b"]["mrr"]),
            fmt(d["a"]["ndcg@10"]),
            fmt(d["b"]["ndcg@10"]),
            ARROWS[d["change"]],
        )
        for d in ab["diff"]["per_case"]
    ]


def metric_rows(ab: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """The averages of A and B and B − A (signed), one metric a row."""
    out = []
    for m in METRICS:
        d = ab["diff"][m]
        out.append((m, fmt(ab["a"][m]), fmt(ab["b"][m]), "—" if d is None else f"{d:+.3f}"))
    return out
