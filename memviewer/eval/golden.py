"""Golden sets: score recall on (query, expected turns) cases kept in the home.

``add_case`` checks that every expected turn exists (and lies in the case's
scope) before storing it. ``evaluate`` runs recall for each case with one set of
parameters, scores it with the shared metrics (``memviewer.eval.metrics``:
recall@5, recall@10, MRR, nDCG@10, binary relevance) and stores the run with
its parameters, model and time, so ``history`` can show runs side by side and a
regression after a change of weights or model is visible. An expected turn that
no longer exists is reported in its case (``missing``) and left out of the
score; a case with none left is ``skipped``, never a crash.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memviewer.errors import INVALID_ARGUMENT, NOT_FOUND, MemviewerError
from memviewer.eval import metrics
from memviewer.store import golden as table

if TYPE_CHECKING:
    from memviewer.service import MemoryService
    from memviewer.store.db import Connection

METRICS = ("recall@5", "recall@10", "mrr", "ndcg@10")


@contextlib.contextmanager
def _write(service: MemoryService) -> Iterator[Connection]:
    """A write transaction for the golden tables. A read-only service (a viewer or CLI
    beside a running hub) opens the store writable for just this: the golden tables are
    not memory, no event is written, and SQLite serialises the writers."""
    if not service.readonly:
        with service.store.write() as tx:
            yield tx.conn
        return
    from memviewer.service import open_store

    store = open_store(service.home)
    try:
        with store.write() as tx:
            yield tx.conn
    finally:
        store.close()


def add_case(
    service: MemoryService,
    query: str,
    turn_ids: Sequence[str],
    scope: str | None = None,
    scope_id: str | None = None,
) -> dict[str, Any]:
    if not isinstance(query, str) or not query.strip():
        raise MemviewerError(INVALID_ARGUMENT, "the query must be a non-empty string")
    wanted = list(dict.fromkeys(t.strip() for t in turn_ids if t and t.strip()))
    if not wanted:
        raise MemviewerError(
            INVALID_ARGUMENT, "a golden case needs at least one expected turn", hint="--turn ID"
        )
    for tid in wanted:
        service.check_turn(tid, scope, scope_id)
    with _write(service) as conn:
        return table.add_case(conn, query.strip(), wanted, scope or None, scope_id or None)


def cases(service: MemoryService) -> list[dict[str, Any]]:
    with service.store.read() as conn:
        return table.list_cases(conn)


def remove_case(service: MemoryService, case_id: int) -> None:
    with _write(service) as conn:
        if not table.remove_case(conn, case_id):
            raise MemviewerError(
                NOT_FOUND, f"no golden case {case_id}", hint="`memviewer golden list` shows the ids"
            )


def score_case(ranked: Sequence[str], expected: Sequence[str]) -> dict[str, float]:
    return {
        "recall@5": metrics.recall_at(ranked, expected, 5),
        "recall@10": metrics.recall_at(ranked, expected, 10),
        "mrr": metrics.reciprocal_rank(ranked, expected),
        "ndcg@10": metrics.ndcg_at(ranked, expected, 10),
    }


def evaluate(
    service: MemoryService, params: Mapping[str, Any] | None = None, *, record: bool = True
) -> dict[str, Any]:
    """Score every case with recall ``params``; stored as a run unless ``record=False``."""
    from memviewer.store import repos

    params = dict(params or {})
    params.pop("scope", None)
    params.pop("scope_id", None)
    all_cases = cases(service)
    if not all_cases:
        raise MemviewerError(
            NOT_FOUND,
            "there are no golden cases in this home",
            hint="add one: memviewer golden add 'QUERY' --turn ID",
        )
    with service.store.read() as conn:
        present = repos.get_turns(conn, sorted({t for c in all_cases for t in c["turn_ids"]}))
    per_case: list[dict[str, Any]] = []
    run_params: dict[str, Any] | None = None
    for case in all_cases:
        expected = [t for t in case["turn_ids"] if t in present]
        row: dict[str, Any] = {
            "id": case["id"],
            "query": case["query"],
            "scope": case["scope"],
            "scope_id": case["scope_id"],
            "expected": expected,
            "missing": [t for t in case["turn_ids"] if t not in present],
        }
        if not expected:
            per_case.append({**row, "status": "skipped", "reason": "every expected turn was deleted"})
            continue
        out = service.recall(case["query"], scope=case["scope"], scope_id=case["scope_id"], **params)
        if run_params is None:
            run_params = {"mode": out["diagnostics"]["mode"], **out["diagnostics"]["params"]}
        ranked = [r["turn_id"] for r in out["results"]]
        row["ranks"] = {t: (ranked.index(t) + 1 if t in ranked else None) for t in expected}
        row.update({k: round(v, 4) for k, v in score_case(ranked, expected).items()})
        per_case.append({**row, "status": "scored"})
    scored = [c for c in per_case if c["status"] == "scored"]
    report: dict[str, Any] = {
        "cases": len(scored),
        **{m: metrics.mean(c[m] for c in scored) for m in METRICS},
        "skipped": len(per_case) - len(scored),
        "per_case": per_case,
        "params": run_params or {k: v for k, v in params.items() if v is not None},
        "model": service.embedder.name,
        "ts": time.time(),
    }
    if record:
        with _write(service) as conn:
            report["run_id"] = table.add_run(
                conn,
                model=report["model"],
                params=report["params"],
                cases=report["cases"],
                metrics={m: report[m] for m in METRICS},
                per_case=per_case,
                ts=report["ts"],
            )
    return report


def history(service: MemoryService, limit: int | None = None) -> list[dict[str, Any]]:
    """Stored runs, newest first: ``{"run_id", "ts", "model", "params", "cases", <metrics>}``."""
    with service.store.read() as conn:
        runs = table.list_runs(conn, limit)
    return [
        {
            "run_id": r["id"],
            "ts": r["ts"],
            "model": r["model"],
            "params": r["params"],
            "cases": r["cases"],
            **{m: (r["metrics"] or {}).get(m) for m in METRICS},
        }
        for r in runs
    ]
