"""Keyword search's windowed path for queries whose words match too many turns to rank them
all (``memviewer.recall.keyword._common_candidates``): same top hit as the full BM25 ranking
on a small corpus, a bounded window, and in step with every way turns are written or removed.

The thresholds are module constants; the tests lower them so a small corpus takes the path.
"""

from __future__ import annotations

from typing import Any

import pytest

import memviewer.recall.keyword as keyword
from memviewer.recall.keyword import KeywordSearch
from memviewer.session.manager import SessionManager
from memviewer.store.db import Store

T0 = 1_781_000_000.0

TOPICS = {
    "s-billing": ["Can we plan the billing migration?", "The billing migration moves invoices to Adyen."],
    "s-rollback": ["Is there a rollback plan?", "The rollback plan: switch traffic back with a flag."],
    "s-cache": ["Cache hit rates dropped.", "Redis cache hit rates are back at 97 percent."],
    "s-mixed": ["We talked about billing, cache and a plan.", "Nothing decided on the rollback yet."],
    "s-rollback-2": ["rollback rollback plan plan, rollback plan again", "ok"],
}
QUERIES = ["billing migration", "rollback plan", "cache hit rates", "plan", "rollback"]


@pytest.fixture
def store(backend_store: Store) -> Store:
    """SQLite and, when the test server is set, PostgreSQL (``tests/store_backends.py``)."""
    return backend_store


@pytest.fixture
def manager(store: Store) -> SessionManager:
    return SessionManager(store)


@pytest.fixture
def windowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every word counts as common: each query takes the windowed path."""
    monkeypatch.setattr(keyword, "COMMON_DF", 0)


def seed(manager: SessionManager, sid: str, texts: list[str], t0: float, **session: Any) -> None:
    turns = [
        {"id": f"{sid}-t{i}", "role": ("user", "assistant")[i % 2], "content": text, "timestamp": t0 + i}
        for i, text in enumerate(texts)
    ]
    row = {"id": sid, "title": sid, "started_at": t0, "last_seen_at": t0 + len(texts), **session}
    manager.import_session(row, turns)


def top(ks: KeywordSearch, q: str, limit: int = 5) -> list[str]:
    r = ks.search(q, limit=limit, window=1)
    assert r["success"], r
    return [h["session_id"] for h in r["results"]]


def test_top_hit_equals_the_full_bm25_ranking(store: Store, manager: SessionManager) -> None:
    for k, (sid, texts) in enumerate(TOPICS.items()):
        seed(manager, sid, texts, T0 + 100 * k)
    full = KeywordSearch(store)  # nothing is common in so few turns: BM25 over every match
    expected = {q: top(full, q) for q in QUERIES}
    assert all(expected.values()) and expected["billing migration"][0] == "s-billing"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(keyword, "COMMON_DF", 0)
        windowed = KeywordSearch(store)
        got = {q: top(windowed, q) for q in QUERIES}
    assert {q: v[0] for q, v in got.items()} == {q: v[0] for q, v in expected.items()}
    assert {q: set(v) for q, v in got.items()} == {q: set(v) for q, v in expected.items()}


def test_many_matches_switch_to_the_window(
    store: Store, manager: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Uncommon words that still match more than RANKED_MAX turns take the window too."""
    for i in range(6):
        seed(manager, f"s-{i}", [f"gecko sighting number {i}"], T0 + i)
    ks = KeywordSearch(store)
    assert ks.search("gecko", limit=10)["total_found"] == 6
    monkeypatch.setattr(keyword, "COMMON_TURNS", 2)
    full = ks.search("gecko", limit=10)
    assert full["total_found"] == 6 and "ranked_window" not in full  # 6 ≤ RANKED_MAX: ranked in full
    monkeypatch.setattr(keyword, "RANKED_MAX", 5)
    assert set(top(ks, "gecko", limit=10)) == {"s-4", "s-5"}  # the newest two matching turns
    assert ks.search("gecko", limit=10)["ranked_window"] == 2  # and the answer says so


def test_turns_holding_every_word_come_first(store: Store, manager: SessionManager, windowed: None) -> None:
    seed(manager, "s-both", ["the rollback plan is ready"], T0)
    for i in range(4):
        seed(manager, f"s-plan-{i}", [f"a plan for week {i}"], T0 + 10 + i)
    ks = KeywordSearch(store)
    assert top(ks, "rollback plan")[0] == "s-both"


def test_window_sees_every_write_and_delete(store: Store, manager: SessionManager, windowed: None) -> None:
    ks = KeywordSearch(store)
    seed(manager, "s-imported", ["the walrus plan was imported"], T0)
    assert top(ks, "walrus plan") == ["s-imported"]

    # the hub's batch fast path (session/fastpath.py, store/fast_turns.py)
    results = manager.apply_batch(
        [
            {"op": "open_session", "session_id": "s-live", "agent": "bot", "ts": T0 + 10},
            {
                "op": "start_episode",
                "session_id": "s-live",
                "user_message": "what is the walrus plan?",
                "episode_id": "e-live",
                "ts": T0 + 11,
            },
            {
                "op": "add_turn",
                "episode_id": "e-live",
                "role": "assistant",
                "content": "walrus plan: ship",
                "ts": T0 + 12,
            },
        ]
    )
    assert all("error" not in r for r in results), results
    assert top(ks, "walrus plan") == ["s-live", "s-imported"]

    # the portable write path (WriteTx)
    manager.open_session(session_id="s-portable", agent="bot", ts=T0 + 20)
    manager.start_episode("s-portable", "hello", episode_id="e-portable", ts=T0 + 21)
    manager.add_turn("e-portable", "assistant", "the walrus plan, walrus plan, walrus plan", ts=T0 + 22)
    assert set(top(ks, "walrus plan")) == {"s-portable", "s-live", "s-imported"}

    manager.delete_session("s-portable")
    manager.delete_session("s-live")
    assert top(ks, "walrus plan") == ["s-imported"]
    manager.delete_session("s-imported")
    assert ks.search("walrus plan")["total_found"] == 0


def test_window_finds_archived_turns_after_compaction(
    store: Store, manager: SessionManager, windowed: None
) -> None:
    manager.open_session(session_id="s-long", agent="bot", active_window=2, ts=T0)
    manager.start_episode("s-long", "first: the narwhal plan", episode_id="e1", turn_id="u0", ts=T0 + 1)
    for i in range(5):
        manager.add_turn("e1", "assistant", f"filler message {i}", ts=T0 + 2 + i)
    r = KeywordSearch(store).search("narwhal plan", limit=5, window=0)
    [hit] = r["results"]
    assert hit["session_id"] == "s-long"
    anchor = [m for m in hit["messages"] if m["index"] == hit["anchor_index"]]
    assert anchor and anchor[0]["archived"] is True and "narwhal" in anchor[0]["content"]


def test_window_honours_scope_and_session_filters(
    store: Store, manager: SessionManager, windowed: None
) -> None:
    seed(manager, "s-alice", ["the heron plan for alice"], T0, scope="user", scope_id="alice")
    seed(manager, "s-bob", ["the heron plan for bob"], T0 + 10, scope="user", scope_id="bob")
    ks = KeywordSearch(store)
    assert set(top(ks, "heron plan")) == {"s-alice", "s-bob"}
    r = ks.search("heron plan", scope="user", scope_id="alice")
    assert [h["session_id"] for h in r["results"]] == ["s-alice"]
    r = ks.search("heron plan", session_id="s-bob")
    assert [h["session_id"] for h in r["results"]] == ["s-bob"]


def test_the_kept_word_counts_follow_every_write(
    store: Store, manager: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-word match counts are kept between searches (``kc.MatchCounts``) only while the
    word index is unchanged: a word that becomes common takes the window at the next search,
    and back when its turns are deleted, on the same ``KeywordSearch``."""
    monkeypatch.setattr(keyword, "COMMON_DF", 3)
    for i in range(3):
        seed(manager, f"s-{i}", [f"the narwhal report {i}"], T0 + i)
    ks = KeywordSearch(store)
    first = ks.search("narwhal", limit=10)
    assert first["total_found"] == 3 and "ranked_window" not in first
    assert "ranked_window" not in ks.search("narwhal", limit=10)  # counts kept: same plan
    seed(manager, "s-3", ["narwhal again"], T0 + 10)  # 4 > COMMON_DF: common now
    again = ks.search("narwhal", limit=10)
    assert again["ranked_window"] == keyword.COMMON_TURNS and again["total_found"] == 4
    manager.delete_session("s-3")
    manager.delete_session("s-2")
    back = ks.search("narwhal", limit=10)
    assert back["total_found"] == 2 and "ranked_window" not in back
