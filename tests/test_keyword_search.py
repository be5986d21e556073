"""Keyword session search: the docs/cli.md search contract on a real SQLite store with FTS5,
and on PostgreSQL's tsvector index when ``MEMVIEWER_TEST_PG_URL`` is set (``backend_store``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memviewer.praisonai.importer import import_paths
from memviewer.recall.keyword import KeywordSearch
from memviewer.session.manager import SessionManager
from memviewer.store.db import Store

FIXTURES = Path(__file__).parent / "fixtures" / "praisonai"
T0 = 1_781_000_000.0
HOUR = 3600.0


@pytest.fixture
def store(backend_store: Store) -> Store:
    return backend_store


@pytest.fixture
def manager(store: Store) -> SessionManager:
    return SessionManager(store)


@pytest.fixture
def ks(store: Store) -> KeywordSearch:
    return KeywordSearch(store)


def seed(
    manager: SessionManager,
    sid: str,
    texts: list[str],
    *,
    t0: float = T0,
    step: float = 600.0,
    archived: int = 0,
    roles: list[str] | None = None,
    **session: Any,
) -> None:
    """An imported session whose turns alternate user/assistant ``step`` seconds apart."""
    turns = [
        {
            "id": f"{sid}-t{i}",
            "role": (roles[i] if roles else ("user", "assistant")[i % 2]),
            "content": text,
            "timestamp": t0 + i * step,
            "archived": i < archived,
        }
        for i, text in enumerate(texts)
    ]
    last = turns[-1]["timestamp"] if turns else t0
    row = {"id": sid, "title": session.pop("title", sid), "started_at": t0, "last_seen_at": last, **session}
    manager.import_session(row, turns)


FILLER = [
    "Good morning, can you help me plan the week?",
    "Sure. What are the priorities this week?",
    "The quarterly report and the onboarding docs.",
    "Noted: quarterly report first, then onboarding docs.",
]


def test_discovery_contract_and_archived_hit(manager: SessionManager, ks: KeywordSearch) -> None:
    seed(
        manager,
        "s-arch",
        ["We rotated the deploy token XZ99 yesterday.", *FILLER, "All done for today."],
        archived=3,
    )
    seed(manager, "s-other", FILLER)
    r = ks.search("deploy token XZ99")
    assert r["success"] is True and r["mode"] == "discovery" and r["query"] == "deploy token XZ99"
    assert r["total_found"] == 1
    hit = r["results"][0]
    assert set(hit) == {
        "session_id",
        "title",
        "when",
        "snippet",
        "score",
        "anchor_index",
        "messages",
        "bookends",
    }
    assert hit["session_id"] == "s-arch" and hit["anchor_index"] == 0
    assert hit["score"] > 0 and isinstance(hit["score"], float)
    assert hit["when"] == "2026-06-09T11:03:20Z"
    assert "XZ99" in hit["snippet"]
    anchor = next(m for m in hit["messages"] if m["index"] == 0)
    assert anchor["archived"] is True and "XZ99" in anchor["content"]
    assert set(anchor) == {"index", "role", "content", "timestamp", "archived"}
    assert [m["archived"] for m in hit["messages"]] == [True, True, True, False, False, False]


def test_window_bounds_messages_around_anchor(manager: SessionManager, ks: KeywordSearch) -> None:
    texts = [f"filler line number {i}" for i in range(30)]
    texts[17] = "the kiwi invoice anomaly showed up here"
    seed(manager, "s-long", texts)
    hit = ks.search("kiwi invoice anomaly", window=2)["results"][0]
    assert hit["anchor_index"] == 17
    assert [m["index"] for m in hit["messages"]] == [15, 16, 17, 18, 19]


def test_bookends_present_only_for_long_conversations(manager: SessionManager, ks: KeywordSearch) -> None:
    seed(
        manager,
        "s-long",
        [
            "Kick off billing review",
            "Here is the plan",
            "zebra budget line",
            "Checked the zebra budget",
            "Confirm Adyen",
            "Confirmed: Adyen",
        ],
    )
    seed(manager, "s-short", ["zebra budget question", "zebra budget answer"])
    seed(
        manager,
        "s-tools",
        ["zebra budget via tool", "calling", "tool output", "sys note"],
        roles=["user", "assistant", "tool", "system"],
    )
    hits = {h["session_id"]: h for h in ks.search("zebra budget", limit=10)["results"]}
    long_ = hits["s-long"]["bookends"]
    assert [m["index"] for m in long_["opening"]] == [0, 1]
    assert [m["index"] for m in long_["closing"]] == [4, 5]
    assert long_["closing"][1]["content"] == "Confirmed: Adyen"
    assert "bookends" not in hits["s-short"]  # backward-compatible hit: key absent
    assert "bookends" not in hits["s-tools"]  # only 2 user+assistant messages


@pytest.mark.parametrize(
    "session",
    [
        {"source": "cron"},
        {"source": "Scheduled"},
        {"meta": {"source": "batch"}},
        {"meta": {"metadata": {"source": "system"}}},
        {"meta": {"automated": True}},
        {"meta": {"metadata": {"automated": True}}},
    ],
    ids=["source", "source-case", "meta-source", "orig-meta-source", "automated", "orig-automated"],
)
def test_automated_sessions_are_demoted(manager: SessionManager, ks: KeywordSearch, session: dict) -> None:
    text = ["quokka migration plan", "the quokka migration plan is ready"]
    seed(manager, "s-human", text, **{})
    seed(manager, "s-bot", text, t0=T0 + 100, **session)
    r = ks.search("quokka migration plan")
    scores = {h["session_id"]: h["score"] for h in r["results"]}
    assert scores["s-bot"] == pytest.approx(scores["s-human"] * 0.25, rel=1e-3)
    assert r["results"][0]["session_id"] == "s-human"  # despite being older


def test_rate_demotion_needs_four_timestamped_turns(manager: SessionManager, ks: KeywordSearch) -> None:
    burst = ["okapi alert fired", "ack", "okapi alert fired again", "ack"]
    seed(manager, "s-burst", burst, step=10.0)  # 4 turns in 30 s: 480 / hour
    seed(manager, "s-calm", burst, step=HOUR, t0=T0 - 10 * HOUR)  # 4 turns over 3 h
    seed(manager, "s-pair", burst[:3], step=10.0, t0=T0 - 20 * HOUR)  # only 3 turns: no verdict
    scores = {h["session_id"]: h["score"] for h in ks.search("okapi alert", limit=5)["results"]}
    assert scores["s-burst"] == pytest.approx(scores["s-calm"] * 0.25, rel=1e-3)
    assert scores["s-pair"] > scores["s-burst"]


@pytest.mark.parametrize("key", ["lineage_id", "root_session_id", "thread_id"])
def test_lineage_dedup_keeps_best_hit(manager: SessionManager, ks: KeywordSearch, key: str) -> None:
    seed(
        manager,
        "s-a",
        ["narwhal refund policy", "narwhal refund policy details", "narwhal refund"],
        t0=T0,
        **{key: "chain-1"},
    )
    seed(manager, "s-b", ["narwhal refund policy once"], t0=T0 + HOUR, **{key: "chain-1"})
    seed(manager, "s-c", ["narwhal refund"], t0=T0 + 2 * HOUR)
    r = ks.search("narwhal refund policy", limit=5)
    assert [h["session_id"] for h in r["results"]] == ["s-a", "s-c"]
    assert r["total_found"] == 2


def test_lineage_from_original_metadata(manager: SessionManager, ks: KeywordSearch) -> None:
    seed(manager, "s-a", ["walrus ledger"], meta={"metadata": {"thread_id": "th-9"}})
    seed(manager, "s-b", ["walrus ledger walrus ledger"], meta={"thread_id": "th-9"})
    assert ks.search("walrus ledger")["total_found"] == 1


def test_siblings_sharing_only_a_parent_are_not_deduped(manager: SessionManager, ks: KeywordSearch) -> None:
    seed(manager, "s-parent", ["kestrel pricing"])
    seed(manager, "s-kid1", ["kestrel pricing for Europe"], parent_session_id="s-parent")
    seed(manager, "s-kid2", ["kestrel pricing for Asia"], parent_session_id="s-parent")
    r = ks.search("kestrel pricing", limit=5)
    assert r["total_found"] == 3
    assert {h["session_id"] for h in r["results"]} == {"s-parent", "s-kid1", "s-kid2"}


def test_ties_go_to_the_most_recent_session(manager: SessionManager, ks: KeywordSearch) -> None:
    for i in range(3):
        seed(manager, f"s-{i}", ["ibis checklist"], t0=T0 + i * HOUR)
    r = ks.search("ibis checklist")
    assert [h["session_id"] for h in r["results"]] == ["s-2", "s-1", "s-0"]


def test_exact_phrase_outranks_scattered_words(manager: SessionManager, ks: KeywordSearch) -> None:
    seed(manager, "s-scattered", ["the billing team met; a migration of the CRM is planned"], t0=T0 + HOUR)
    seed(manager, "s-phrase", ["we finished the billing migration last night"])
    assert ks.search("billing migration")["results"][0]["session_id"] == "s-phrase"


def test_stemming_and_limit(manager: SessionManager, ks: KeywordSearch) -> None:
    for i in range(7):
        seed(manager, f"s-{i}", [f"we migrated service {i} last week"], t0=T0 + i)
    r = ks.search("migration", limit=3)
    assert r["total_found"] == 7 and len(r["results"]) == 3


def test_common_words_only_rank_turns_with_a_rarer_one(
    manager: SessionManager, ks: KeywordSearch, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memviewer.recall.keyword as keyword

    monkeypatch.setattr(keyword, "COMMON_DF", 3)
    for i in range(5):
        seed(manager, f"s-common-{i}", [f"we decide things every day, round {i}"], t0=T0 + i)
    seed(manager, "s-kiwi", ["the kiwi rollout", "we decide on the kiwi rollout today"])
    r = ks.search("decide kiwi rollout")
    assert [h["session_id"] for h in r["results"]] == ["s-kiwi"] and r["total_found"] == 1
    assert r["results"][0]["anchor_index"] == 1  # the turn with every word wins
    # no uncommon word that occurs (unknown, or every word common): plain OR over everything
    assert ks.search("decide zyzzyva")["total_found"] == 6
    assert ks.search("decide every")["total_found"] == 6


def test_broad_queries_rank_the_newest_matches(
    manager: SessionManager, ks: KeywordSearch, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memviewer.recall.keyword as keyword

    monkeypatch.setattr(keyword, "BROAD_WINDOW", 3)
    seed(manager, "s-first", ["gecko gecko gecko notes"])  # best BM25, stored first
    for i in range(4):
        seed(manager, f"s-later-{i}", [f"a gecko sighting number {i}"], t0=T0 + i)
    r = ks.search("gecko", limit=10)
    assert r["total_found"] == 3
    assert {h["session_id"] for h in r["results"]} == {"s-later-1", "s-later-2", "s-later-3"}
    monkeypatch.setattr(keyword, "BROAD_WINDOW", 100)
    assert ks.search("gecko")["results"][0]["session_id"] == "s-first"


def test_scope_and_session_filters(manager: SessionManager, ks: KeywordSearch) -> None:
    seed(manager, "s-alice", ["heron roadmap"], scope="user", scope_id="alice")
    seed(manager, "s-bob", ["heron roadmap"], scope="user", scope_id="bob")
    seed(manager, "s-agent", ["heron roadmap"], scope="agent", scope_id="planner")
    assert [h["session_id"] for h in ks.search("heron", scope_id="bob")["results"]] == ["s-bob"]
    assert {h["session_id"] for h in ks.search("heron", scope="user")["results"]} == {"s-alice", "s-bob"}
    assert ks.search("heron", scope="user", scope_id="planner")["total_found"] == 0
    inside = ks.search("heron", session_id="s-agent")
    assert inside["mode"] == "discovery" and [h["session_id"] for h in inside["results"]] == ["s-agent"]


def test_cjk_queries_chinese_and_japanese(manager: SessionManager, ks: KeywordSearch) -> None:
    seed(manager, "s-zh", ["我们下周讨论数据库迁移计划，预算已经批准了。", "好的，我会准备迁移步骤。"])
    seed(manager, "s-ja", ["来週の会議で予算を最終決定します。", "プロジェクトの締め切りは六月末です。"])
    seed(manager, "s-en", ["budget meeting next week"])

    def top(q: str) -> list[str]:
        r = ks.search(q, limit=5)
        assert r["success"], r
        return [h["session_id"] for h in r["results"]]

    assert top("数据库迁移") == ["s-zh"]  # long run: trigram substring
    assert top("迁移") == ["s-zh"]  # two characters
    assert top("締め切り") == ["s-ja"]
    assert top("予算") == ["s-ja"]  # Japanese kanji pair
    assert set(top("预算 予算")) == {"s-zh", "s-ja"}  # words separated by a space are optional
    assert top("猫") == []
    hit = ks.search("締め切り")["results"][0]
    assert "締め切り" in hit["snippet"] and hit["anchor_index"] == 1


def test_cjk_snippet_is_centred_on_the_match(manager: SessionManager, ks: KeywordSearch) -> None:
    text = "前" * 200 + "関数型プログラミング" + "後" * 200
    seed(manager, "s-long-ja", [text])
    snippet = ks.search("関数型プログラミング")["results"][0]["snippet"]
    assert snippet.startswith("…") and snippet.endswith("…")
    assert "関数型プログラミング" in snippet and len(snippet) <= 122
    middle = snippet.index("関数型")
    assert 40 <= middle <= 70  # centred, not at the start


def test_latin_snippet_is_centred_with_ellipses(manager: SessionManager, ks: KeywordSearch) -> None:
    text = (
        " ".join(["lorem ipsum dolor sit amet"] * 20)
        + " the flamingo escalation "
        + " ".join(["consectetur adipiscing elit"] * 20)
    )
    seed(manager, "s-lorem", [text])
    snippet = ks.search("flamingo escalation")["results"][0]["snippet"]
    assert snippet.startswith("…") and snippet.endswith("…") and "flamingo escalation" in snippet
    assert len(snippet) <= 122


def test_scroll_modes_and_errors(manager: SessionManager, ks: KeywordSearch) -> None:
    seed(manager, "s-1", [f"line {i}" for i in range(20)], archived=8)
    r = ks.search(session_id="s-1", around="7", window=2)
    assert r == {
        "success": True,
        "mode": "scroll",
        "session_id": "s-1",
        "around_message_id": "7",
        "messages": r["messages"],
    }
    assert [(m["index"], m["archived"]) for m in r["messages"]] == [
        (5, True),
        (6, True),
        (7, True),
        (8, False),
        (9, False),
    ]
    assert [m["index"] for m in ks.search(session_id="s-1", around=0, window=1)["messages"]] == [0, 1]
    recent = ks.search(session_id="s-1", window=3)
    assert recent["around_message_id"] == "19"
    assert [m["index"] for m in recent["messages"]] == [16, 17, 18, 19]

    for around in ("abc", "1.5", 20, -1, True):
        bad = ks.search(session_id="s-1", around=around)
        assert bad["success"] is False and bad["mode"] == "scroll" and bad["error"] and bad["hint"]
    unknown = ks.search(session_id="nope")
    assert unknown["success"] is False and "nope" in unknown["error"]
    assert ks.search(around=3)["success"] is False  # an anchor without a session


def test_browse_lists_recent_sessions_with_counts(manager: SessionManager, ks: KeywordSearch) -> None:
    seed(manager, "s-old", ["a", "b", "c"], t0=T0, archived=1)
    seed(manager, "s-new", ["a"], t0=T0 + HOUR, title="")
    r = ks.search(limit=1)
    assert r == {
        "success": True,
        "mode": "browse",
        "total_found": 2,
        "results": [
            {"session_id": "s-new", "title": "a", "when": "2026-06-09T11:13:20Z", "message_count": 1}
        ],
    }
    assert ks.search(limit=5)["results"][1] == {
        "session_id": "s-old",
        "title": "s-old",
        "when": "2026-06-09T10:33:20Z",
        "message_count": 3,
    }


@pytest.mark.parametrize("kwargs", [{"limit": 0}, {"limit": "x"}, {"window": -1}, {"query": 5}])
def test_bad_arguments_give_error_dicts(ks: KeywordSearch, kwargs: dict) -> None:
    kwargs = {"query": "x", **kwargs}
    r = ks.search(**kwargs)
    assert r["success"] is False and r["mode"] in ("discovery", "browse") and r["hint"]


def test_praisonai_fixtures_end_to_end(manager: SessionManager, ks: KeywordSearch) -> None:
    report = import_paths(manager.import_session, [FIXTURES])
    assert not report.failed and len(report.imported) == 5  # .json.lock files are skipped
    r = ks.search("deploy token XZ99")
    hit = r["results"][0]
    assert hit["session_id"] == "billing-review-8c1e" and hit["title"] == "Billing migration review"
    anchor = next(m for m in hit["messages"] if m["index"] == hit["anchor_index"])
    assert anchor["archived"] is True and "XZ99" in anchor["content"]
    # the cron run mentions the topic more often but is demoted
    billing = ks.search("billing migration")["results"]
    assert [h["session_id"] for h in billing] == ["billing-review-8c1e", "nightly-recon-2b7d"]
    # the two refund sessions share lineage_id
    refunds = [h["session_id"] for h in ks.search("refund policy annual")["results"]]
    assert refunds[0] in ("refund-policy-a1", "refund-policy-a2")
    assert len({"refund-policy-a1", "refund-policy-a2"} & set(refunds)) == 1
    assert ks.search("预算")["results"][0]["session_id"] == "cjk-planning-77"


def test_discovery_title_falls_back_to_the_first_user_message(
    manager: SessionManager, ks: KeywordSearch
) -> None:
    seed(
        manager, "s-untitled", ["Plan the walrus migration please", "Sure, walrus first."], title="", agent=""
    )
    seed(manager, "s-titled", ["walrus notes"], title="Walrus notes")
    hits = {h["session_id"]: h["title"] for h in ks.search("walrus", limit=5)["results"]}
    assert hits == {"s-untitled": "Plan the walrus migration please", "s-titled": "Walrus notes"}


def test_each_backend_searches_its_own_index(
    store: Store, manager: SessionManager, ks: KeywordSearch
) -> None:
    """FTS5 on SQLite, the tsvector/pg_trgm index on PostgreSQL: never the substring scan."""
    seed(manager, "s-1", ["the osprey migration", "迁移计划"])
    assert ks.mode == ("fts5" if store.is_sqlite else "postgres")
    assert ks.search("osprey migrated")["results"][0]["session_id"] == "s-1"  # stemmed, both sides
    assert ks.search("迁移")["results"][0]["anchor_index"] == 1
