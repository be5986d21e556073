"""Golden sets over a real store and LanceDB (``HashEmbedder``): scores equal a direct
computation, a deleted expected turn is reported, runs are kept with their parameters."""

from __future__ import annotations

import math
from typing import Any

import pytest
from why_data import QUERY, SCOPE, build, ids

from memviewer.errors import INVALID_ARGUMENT, NOT_FOUND, MemviewerError
from memviewer.eval import golden, metrics


@pytest.fixture
def data(service: Any) -> dict[str, Any]:
    return build(service)


def direct(ranked: list[str], expected: list[str]) -> dict[str, float]:
    """The metrics written out by hand for binary relevance."""
    hits = [i for i, t in enumerate(ranked, 1) if t in expected]
    dcg = sum(1 / math.log2(i + 1) for i in hits if i <= 10)
    idcg = sum(1 / math.log2(i + 1) for i in range(1, min(len(expected), 10) + 1))
    return {
        "recall@5": len([i for i in hits if i <= 5]) / len(expected),
        "recall@10": len([i for i in hits if i <= 10]) / len(expected),
        "mrr": 1 / hits[0] if hits else 0.0,
        "ndcg@10": dcg / idcg,
    }


def test_metrics_by_hand() -> None:
    ranked = ["a", "b", "c", "d", "e", "f"]
    assert metrics.recall_at(ranked, {"b", "f", "z"}, 5) == pytest.approx(1 / 3)
    assert metrics.reciprocal_rank(ranked, {"c", "f"}) == pytest.approx(1 / 3)
    assert metrics.ndcg_at(ranked, {"a"}, 10) == 1.0
    assert metrics.ndcg_at(ranked, {"b"}, 10) == pytest.approx(1 / math.log2(3))
    assert (
        metrics.hit_all_at(ranked, {"a", "e"}, 5) == 1.0 and metrics.hit_all_at(ranked, {"a", "f"}, 5) == 0.0
    )
    assert metrics.mean([]) is None


def test_eval_equals_direct_computation(data: dict[str, Any]) -> None:
    svc, turns = data["svc"], data["turns"]
    expected_a = [turns["dentist"][0], turns["garden"][-1], turns["garden"][1]]
    expected_b = [turns["lisbon"][1]]
    golden.add_case(svc, QUERY, expected_a, **SCOPE)
    golden.add_case(svc, "Lisbon hotel river", expected_b)
    report = golden.evaluate(svc, {"top_k": 8})
    ranked_a = ids(svc.recall(QUERY, **SCOPE, top_k=8))
    ranked_b = ids(svc.recall("Lisbon hotel river", top_k=8))
    want = [direct(ranked_a, expected_a), direct(ranked_b, expected_b)]
    assert report["cases"] == 2 and report["skipped"] == 0
    for case, w in zip(report["per_case"], want, strict=True):
        for m in golden.METRICS:
            assert case[m] == pytest.approx(w[m], abs=1e-4)
    for m in golden.METRICS:
        assert report[m] == pytest.approx((want[0][m] + want[1][m]) / 2, abs=1e-4)
    runs = golden.history(svc)
    assert len(runs) == 1 and runs[0]["run_id"] == report["run_id"] and runs[0]["params"]["top_k"] == 8
    assert runs[0]["model"] == svc.embedder.name and runs[0]["recall@10"] == report["recall@10"]
    golden.evaluate(svc, {"top_k": 3, "weights": {"dense": 1.0, "keyword": 0.0}})
    newest = golden.history(svc)
    assert [r["params"]["top_k"] for r in newest] == [3, 8] and newest[0]["params"]["w_dense"] == 1.0


def test_deleted_expected_turn_is_reported(data: dict[str, Any]) -> None:
    svc, turns = data["svc"], data["turns"]
    golden.add_case(svc, QUERY, [turns["dentist"][0], turns["dentist"][1]], **SCOPE)
    golden.add_case(svc, "Lisbon trip", [turns["lisbon"][0]])
    with svc.store.write() as tx:  # the turns go away after the cases were made
        tx.conn.exec_driver_sql(
            "DELETE FROM turns WHERE id IN (?, ?)", (turns["dentist"][1], turns["lisbon"][0])
        )
    report = golden.evaluate(svc, record=False)
    first, second = report["per_case"]
    assert first["status"] == "scored" and first["missing"] == [turns["dentist"][1]]
    assert first["expected"] == [turns["dentist"][0]]
    assert second["status"] == "skipped" and second["missing"] == [turns["lisbon"][0]]
    assert report["cases"] == 1 and report["skipped"] == 1 and "run_id" not in report
    assert golden.history(svc) == []


def test_bad_cases_are_refused(data: dict[str, Any]) -> None:
    svc, turns = data["svc"], data["turns"]
    with pytest.raises(MemviewerError) as exc:
        golden.evaluate(svc)
    assert exc.value.code == NOT_FOUND
    with pytest.raises(MemviewerError) as exc:
        golden.add_case(svc, QUERY, ["no-such-turn"])
    assert exc.value.code == NOT_FOUND
    with pytest.raises(MemviewerError) as exc:
        golden.add_case(svc, QUERY, [turns["elsewhere"][0]], **SCOPE)
    assert exc.value.code == INVALID_ARGUMENT
    with pytest.raises(MemviewerError):
        golden.add_case(svc, "  ", [turns["dentist"][0]])
    with pytest.raises(MemviewerError) as exc:
        golden.remove_case(svc, 42)
    assert exc.value.code == NOT_FOUND
    case = golden.add_case(svc, QUERY, [turns["dentist"][0], turns["dentist"][0]])
    assert case["turn_ids"] == [turns["dentist"][0]]
    golden.remove_case(svc, case["id"])
    assert golden.cases(svc) == []
