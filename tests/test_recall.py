"""Hierarchical recall (docs/cli.md) over a real SQLite store and a real LanceDB
index, with the fast ``HashEmbedder``."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from dated import ASKED, DAY_S, add_dated_session, cooking_sessions

from memviewer.errors import MemviewerError
from memviewer.index.lance import TURNS, in_filter
from memviewer.recall.hierarchical import STAGE1_EMPTY, STAGE2_EMPTY
from memviewer.recall.hierarchical import recall as run_recall

TOPICS = {
    "dentist": [
        "My dentist appointment with Dr Alvarez is on Friday at nine",
        "The dentist said my molar needs a crown",
        "I rescheduled the dentist visit to Monday",
    ],
    "garden": [
        "I planted tomatoes and basil in the garden",
        "Slugs are eating my garden lettuce",
        "The garden hose leaks near the tap",
    ],
    "guitar": [
        "I practise guitar scales every evening",
        "My guitar teacher recommends the Carcassi etudes",
        "New guitar strings sound bright",
    ],
    "taxes": [
        "I filed my tax return with the accountant",
        "The tax office wants the receipts from March",
        "My tax refund arrived yesterday",
    ],
    "travel": [
        "We booked a flight to Lisbon for the holidays",
        "The Lisbon hotel is near the river",
        "Travel insurance covers the Lisbon trip",
    ],
    "cooking": [
        "I baked sourdough bread this morning",
        "The sourdough starter needs feeding twice a day",
        "My bread recipe uses rye flour",
    ],
    "running": [
        "I ran ten kilometres in the park",
        "My running shoes are worn out",
        "The marathon training plan starts in May",
    ],
}


def add_session(
    svc: Any,
    sid: str,
    texts: list[str],
    *,
    scope: str = "user",
    scope_id: str = "u1",
    metadata: dict[str, Any] | None = None,
) -> None:
    svc.open_session(session_id=sid, agent="agent", scope=scope, scope_id=scope_id)
    ep = svc.start_episode(sid, texts[0], metadata=metadata)
    for i, text in enumerate(texts[1:]):
        svc.add_turn(ep["episode_id"], "assistant" if i % 2 else "user", text, metadata=metadata)
    svc.finalize_episode(ep["episode_id"])


@pytest.fixture
def filled(service: Any) -> Any:
    for topic, texts in TOPICS.items():
        add_session(service, f"s-{topic}", texts)
    service.sync_index()
    return service


def sessions_of(out: dict[str, Any]) -> list[str]:
    return [r["session_id"] for r in out["results"]]


def test_happy_path_returns_chunks_of_top_sessions_only(filled: Any) -> None:
    out = filled.recall("dentist appointment crown", scope="user", scope_id="u1", top_sessions=2)
    d = out["diagnostics"]
    stage1 = [s["session_id"] for s in d["stage1"]]
    assert len(stage1) == 2 and stage1[0] == "s-dentist"
    assert out["results"] and set(sessions_of(out)) <= set(stage1)
    assert out["results"][0]["session_id"] == "s-dentist"
    assert d["escalations"] == [] and d["reranked"] is False
    assert d["stage2_candidates"] == len(d["dropped"]) + d["post_filter"]
    assert all(x["session_id"] not in stage1 for x in d["dropped"])
    assert set(out) == {"query", "scope", "scope_id", "results", "diagnostics"}
    first = out["results"][0]
    assert set(first) == {
        "turn_id",
        "session_id",
        "episode_id",
        "index",
        "role",
        "content",
        "archived",
        "timestamp",
        "score",
        "score_breakdown",
        "metadata",
    }
    assert {"dense", "keyword", "recency"} <= set(first["score_breakdown"])
    assert {"session_id", "score", "summary"} <= set(d["stage1"][0])
    assert {"embed", "stage1", "stage2", "total"} <= set(d["timings_ms"])
    scores = [r["score"] for r in out["results"]]
    assert scores == sorted(scores, reverse=True)


def test_results_are_hydrated_from_sqlite(filled: Any) -> None:
    out = filled.recall("sourdough starter feeding", scope="user", scope_id="u1", top_k=1)
    hit = out["results"][0]
    turn = next(t for t in filled.session(hit["session_id"])["turns"] if t["turn_id"] == hit["turn_id"])
    for key in ("index", "role", "content", "archived", "timestamp", "episode_id", "metadata"):
        assert hit[key] == turn[key]


def test_truncates_to_top_k(filled: Any) -> None:
    out = filled.recall("my", scope="user", scope_id="u1", top_sessions=5, chunks_per_session=3, top_k=4)
    assert len(out["results"]) == 4
    assert out["diagnostics"]["params"]["pool"] == 45


def test_per_session_cap(service: Any) -> None:
    add_session(service, "s-big", [f"lisbon trip detail number {i} about lisbon" for i in range(12)])
    add_session(service, "s-small", ["a note about lisbon", "something else"])
    service.sync_index()
    out = service.recall(
        "lisbon trip", scope="user", scope_id="u1", top_sessions=2, chunks_per_session=2, top_k=10
    )
    counts: dict[str, int] = {}
    for sid in sessions_of(out):
        counts[sid] = counts.get(sid, 0) + 1
    assert counts["s-big"] == 2 and max(counts.values()) <= 2
    assert any(c["session_id"] == "s-big" for c in out["diagnostics"]["capped"])


def test_scope_isolation(service: Any) -> None:
    add_session(service, "a1", ["the secret launch code is falcon"], scope_id="alice")
    add_session(service, "b1", ["the secret launch code is falcon"], scope_id="bob")
    add_session(service, "b2", ["bob likes falcon documentaries"], scope_id="bob")
    service.sync_index()
    for mode in ("hierarchical", "flat"):
        out = service.recall("falcon launch code", scope="user", scope_id="alice", mode=mode)
        assert sessions_of(out) == ["a1"]
        assert all(s["session_id"] == "a1" for s in out["diagnostics"]["stage1"])
    everywhere = service.recall("falcon launch code")
    assert {"a1", "b1"} <= set(sessions_of(everywhere))


def test_stage1_empty_falls_back_to_plain_turn_query(filled: Any) -> None:
    index = filled.parts.lance
    index.table("session_summaries").delete("true")
    calls: list[int] = []

    class Counting:
        def score(self, query: str, texts: list[str]) -> list[float]:
            calls.append(len(texts))
            return [0.5] * len(texts)

    # recall's own stages: the service would also flag the deleted summaries (index:incomplete)
    out = run_recall(
        filled.parts, "garden slugs lettuce", scope="user", scope_id="u1", top_k=3, reranker=Counting()
    )
    d = out["diagnostics"]
    assert d["escalations"] == [STAGE1_EMPTY]
    assert d["stage1"] == [] and d["reranked"] is False and calls == []
    assert len(out["results"]) == 3 and out["results"][0]["session_id"] == "s-garden"


def test_empty_scope_is_stage1_empty_with_no_results(filled: Any) -> None:
    out = filled.recall("anything", scope="user", scope_id="nobody")
    assert out["results"] == []
    assert out["diagnostics"]["escalations"] == [STAGE1_EMPTY]


def test_stage2_empty_returns_raw_stage2_top(filled: Any) -> None:
    # The dentist session's summary is indexed but its turns are not (index lag):
    # Stage 1 picks it, the post-filter finds none of its turns in the pool.
    index = filled.parts.lance
    index.table(TURNS).delete("session_id = 's-dentist'")
    out = run_recall(  # recall's own stages: the service would add the lost turns as keyword hits
        filled.parts,
        "dentist appointment Alvarez crown molar",
        scope="user",
        scope_id="u1",
        top_sessions=1,
        chunks_per_session=1,
        top_k=2,
        tuning={"session_turn_weight": 0.0},
    )
    d = out["diagnostics"]
    assert [s["session_id"] for s in d["stage1"]] == ["s-dentist"]
    assert d["escalations"] == [STAGE2_EMPTY] and d["post_filter"] == 0
    assert len(out["results"]) == 2 and "s-dentist" not in sessions_of(out)
    assert d["reranked"] is False


class KeywordReranker:
    """Prefers texts containing a word: turns the ranking around on purpose."""

    def __init__(self, word: str) -> None:
        self.word = word

    def score(self, query: str, texts: list[str]) -> list[float]:
        return [1.0 if self.word in t else 0.0 for t in texts]


class Broken:
    def score(self, query: str, texts: list[str]) -> list[float]:
        raise RuntimeError("reranker service down")


def test_rerank_blends_and_reorders(filled: Any) -> None:
    base = filled.recall("dentist tax guitar", scope="user", scope_id="u1")
    last = base["results"][1]  # close enough to the top for a 0.3 neural share to lift it
    out = filled.recall(
        "dentist tax guitar", scope="user", scope_id="u1", reranker=KeywordReranker(last["content"])
    )
    assert out["diagnostics"]["reranked"] is True
    top = out["results"][0]
    assert top["turn_id"] == last["turn_id"] != base["results"][0]["turn_id"]
    b = top["score_breakdown"]
    assert b["rerank"] == 1.0
    assert top["score"] == pytest.approx(0.7 * b["pre_rerank"] + 0.3 * 1.0, abs=1e-5)
    scores = [r["score"] for r in out["results"]]
    assert scores == sorted(scores, reverse=True)


def test_rerank_skipped_without_reranker(filled: Any) -> None:
    out = filled.recall("dentist tax guitar", scope="user", scope_id="u1")
    assert out["diagnostics"]["reranked"] is False
    assert all("rerank" not in r["score_breakdown"] for r in out["results"])


def test_service_reranker_is_used_unless_switched_off(filled: Any) -> None:
    filled.reranker = KeywordReranker("guitar")
    on = filled.recall("dentist tax guitar", scope="user", scope_id="u1")
    off = filled.recall("dentist tax guitar", scope="user", scope_id="u1", rerank=False)
    assert on["diagnostics"]["reranked"] is True
    assert off["diagnostics"]["reranked"] is False
    assert all("rerank" not in r["score_breakdown"] for r in off["results"])


def test_raising_reranker_keeps_session_by_session_order(filled: Any) -> None:
    out = filled.recall("dentist tax guitar", scope="user", scope_id="u1", reranker=Broken())
    d = out["diagnostics"]
    assert d["reranked"] is False and "reranker service down" in d["rerank_error"]
    order = [s["session_id"] for s in d["stage1"]]
    ranks = [order.index(r["session_id"]) for r in out["results"]]
    assert ranks == sorted(ranks)  # grouped by Stage-1 session, in Stage-1 order
    assert len(set(ranks)) > 1


def test_flat_mode_is_one_turn_query(filled: Any) -> None:
    out = filled.recall("garden hose leaks", scope="user", scope_id="u1", mode="flat", top_k=5)
    d = out["diagnostics"]
    assert d["mode"] == "flat" and d["stage1"] == [] and len(out["results"]) == 5
    assert out["results"][0]["content"] == "The garden hose leaks near the tap"


@pytest.mark.parametrize(
    "params",
    [
        {"top_k": 0},
        {"top_sessions": "many"},
        {"chunks_per_session": -1},
        {"mode": "sideways"},
        {"scope": 3},
        {"tuning": {"nope": 1}},
    ],
)
def test_bad_parameters_are_invalid_argument(filled: Any, params: dict[str, Any]) -> None:
    with pytest.raises(MemviewerError) as err:
        filled.recall("dentist", **params)
    assert err.value.code == "invalid_argument"


def test_empty_query_is_invalid_argument(filled: Any) -> None:
    with pytest.raises(MemviewerError):
        filled.recall("   ")


def _tree_digest(folder: Path) -> dict[str, str]:
    """Every file's hash; SQLite's shared-memory file and an empty WAL are not data."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
        and not p.name.endswith("-shm")
        and not (p.name.endswith("-wal") and p.stat().st_size == 0)
    }


def test_recall_does_not_mutate_memory(filled: Any) -> None:
    filled.store.engine.dispose()  # settle the WAL so only real writes could change files
    home = filled.home
    index = filled.parts.lance
    before_files = _tree_digest(home)
    before_versions = index.versions()
    before_counts = {t: index.count(t) for t in before_versions}
    stats = filled.stats()["counts"]
    last_seq = filled.last_seq
    for mode in ("hierarchical", "flat"):
        filled.recall("dentist appointment", scope="user", scope_id="u1", mode=mode)
        filled.recall("garden", reranker=KeywordReranker("hose"))
    filled.store.engine.dispose()
    assert index.versions() == before_versions
    assert {t: index.count(t) for t in before_versions} == before_counts
    assert filled.stats()["counts"] == stats and filled.last_seq == last_seq
    assert _tree_digest(home) == before_files


def test_archived_turns_are_recalled_and_flagged(settings: Any) -> None:
    from memviewer.index.embedder import HashEmbedder
    from memviewer.service import MemoryService

    svc = MemoryService(settings.with_overrides(active_window=4), embedder=HashEmbedder())
    try:
        meta = {"source": "unit", "nested": {"k": [1, 2]}}
        svc.open_session(session_id="long", agent="a", scope="user", scope_id="u1")
        ep = svc.start_episode("long", "the wifi password is tangerine-42", metadata=meta)
        for i in range(9):
            svc.add_turn(ep["episode_id"], "assistant", f"filler reply {i}")
        svc.sync_index()
        out = svc.recall("wifi password tangerine", scope="user", scope_id="u1", top_k=3)
        hit = out["results"][0]
        assert hit["content"] == "the wifi password is tangerine-42"
        assert hit["archived"] is True and hit["metadata"] == meta and hit["index"] == 0
        rows = svc.parts.lance.rows(TURNS, in_filter("turn_id", [hit["turn_id"]]), ["archived"])
        assert rows == [{"archived": True}]
    finally:
        svc.close()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did I buy for my sister?", "user"),
        ("Can you recommend a hotel for my trip?", "user"),  # a request, not a past reply
        ("Remind me which book you recommended last week", "assistant"),
        ("Which hotel did you suggest for Lisbon?", "assistant"),
        ("I remember you told me to dilute tea tree oil. What ratio?", "assistant"),
        ("What was your suggestion for the garden?", "assistant"),
        ("Lisbon hotel near the river", None),
    ],
)
def test_addressed_speaker_reads_whose_words_the_query_asks_about(query: str, expected: str | None) -> None:
    from memviewer.present.speaker import addressed_speaker

    assert addressed_speaker(query) == expected


def _speaker_session(service: Any) -> None:
    service.open_session(session_id="s-pets", agent="agent", scope="user", scope_id="u1")
    ep = service.start_episode(
        "s-pets", "Kiwi my parrot eats sunflower seeds every single morning before breakfast at home"
    )
    service.add_turn(
        ep["episode_id"],
        "assistant",
        "Seeds for a parrot: sunflower seeds are what a parrot like Kiwi eats most, "
        "and parrot seeds should be mixed with pellets",
    )
    service.finalize_episode(ep["episode_id"])
    service.sync_index()


def test_speaker_part_favours_the_turns_of_the_addressed_speaker(service: Any) -> None:
    _speaker_session(service)
    mine = service.recall("What seeds does my parrot Kiwi eat?", scope="user", scope_id="u1")
    off = service.recall(
        "What seeds does my parrot Kiwi eat?", scope="user", scope_id="u1", weights={"speaker": 0}
    )
    yours = service.recall("Which seeds did you recommend for parrot Kiwi?", scope="user", scope_id="u1")
    by_role = {r["role"]: r for r in mine["results"]}
    assert by_role["user"]["score_breakdown"]["speaker"] == 1.0
    assert by_role["assistant"]["score_breakdown"]["speaker"] == 0.0
    assert mine["results"][0]["role"] == "user"
    # The long assistant reply repeats every query word: on text alone it wins.
    assert off["results"][0]["role"] == "assistant"
    assert all("speaker" not in r["score_breakdown"] for r in off["results"])
    assert yours["results"][0]["role"] == "assistant"
    assert {r["role"]: r["score_breakdown"]["speaker"] for r in yours["results"]} == {
        "assistant": 1.0,
        "user": 0.0,
    }
    assert mine["diagnostics"]["params"]["w_speaker"] == 0.2


def test_query_addressing_nobody_keeps_the_blend(service: Any) -> None:
    _speaker_session(service)
    out = service.recall("parrot Kiwi sunflower seeds", scope="user", scope_id="u1")
    for r in out["results"]:
        b = r["score_breakdown"]
        assert "speaker" not in b
        assert r["score"] == pytest.approx(0.5 * b["dense"] + 0.5 * b["keyword"], abs=1e-5)


@pytest.mark.parametrize("share", [-0.1, 1.5])
def test_out_of_range_speaker_share_is_invalid_argument(filled: Any, share: float) -> None:
    with pytest.raises(MemviewerError) as err:
        filled.recall("dentist", weights={"speaker": share})
    assert err.value.code == "invalid_argument" and "w_speaker" in err.value.message


def test_relative_date_in_the_query_favours_sessions_from_then(service: Any) -> None:
    cooking_sessions(service)
    out = service.recall("What did I cook a week ago?", scope="user", scope_id="u1", as_of=ASKED)
    d = out["diagnostics"]
    assert d["time_window"]["phrase"] == "a week ago"
    assert d["stage1"][0]["session_id"] == "s-week"
    assert d["stage1"][0]["score_breakdown"]["time"] == 1.0
    assert out["results"][0]["turn_id"] == "s-week-0"
    assert out["results"][0]["score_breakdown"]["time"] == 1.0
    assert all(r["score_breakdown"]["time"] < 1.0 for r in out["results"] if r["session_id"] != "s-week")
    # Asked 23 days earlier, "a week ago" is the month-old session's date.
    earlier = service.recall(
        "What did I cook a week ago?", scope="user", scope_id="u1", as_of=ASKED - 23 * DAY_S
    )
    assert earlier["diagnostics"]["stage1"][0]["session_id"] == "s-month"


def test_as_of_accepts_iso_dates_and_rejects_garbage(service: Any) -> None:
    cooking_sessions(service)
    out = service.recall(
        "what did I cook yesterday", scope="user", scope_id="u1", as_of="2023-02-07T09:00:00Z"
    )
    assert out["diagnostics"]["stage1"][0]["session_id"] == "s-day"
    for bad in ("next tuesday", True, [1]):
        with pytest.raises(MemviewerError) as err:
            service.recall("what did I cook yesterday", as_of=bad)
        assert err.value.code == "invalid_argument"


def test_no_date_or_zero_share_means_no_time_part(service: Any) -> None:
    cooking_sessions(service)
    plain = service.recall("What did I cook?", scope="user", scope_id="u1", as_of=ASKED)
    off = service.recall(
        "What did I cook a week ago?", scope="user", scope_id="u1", as_of=ASKED, weights={"time": 0}
    )
    for out in (plain, off):
        assert out["diagnostics"]["time_window"] is None
        assert all("time" not in r["score_breakdown"] for r in out["results"])
        assert all("time" not in s["score_breakdown"] for s in out["diagnostics"]["stage1"])
    with pytest.raises(MemviewerError):
        service.recall("x", weights={"time": 0.9, "speaker": 0.2})


def test_a_bare_tool_call_gets_no_speaker_share(service: Any) -> None:
    service.open_session(session_id="s-tools", agent="agent", scope="user", scope_id="u1")
    ep = service.start_episode("s-tools", "Check the weather in Oslo for the ferry trip")
    service.add_turn(
        ep["episode_id"],
        "assistant",
        "",
        tool_calls=[{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}],
    )
    service.add_turn(ep["episode_id"], "assistant", "Oslo: rain, 8 degrees; the ferry runs.")
    service.sync_index()
    out = service.recall(
        "What did you tell me about the Oslo ferry weather?",
        scope="user",
        scope_id="u1",
        chunks_per_session=10,
        mode="flat",
    )
    speaker = {r["content"]: r["score_breakdown"]["speaker"] for r in out["results"]}
    assert speaker[""] == 0.0
    assert speaker["Oslo: rain, 8 degrees; the ferry runs."] == 1.0


def test_a_long_lived_session_is_dated_by_its_turns_not_its_span(service: Any) -> None:
    """A month-long session overlaps every window; only a turn inside one makes it 'then'."""
    add_dated_session(
        service,
        "s-long",
        [
            (ASKED - 30 * DAY_S, "user", "I cooked lasagne for dinner tonight"),
            (ASKED - DAY_S, "user", "I cooked risotto for dinner tonight"),
        ],
        status="open",
    )
    add_dated_session(service, "s-short", [(ASKED - 7 * DAY_S, "user", "I cooked paella for dinner tonight")])
    service.sync_index()
    out = service.recall("What did I cook a week ago?", scope="user", scope_id="u1", as_of=ASKED)
    stage1 = {s["session_id"]: s["score_breakdown"]["time"] for s in out["diagnostics"]["stage1"]}
    assert stage1["s-short"] == 1.0
    assert stage1["s-long"] < 0.5  # its nearest turn is four days past the window
    assert out["diagnostics"]["stage1"][0]["session_id"] == "s-short"
    assert out["results"][0]["turn_id"] == "s-short-0"
