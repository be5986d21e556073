"""Why not this turn? Every ``eliminated_at`` value reached on purpose over a real store and a
real LanceDB index (``HashEmbedder``), and every fix checked by an independent re-run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from why_data import QUERY, SCOPE, build, ids

from memviewer.contract.compare import apply_overrides
from memviewer.errors import INVALID_ARGUMENT, NOT_FOUND, MemviewerError
from memviewer.index.lance import TURNS
from memviewer.recall.why import why_not


@pytest.fixture
def data(service: Any) -> dict[str, Any]:
    return build(service)


def stage(why: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in why["stages"] if s["stage"] == name)


def check_fix(svc: Any, turn_id: str, params: dict[str, Any], why: dict[str, Any]) -> None:
    """The reported fix, re-run independently, retrieves the turn at the reported rank."""
    assert why["fix"], why
    out = svc.recall(QUERY, **apply_overrides(params, why["fix"]))
    assert turn_id in ids(out)
    assert ids(out).index(turn_id) + 1 == why["fix_rank"]


def test_retrieved_turn_has_no_elimination(data: dict[str, Any]) -> None:
    svc = data["svc"]
    target = ids(svc.recall(QUERY, **SCOPE))[1]
    out, why = why_not(svc.parts, QUERY, target, SCOPE, reranker=svc.reranker)
    assert why["retrieved"] is True and why["eliminated_at"] is None and why["fix"] is None
    assert why["rank"] == 2 and ids(out)[1] == target
    assert all(s["passed"] is not False for s in why["stages"])


def test_not_indexed(data: dict[str, Any]) -> None:
    svc = data["svc"]
    target = data["turns"]["dentist"][1]
    svc.parts.lance.table(TURNS).delete(f"turn_id = '{target}'")  # the index lags behind SQLite
    _, why = why_not(svc.parts, QUERY, target, SCOPE, reranker=svc.reranker)
    assert why["eliminated_at"] == "not_indexed" and why["retrieved"] is False
    assert stage(why, "index")["passed"] is False and why["fix"] is None


def test_stage1_and_its_fix(data: dict[str, Any]) -> None:
    svc = data["svc"]
    target = data["turns"]["garden"][-1]  # the garden session's one dentist turn
    params = {**SCOPE, "top_sessions": 1, "chunks_per_session": 1}
    out, why = why_not(svc.parts, QUERY, target, params, reranker=svc.reranker)
    assert why["eliminated_at"] == "stage1"
    s1 = stage(why, "stage1")
    assert s1["passed"] is False and s1["rank"] > 1 and s1["summary"]
    assert "s-garden" not in [s["session_id"] for s in out["diagnostics"]["stage1"]]
    assert target not in [d["turn_id"] for d in out["diagnostics"]["dropped"]]  # not even in the pool
    check_fix(svc, target, params, why)
    assert set(why["fix"]) <= {"top_sessions", "chunks_per_session", "top_k"}


def test_post_filter(data: dict[str, Any]) -> None:
    svc = data["svc"]
    target = data["turns"]["garden"][-1]
    params = {**SCOPE, "top_sessions": 1, "chunks_per_session": 2}  # pool of 6 reaches it
    out, why = why_not(svc.parts, QUERY, target, params, reranker=svc.reranker)
    assert why["eliminated_at"] == "post_filter"
    assert stage(why, "pool")["passed"] is True and stage(why, "post_filter")["passed"] is False
    assert target in [d["turn_id"] for d in out["diagnostics"]["dropped"]]
    check_fix(svc, target, params, why)


def test_pool(data: dict[str, Any]) -> None:
    svc = data["svc"]
    # the dentist session's weakest turn, found by a wide run (not hard-coded)
    wide = svc.recall(QUERY, **SCOPE, top_sessions=1, chunks_per_session=10)
    target = [t for t in ids(wide) if t in data["turns"]["dentist"]][-1]
    params = {**SCOPE, "top_sessions": 1, "chunks_per_session": 1}  # pool of 3
    out, why = why_not(svc.parts, QUERY, target, params, reranker=svc.reranker)
    assert why["eliminated_at"] == "pool"
    assert stage(why, "stage1")["passed"] is True and stage(why, "pool")["passed"] is False
    assert stage(why, "index")["stage2"]["rank"] > out["diagnostics"]["params"]["pool"]
    check_fix(svc, target, params, why)
    # smallest: one step less of the same parameter does not retrieve it
    ((key, value),) = why["fix"].items()
    assert target not in ids(svc.recall(QUERY, **{**params, key: value - 1}))


def test_session_cap(data: dict[str, Any]) -> None:
    svc = data["svc"]
    wide = svc.recall(QUERY, **SCOPE, top_sessions=1, chunks_per_session=10)
    target = [t for t in ids(wide) if t in data["turns"]["dentist"]][2]  # its session's third best
    params = {**SCOPE, "top_sessions": 1, "chunks_per_session": 2}
    out, why = why_not(svc.parts, QUERY, target, params, reranker=svc.reranker)
    assert why["eliminated_at"] == "session_cap"
    cap = stage(why, "session_cap")
    assert cap["passed"] is False and cap["rank_in_session"] == 3
    assert target in [c["turn_id"] for c in out["diagnostics"]["capped"]]
    check_fix(svc, target, params, why)
    assert why["fix"] == {"chunks_per_session": 3}


class Demote:
    """A reranker that scores one text 0 and every other 1."""

    def __init__(self, text: str) -> None:
        self.text = text

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return [0.0 if t == self.text else 1.0 for t in texts]


def test_rerank(data: dict[str, Any]) -> None:
    svc = data["svc"]
    plain = svc.recall(QUERY, **SCOPE, top_sessions=2, top_k=1, rerank=False)
    target = ids(plain)[0]
    svc.reranker = Demote(plain["results"][0]["content"])
    params = {**SCOPE, "top_sessions": 2, "top_k": 1}
    out, why = why_not(svc.parts, QUERY, target, params, reranker=svc.reranker)
    assert out["diagnostics"]["reranked"] is True
    assert why["eliminated_at"] == "rerank"
    rr = stage(why, "rerank")
    assert rr["rank_before"] == 1 and rr["rank_after"] > 1 and rr["moved"] < 0
    check_fix(svc, target, params, why)
    assert why["fix"] == {"top_k": rr["rank_after"]}


def test_top_k_and_the_smallest_fix(data: dict[str, Any]) -> None:
    svc = data["svc"]
    wide = svc.recall(QUERY, **SCOPE, top_k=5)
    target = ids(wide)[3]
    params = {**SCOPE, "top_k": 2}
    _, why = why_not(svc.parts, QUERY, target, params, reranker=svc.reranker)
    assert why["eliminated_at"] == "top_k" and stage(why, "top_k")["rank_before_cut"] == 4
    assert why["fix"] == {"top_k": 4} and why["fix_rank"] == 4
    check_fix(svc, target, params, why)


def test_flat_mode_is_cut_by_top_k(data: dict[str, Any]) -> None:
    svc = data["svc"]
    wide = svc.recall(QUERY, **SCOPE, mode="flat", top_k=6)
    target = ids(wide)[5]
    params = {**SCOPE, "mode": "flat", "top_k": 3}
    _, why = why_not(svc.parts, QUERY, target, params, reranker=svc.reranker)
    assert why["eliminated_at"] == "top_k" and stage(why, "stage1")["skipped"] == "flat"
    assert why["fix"] == {"top_k": 6}
    check_fix(svc, target, params, why)


def test_whole_scope_ranks(data: dict[str, Any]) -> None:
    svc = data["svc"]
    target = data["turns"]["garden"][1]  # "Slugs are eating my garden lettuce": no query word
    _, why = why_not(svc.parts, QUERY, target, SCOPE, fix=False)
    idx = stage(why, "index")
    assert idx["scope_turns"] == 15  # u1 only: bob's session is outside the scope
    assert idx["bm25"]["rank"] is None and idx["keyword"]["rank"] is None
    assert 1 <= idx["dense"]["rank"] <= 15 and idx["dense"]["score"] is not None
    _, why2 = why_not(svc.parts, QUERY, data["turns"]["dentist"][0], SCOPE, fix=False)
    assert stage(why2, "index")["bm25"]["rank"] is not None


def test_unknown_turn_and_turn_outside_scope(data: dict[str, Any]) -> None:
    svc = data["svc"]
    with pytest.raises(MemviewerError) as exc:
        why_not(svc.parts, QUERY, "no-such-turn", SCOPE)
    assert exc.value.code == NOT_FOUND and exc.value.data["hint"]
    with pytest.raises(MemviewerError) as exc:
        why_not(svc.parts, QUERY, data["turns"]["elsewhere"][0], SCOPE)
    assert exc.value.code == INVALID_ARGUMENT and "outside the scope" in exc.value.message
    assert "--scope-id bob" in exc.value.data["hint"]


def test_why_leaves_the_recall_result_unchanged(data: dict[str, Any]) -> None:
    svc = data["svc"]
    params = {**SCOPE, "as_of": 1_700_000_000.0}
    out, _ = why_not(svc.parts, QUERY, data["turns"]["garden"][1], params)
    plain = svc.recall(QUERY, **params)
    assert ids(out) == ids(plain) and out["diagnostics"]["stage1"] == plain["diagnostics"]["stage1"]


# -- A/B -------------------------------------------------------------------------------
def test_diff_hand_checked() -> None:
    from memviewer.contract.compare import diff

    a = [{"turn_id": t} for t in ("x", "y", "z", "w")]
    b = [{"turn_id": t} for t in ("y", "x", "v", "w")]
    assert diff(a, b) == [
        {"turn_id": "x", "rank_a": 1, "rank_b": 2, "change": "down"},
        {"turn_id": "y", "rank_a": 2, "rank_b": 1, "change": "up"},
        {"turn_id": "z", "rank_a": 3, "rank_b": None, "change": "dropped"},
        {"turn_id": "w", "rank_a": 4, "rank_b": 4, "change": "same"},
        {"turn_id": "v", "rank_a": None, "rank_b": 3, "change": "new"},
    ]


def test_compare_two_parameter_sets(data: dict[str, Any]) -> None:
    from memviewer.contract.compare import compare, parse_overrides

    svc = data["svc"]
    ab = compare(svc.recall, QUERY, {**SCOPE, "top_k": 3}, parse_overrides("top_k=5, w-dense=0.3"))
    assert ab["a"]["params"]["top_k"] == 3 and ab["b"]["params"]["top_k"] == 5
    assert ab["b"]["params"]["w_dense"] != ab["a"]["params"]["w_dense"]
    a, b = ids({"results": ab["a"]["results"]}), ids({"results": ab["b"]["results"]})
    assert {d["turn_id"] for d in ab["diff"]} == set(a) | set(b)
    for d in ab["diff"]:
        assert d["rank_a"] == (a.index(d["turn_id"]) + 1 if d["turn_id"] in a else None)
        assert d["rank_b"] == (b.index(d["turn_id"]) + 1 if d["turn_id"] in b else None)
    flat = compare(svc.recall, QUERY, SCOPE, parse_overrides("flat"))
    assert flat["b"]["params"]["mode"] == "flat" and flat["a"]["params"]["mode"] == "hierarchical"


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("bogus=1", "unknown recall parameter 'bogus'"),
        ("top_k=0", "top_k must be an integer"),
        ("top_k=ten", "top_k must be an integer"),
        ("mode=sideways", "mode must be one of"),
        ("w_dense=nan", "between 0 and 1"),
        ("w_dense=2", "between 0 and 1"),
        ("rerank=maybe", "true or false"),
        ("top_k=3,top_k=4", "given twice"),
        ("", "empty"),
        ("top_k", "not key=value"),
    ],
)
def test_bad_parameter_sets_are_refused(spec: str, words: str) -> None:
    from memviewer.contract.compare import parse_overrides

    with pytest.raises(MemviewerError) as exc:
        parse_overrides(spec)
    assert exc.value.code == INVALID_ARGUMENT and words in exc.value.message
