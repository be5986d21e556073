"""Re-runs that share Stage 1, Stage 2 and the LanceDB reads (``RerunCache``) give exactly the
results of independent runs; the fix search reports progress and stops when cancelled.

Real store and LanceDB index over the demo history (15 sessions, 201 turns) and the why-not
fixture, ``HashEmbedder`` for speed."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from why_data import QUERY, SCOPE, build

from memviewer.contract.compare import apply_overrides
from memviewer.errors import WhyCancelled
from memviewer.recall.hierarchical import recall
from memviewer.recall.rerun_cache import RerunCache
from memviewer.recall.why import why_not

AS_OF = 1_900_000_000.0  # after every demo turn: one moment for every run
DEMO_QUERY = "what backoff did we pick for webhooks"


@pytest.fixture
def demo(service: Any) -> Any:
    from memviewer.demo.scenario import build_scenario

    results = service.apply_batch(build_scenario())
    assert not [r for r in results if "error" in r]
    service.sync_index()
    return service


def comparable(out: dict[str, Any]) -> dict[str, Any]:
    """The whole result but the clock."""
    diag = {k: v for k, v in out["diagnostics"].items() if k != "timings_ms"}
    return {**out, "diagnostics": diag}


def unrelated_turn(svc: Any, query: str) -> str:
    """The last turn of the session Stage 1 ranks last: a long fix search."""
    sessions = svc.recall(query, top_sessions=50, as_of=AS_OF)["diagnostics"]["stage1"]
    return svc.session(sessions[-1]["session_id"])["turns"][-1]["turn_id"]


def test_shared_runs_equal_independent_runs(demo: Any) -> None:
    parts = demo.parts
    cache = RerunCache()
    changes: list[dict[str, Any]] = [{}]
    changes += [{"top_k": v} for v in (3, 11, 20, 100)]
    changes += [
        {"chunks_per_session": m, "top_sessions": k} for k, m in itertools.product((2, 5, 7), (1, 3, 9))
    ]
    changes += [{"w_dense": 0.25, "w_keyword": 0.75}, {"w_time": 0.0}, {"mode": "flat", "top_k": 15}]
    changes += [{"top_k": 3}, {}]  # asked again after everything else: answered from the cache
    base = {"as_of": AS_OF, "top_sessions": 5, "chunks_per_session": 3, "top_k": 10}
    for change in changes:
        kwargs = apply_overrides(base, change)
        shared = recall(parts, DEMO_QUERY, cache=cache, **kwargs)
        alone = recall(parts, DEMO_QUERY, **kwargs)
        assert comparable(shared) == comparable(alone), change
    stats = cache.stats
    # the caching did happen: most stages and reads were answered from it
    assert stats["stage2_shared"] >= len(changes) // 2 and stats["stage1_shared"] >= 3
    assert stats["reads_shared"] > stats["reads"]


def test_every_rerun_of_a_fix_search_matches_an_independent_run(demo: Any) -> None:
    target = unrelated_turn(demo, DEMO_QUERY)
    params = {"as_of": AS_OF}
    seen: list[tuple[int, int]] = []
    _, why = why_not(demo.parts, DEMO_QUERY, target, params, progress=lambda d, p: seen.append((d, p)))
    assert why["reruns"] >= 10 and len(why["tried"]) == why["reruns"]
    for tried in why["tried"]:
        out = demo.recall(DEMO_QUERY, **apply_overrides(params, tried["change"]))
        got = [r["turn_id"] for r in out["results"]]
        rank = got.index(target) + 1 if target in got else None
        assert rank == tried["rank"], tried
    assert [d for d, _ in seen] == list(range(1, why["reruns"] + 1))
    assert all(d <= p <= 60 for d, p in seen)


def test_a_found_fix_is_the_same_with_one_cache_for_several_turns(service: Any) -> None:
    data = build(service)
    svc = data["svc"]
    targets = [data["turns"]["garden"][-1], data["turns"]["dentist"][-1]]
    params = {**SCOPE, "top_sessions": 1, "chunks_per_session": 1, "as_of": AS_OF}
    cache = RerunCache()
    for target in targets:
        _, shared = why_not(svc.parts, QUERY, target, params, cache=cache)
        _, alone = why_not(svc.parts, QUERY, target, params)
        assert shared == alone
    assert cache.stats["stage2_shared"] > 0


def test_progress_counts_reruns_and_cancel_stops_the_search(demo: Any) -> None:
    target = unrelated_turn(demo, DEMO_QUERY)
    seen: list[int] = []
    with pytest.raises(WhyCancelled) as err:
        why_not(
            demo.parts,
            DEMO_QUERY,
            target,
            {"as_of": AS_OF},
            progress=lambda done, planned: seen.append(done),
            cancelled=lambda: len(seen) >= 3,
        )
    assert seen == [1, 2, 3]
    assert err.value.done == 3 and 3 < err.value.planned <= 60
    assert f"after 3 of {err.value.planned} re-runs" in str(err.value)
