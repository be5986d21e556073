"""Recall rules for conversations between people: a question naming a person favours that
person's turns; a turn that is itself a question echoing the query can be demoted. Real store
and LanceDB, ``HashEmbedder``."""

from __future__ import annotations

from typing import Any

from memviewer.recall import names, scoring
from memviewer.store import speakers


def test_named_authors_exact_part_of_a_name_and_case() -> None:
    authors = {"Fahim Khan", "Muhhamed"}
    assert names.named_authors("What are Fahim's hobbies?", authors) == {"Fahim Khan"}
    assert names.named_authors("what did fahim khan read", authors) == {"Fahim Khan"}
    assert names.named_authors("What did elise bake?", {"elise", "Kevin"}) == {"elise"}


def test_named_authors_close_spelling_only_capitalised_and_only_without_exact() -> None:
    authors = {"Fahim Khan", "Muhhamed"}
    assert names.named_authors("When did Muhammad cancel plans?", authors) == {"Muhhamed"}
    # lower case is not taken as a name for a fuzzy match
    assert names.named_authors("when did muhammad cancel plans?", authors) == set()
    # an exact match wins over a close spelling of the other author
    assert names.named_authors("Did Paola meet Paolo?", {"Paola", "Kevin"}) == {"Paola"}
    assert names.named_authors("What is the weather like?", authors) == set()


def test_preferred_authors_none_when_every_author_is_named_or_none() -> None:
    authors = {"Fahim Khan", "Muhhamed"}
    assert names.preferred_authors("What games do Fahim and Muhammad play?", authors) == set()
    assert names.preferred_authors("What games does Fahim play?", authors) == {"Fahim Khan"}
    assert names.preferred_authors("What games does Fahim play?", set()) == set()


def test_author_of_reads_speaker_only() -> None:
    assert speakers.author_of({"speaker": "Ann", "name": "x"}) == "Ann"
    assert speakers.author_of({"name": "read_file"}) is None  # a tool message's function name
    assert speakers.author_of({"speaker": "  "}) is None
    assert speakers.author_of(None) is None
    # a raw JSON column reads the same; unreadable JSON names nobody
    assert speakers.author_of('{"speaker": " Ann "}') == "Ann"
    assert speakers.author_of("{not json") is None
    # a chat: at least half the turns name their author, and at least one turn
    assert speakers.is_chat(1, 2) and speakers.is_chat(3, 3)
    assert not speakers.is_chat(1, 3) and not speakers.is_chat(0, 0)


def test_echoes_query_only_for_a_question_repeating_the_query() -> None:
    q = scoring.content_terms("When did Fahim finish the Pachinko saga?")
    assert scoring.echoes_query("Did you finish the Pachinko saga yet?", q)
    assert not scoring.echoes_query("I finished the Pachinko saga last night.", q)  # an answer
    assert not scoring.echoes_query("How was your weekend?", q)  # a question about something else
    # a statement followed by an unrelated question is judged by its last sentence
    assert not scoring.echoes_query("I finished the Pachinko saga. How are you?", q)


def _chat(svc: Any, sid: str, turns: list[tuple[str, str, str]]) -> None:
    svc.import_session(
        {"id": sid, "agent": "chat", "scope": "conv", "scope_id": "c1", "started_at": 1_700_000_000.0},
        [
            {
                "id": f"{sid}-{i}",
                "role": role,
                "content": text,
                "timestamp": 1_700_000_000.0 + i,
                "meta": {"speaker": who},
            }
            for i, (who, role, text) in enumerate(turns)
        ],
    )


def _agent(svc: Any, sid: str, turns: list[tuple[str, str]], scope_id: str = "agent") -> None:
    svc.import_session(
        {"id": sid, "agent": "a", "scope": "conv", "scope_id": scope_id, "started_at": 1_700_000_000.0},
        [
            {"id": f"{sid}-{i}", "role": role, "content": text, "timestamp": 1_700_000_000.0 + i}
            for i, (role, text) in enumerate(turns)
        ],
    )


def _on_off(svc: Any, query: str, scope_id: str, mode: str, key: str) -> tuple[dict, dict]:
    """``{turn id: result}`` of a recall with the defaults and with the tuning key ``key`` at 0."""
    on = svc.recall(query, scope="conv", scope_id=scope_id, mode=mode)
    off = svc.recall(query, scope="conv", scope_id=scope_id, mode=mode, tuning={key: 0})
    return {r["turn_id"]: r for r in on["results"]}, {r["turn_id"]: r for r in off["results"]}


def test_recall_favours_the_named_authors_turns(service: Any) -> None:
    _chat(
        service,
        "s1",
        [
            ("Ann", "user", "I adopted a grey cat named Pixel from the shelter"),
            ("Bob", "assistant", "Bob here: my cat is a grey cat too, from the shelter as well"),
            ("Ann", "user", "Pixel sleeps all day"),
        ],
    )
    service.sync_index()
    q = "Which cat did Ann adopt from the shelter?"
    on = service.recall(q, scope="conv", scope_id="c1", mode="flat")
    off = service.recall(q, scope="conv", scope_id="c1", mode="flat", tuning={"name_prior": 0})
    by_id = {r["turn_id"]: r for r in on["results"]}
    assert by_id["s1-0"]["score_breakdown"]["speaker"] == 1.0
    assert by_id["s1-1"]["score_breakdown"]["speaker"] == 0.0
    assert "speaker" not in {k for r in off["results"] for k in r["score_breakdown"]}
    gap_on = by_id["s1-0"]["score"] - by_id["s1-1"]["score"]
    off_by_id = {r["turn_id"]: r for r in off["results"]}
    assert gap_on > off_by_id["s1-0"]["score"] - off_by_id["s1-1"]["score"]
    # naming both speakers favours neither
    both = service.recall("Which cat did Ann and Bob adopt?", scope="conv", scope_id="c1", mode="flat")
    assert all("speaker" not in r["score_breakdown"] for r in both["results"])


def test_recall_echo_penalty_demotes_a_question_turn(service: Any) -> None:
    _chat(
        service,
        "s2",
        [
            ("Bob", "assistant", "Did you finish the Pachinko saga?"),
            ("Ann", "user", "Yes, I finished the Pachinko saga on Sunday"),
        ],
    )
    service.sync_index()
    q = "When did Ann finish the Pachinko saga?"
    alone = {"name_prior": 0, "chat_neighbour_share": 0}  # the echo rule on its own
    plain = service.recall(q, scope="conv", scope_id="c1", mode="flat", tuning=alone)
    demoted = service.recall(
        q, scope="conv", scope_id="c1", mode="flat", tuning={**alone, "echo_penalty": 0.5}
    )
    p = {r["turn_id"]: r for r in plain["results"]}
    d = {r["turn_id"]: r for r in demoted["results"]}
    assert d["s2-0"]["score_breakdown"]["echo"] == 1.0 and "echo" not in d["s2-1"]["score_breakdown"]
    assert abs(d["s2-0"]["score"] - 0.5 * p["s2-0"]["score"]) < 1e-6
    assert abs(d["s2-1"]["score"] - p["s2-1"]["score"]) < 1e-6


def _stage1(svc: Any, query: str, scope_id: str, **tuning: float) -> dict[str, float]:
    out = svc.recall(query, scope="conv", scope_id=scope_id, tuning=tuning or None)
    return {s["session_id"]: s["score"] for s in out["diagnostics"]["stage1"]}


def test_chat_sessions_give_their_best_turn_a_stage1_share_agent_sessions_do_not(service: Any) -> None:
    for sid, topic in (("c-a", "sourdough bread baking"), ("c-b", "marathon running shoes")):
        _chat(service, sid, [("Ann", "user", f"I love {topic}"), ("Bob", "assistant", f"{topic} is fun")])
    for sid, topic in (("g-a", "sourdough bread baking"), ("g-b", "marathon running shoes")):
        service.import_session(
            {"id": sid, "agent": "a", "scope": "conv", "scope_id": "agent", "started_at": 1_700_000_000.0},
            [
                {"id": f"{sid}-{i}", "role": r, "content": f"{topic} {r}", "timestamp": 1_700_000_000.0 + i}
                for i, r in enumerate(("user", "assistant"))
            ],
        )
    service.sync_index()
    q = "Who loves sourdough bread?"
    chat_default, chat_off = _stage1(service, q, "c1"), _stage1(service, q, "c1", chat_session_turn_weight=0)
    assert chat_default != chat_off  # the best-turn share moved the chat sessions' scores
    agent_default = _stage1(service, q, "agent")
    assert agent_default == _stage1(service, q, "agent", chat_session_turn_weight=0)


def test_without_names_takes_out_the_authors_names_possessives_and_close_spellings() -> None:
    authors = {"Fahim Khan", "Muhhamed"}
    assert names.without_names("What are Fahim's hobbies?", authors) == "What are hobbies?"
    assert (
        names.without_names("What games do Fahim Khan and Muhammad play together?", authors)
        == "What games do and play together?"
    )
    assert names.without_names("How did Muhammad’s week go?", authors) == "How did week go?"
    # nobody named, or too little left: the query as it was
    assert names.without_names("What did Kate bake?", authors) == "What did Kate bake?"
    assert names.without_names("Fahim?", authors) == "Fahim?"
    assert names.without_names("What are Fahim's hobbies?", set()) == "What are Fahim's hobbies?"
    # a lower-case word is only taken out when it is exactly a part of a name
    assert names.without_names("what did fahim read", authors) == "what did read"
    assert names.without_names("what did muhammad read", authors) == "what did muhammad read"


def test_scope_authors_are_read_per_scope_and_brought_up_to_date(service: Any) -> None:
    _chat(service, "a1", [("Ann", "user", "hello"), ("Bob", "assistant", "hi")])
    service.import_session(
        {"id": "o1", "agent": "chat", "scope": "conv", "scope_id": "other", "started_at": 1_700_000_000.0},
        [{"id": "o1-0", "role": "user", "content": "x", "timestamp": 1.0, "meta": {"speaker": "Cleo"}}],
    )
    authors = service.parts.authors
    assert authors.of("conv", "c1") == {"Ann", "Bob"}
    assert authors.of("conv", "other") == {"Cleo"}
    assert authors.of(None, None) == {"Ann", "Bob", "Cleo"}
    _chat(service, "a2", [("Dana", "user", "new here")])  # a later turn, a new author
    assert authors.of("conv", "c1") == {"Ann", "Bob", "Dana"}
    assert authors.of("conv", "other") == {"Cleo"}


def _greeted_by_name(svc: Any, sid: str) -> None:
    """Bob greets Ann by name (turn 0); Ann says where she went kayaking (turn 1)."""
    _chat(
        svc,
        sid,
        [
            ("Bob", "assistant", "Ann, Ann, how are you doing today Ann?"),
            ("Ann", "user", "I went kayaking on the lake with my sister"),
            ("Bob", "assistant", "Nice weather for it"),
        ],
    )
    svc.sync_index()


def test_recall_searches_a_chat_without_its_own_names(service: Any) -> None:
    """Bob greets Ann by name; Ann's own turn answers. With the names taken out of the search
    text, the greeting no longer matches on the name, so Ann's answer ranks above it."""
    _greeted_by_name(service, "s3")
    q = "Where did Ann go kayaking?"
    alone = {"name_prior": 0, "chat_neighbour_share": 0}
    on = service.recall(q, scope="conv", scope_id="c1", mode="flat", tuning=alone)
    off = service.recall(q, scope="conv", scope_id="c1", mode="flat", tuning={**alone, "strip_names": 0})
    assert on["diagnostics"]["search_query"] == "Where did go kayaking?"
    assert off["diagnostics"]["search_query"] == q
    bm25_on = {r["turn_id"]: r["score_breakdown"]["bm25"] for r in on["results"]}
    bm25_off = {r["turn_id"]: r["score_breakdown"]["bm25"] for r in off["results"]}
    assert bm25_off.get("s3-0", 0.0) > 0.0  # the greeting matched on the name alone
    assert bm25_on.get("s3-0", 0.0) == 0.0
    assert on["results"][0]["turn_id"] == "s3-1"
    # an agent session (no speakers) is searched with the query as asked
    plain = service.recall(q, scope="conv", scope_id="nobody")
    assert plain["diagnostics"]["search_query"] == q


def test_why_not_ranks_bm25_on_the_text_recall_searched(service: Any) -> None:
    from memviewer.recall.why import why_not

    _greeted_by_name(service, "s4")
    params = {"scope": "conv", "scope_id": "c1", "mode": "flat"}
    q = "Where did Ann go kayaking?"
    _, why = why_not(service.parts, q, "s4-0", params, reranker=None)
    index_stage = next(s for s in why["stages"] if s["stage"] == "index")
    assert index_stage["bm25"]["rank"] is None  # the greeting only matched the name
    _, kept = why_not(service.parts, q, "s4-0", {**params, "tuning": {"strip_names": 0}}, reranker=None)
    assert next(s for s in kept["stages"] if s["stage"] == "index")["bm25"]["rank"] is not None


def test_a_chat_is_blended_with_the_chat_dense_share_an_agent_session_is_not(service: Any) -> None:
    _chat(
        service,
        "s5",
        [("Ann", "user", "I bake sourdough bread every Sunday"), ("Bob", "assistant", "Bread is great")],
    )
    service.import_session(
        {"id": "g1", "agent": "a", "scope": "conv", "scope_id": "agent", "started_at": 1_700_000_000.0},
        [{"id": "g1-0", "role": "user", "content": "I bake sourdough bread every Sunday", "timestamp": 1.0}],
    )
    service.sync_index()
    q = "who bakes sourdough bread"
    alone = {"chat_neighbour_share": 0, "chat_session_prior": 0, "chat_length_prior": 0}
    for scope_id, dense_w in (("c1", 0.7), ("agent", 0.5)):
        out = service.recall(q, scope="conv", scope_id=scope_id, mode="flat", tuning=alone)
        assert out["diagnostics"]["params"]["w_dense"] == dense_w
        for r in out["results"]:
            b = r["score_breakdown"]
            assert abs(r["score"] - (dense_w * b["dense"] + (1 - dense_w) * b["keyword"])) < 1e-5
    off = service.recall(q, scope="conv", scope_id="c1", mode="flat", tuning={**alone, "chat_dense_share": 0})
    assert off["diagnostics"]["params"]["w_dense"] == 0.5


def test_a_chosen_blend_is_kept_in_a_chat(service: Any) -> None:
    _chat(service, "s6", [("Ann", "user", "I bake sourdough bread"), ("Bob", "assistant", "Bread!")])
    service.sync_index()
    for given, dense_w in (({"dense": 0.0}, 0.0), ({"keyword": 0.0}, 1.0), ({"dense": 0.5}, 0.5)):
        out = service.recall("sourdough bread", scope="conv", scope_id="c1", mode="flat", weights=given)
        assert out["diagnostics"]["params"]["w_dense"] == dense_w


def test_only_questions_every_sentence_asks() -> None:
    assert scoring.only_questions("Where are you going skiing?")
    assert scoring.only_questions("Really?! Which one?")  # "?" among the closing marks
    assert scoring.only_questions("How are you? 😊")  # a sentence without a letter does not count
    assert scoring.only_questions("你去哪里了？")
    assert not scoring.only_questions("Wow! Where did you go?")  # a statement before the question
    assert not scoring.only_questions("I went to Rome. Have you been?")
    assert not scoring.only_questions("Where? [shares a photo of a beach]")
    assert not scoring.only_questions("I went to Rome.")
    assert not scoring.only_questions("")
    assert not scoring.only_questions("...")


def test_chat_question_turns_lose_a_share_answers_and_agent_questions_do_not(service: Any) -> None:
    _chat(
        service,
        "s3",
        [
            ("Bob", "assistant", "Where did you go skiing last winter?"),
            ("Ann", "user", "We went skiing in Whistler last winter, the snow was great"),
            ("Bob", "assistant", "Nice. I stayed home last winter."),
        ],
    )
    _agent(
        service,
        "g3",
        [
            ("user", "Which ski resort is best for skiing last winter's snow?"),
            ("assistant", "Whistler, last winter."),
        ],
    )
    service.sync_index()
    q = "Where did Ann go skiing last winter?"
    for mode in ("flat", "hierarchical"):
        a, b = _on_off(service, q, "c1", mode, "chat_question_penalty")
        assert a["s3-0"]["score_breakdown"]["question"] == 1.0
        assert "question" not in b["s3-0"]["score_breakdown"]
        assert (
            "question" not in a["s3-1"]["score_breakdown"] and "question" not in a["s3-2"]["score_breakdown"]
        )
        if mode == "flat":  # hierarchical adds the session prior after the penalty
            assert abs(a["s3-0"]["score"] - 0.5 * b["s3-0"]["score"]) < 1e-6
        # the answer's neighbour share still reads the question's score before the penalty
        assert abs(a["s3-1"]["score"] - b["s3-1"]["score"]) < 1e-6
        assert a["s3-1"]["score_breakdown"]["neighbour"] == b["s3-1"]["score_breakdown"]["neighbour"]
    agent = service.recall(q, scope="conv", scope_id="agent", mode="flat")
    assert agent["results"] and all("question" not in r["score_breakdown"] for r in agent["results"])


def test_asks_to_recall_only_a_question_pointing_back() -> None:
    assert scoring.asks_to_recall("What did we decide about the webhook backoff last time?")
    assert scoring.asks_to_recall("Do you remember which payment provider we chose?")
    assert scoring.asks_to_recall("Can you remind me what documents I need?")
    assert scoring.asks_to_recall("上次我们决定用什么缓存策略？")
    # a question that points back at nothing, and statements that do
    assert not scoring.asks_to_recall("Which ski resort has the best snow?")
    assert not scoring.asks_to_recall("We decided on a 30 s cap last time.")
    # a statement before the question: it may hold the fact asked about later
    assert not scoring.asks_to_recall("I used to play tennis. Do you remember the drills?")


def test_agent_requests_to_recall_lose_a_share_other_questions_do_not(service: Any) -> None:
    _agent(
        service,
        "g4",
        [
            ("user", "What did we decide about the webhook retry backoff last time?"),
            ("assistant", "We settled on exponential webhook retry backoff, base 0.5 s, cap 30 s."),
            ("user", "Which webhook retry backoff library is fastest?"),
        ],
    )
    service.sync_index()
    q = "what webhook retry backoff did we pick?"
    for mode in ("flat", "hierarchical"):
        a, b = _on_off(service, q, "agent", mode, "question_penalty")
        assert a["g4-0"]["score_breakdown"]["question"] == 1.0
        assert all("question" not in r["score_breakdown"] for r in b.values())
        assert all("question" not in a[t]["score_breakdown"] for t in ("g4-1", "g4-2"))
        assert abs(a["g4-0"]["score"] - 0.5 * b["g4-0"]["score"]) < 1e-6
        assert abs(a["g4-2"]["score"] - b["g4-2"]["score"]) < 1e-6  # a question, but not a request to recall
    # the chat key does not reach agent sessions (nor this key chats: the chat test above)
    chat_off = service.recall(
        q, scope="conv", scope_id="agent", mode="flat", tuning={"chat_question_penalty": 0}
    )
    assert {r["turn_id"]: r for r in chat_off["results"]}["g4-0"]["score_breakdown"]["question"] == 1.0


def _why_lines(svc: Any, query: str, turn_ids: tuple[str, ...]) -> dict[str, str]:
    """``recall --why``'s stage lines for each turn, over the chat scope."""
    from memviewer.present.why_view import stage_lines
    from memviewer.recall.why import why_not

    scope = {"scope": "conv", "scope_id": "c1"}
    return {tid: "\n".join(stage_lines(why_not(svc.parts, query, tid, scope)[1])) for tid in turn_ids}


def test_why_says_a_chat_question_turn_was_demoted(service: Any) -> None:
    _chat(
        service,
        "s4",
        [
            ("Bob", "assistant", "Where did you go skiing last winter?"),
            ("Ann", "user", "We went skiing in Whistler last winter, the snow was great"),
        ],
    )
    service.sync_index()
    lines = _why_lines(service, "Where did Ann go skiing last winter?", ("s4-0", "s4-1"))
    rule = "it only asks (a chat: chat_question_penalty; an agent's request to recall: question_penalty)"
    assert f"demoted: {rule}" in lines["s4-0"]
    assert "it only asks" not in lines["s4-1"]


_LONG = "We drove to Whistler in January with my brother Tom and went skiing in deep powder snow on Blackcomb"


def test_short_chat_turns_keep_less_of_their_score_long_ones_and_agent_turns_all(service: Any) -> None:
    _chat(
        service,
        "s5",
        [
            ("Bob", "assistant", "Hey Ann, skiing?"),
            ("Ann", "user", _LONG),
            ("Bob", "assistant", "Skiing sounds great."),
        ],
    )
    service.import_session(
        {"id": "g5", "agent": "a", "scope": "conv", "scope_id": "agent", "started_at": 1_700_000_000.0},
        [{"id": "g5-0", "role": "user", "content": "Skiing sounds great.", "timestamp": 1.7e9}],
    )
    service.sync_index()
    q = "Where did Ann go skiing?"
    on = service.recall(q, scope="conv", scope_id="c1", mode="flat")
    off = service.recall(q, scope="conv", scope_id="c1", mode="flat", tuning={"chat_length_prior": 0})
    a = {r["turn_id"]: r for r in on["results"]}
    b = {r["turn_id"]: r for r in off["results"]}
    # "skiing sounds great": 3 content words of the 10 that keep a whole score, λ = 0.2
    cut = 0.2 * (1 - len(scoring.content_terms("Skiing sounds great.")) / 10)
    assert a["s5-2"]["score_breakdown"]["short"] == round(cut, 4)
    assert abs(a["s5-2"]["score"] - (1 - cut) * b["s5-2"]["score"]) < 1e-6
    assert "short" not in a["s5-1"]["score_breakdown"]  # ten content words or more: untouched
    assert abs(a["s5-1"]["score"] - b["s5-1"]["score"]) < 1e-6
    assert all("short" not in r["score_breakdown"] for r in off["results"])
    # a longer threshold takes more off the same turn
    harder = {"chat_length_prior": 0.5, "length_words": 20}
    more = service.recall(q, scope="conv", scope_id="c1", mode="flat", tuning=harder)
    assert {r["turn_id"]: r for r in more["results"]}["s5-2"]["score_breakdown"]["short"] > cut
    agent = service.recall(q, scope="conv", scope_id="agent", mode="flat")
    assert agent["results"] and all("short" not in r["score_breakdown"] for r in agent["results"])
    # agent sessions get it only when asked for (it lost LongMemEval recall)
    asked = service.recall(q, scope="conv", scope_id="agent", mode="flat", tuning={"length_prior": 0.2})
    assert {r["turn_id"]: r for r in asked["results"]}["g5-0"]["score_breakdown"]["short"] == round(cut, 4)


def test_why_says_a_short_chat_turn_was_demoted(service: Any) -> None:
    _chat(service, "s6", [("Bob", "assistant", "Skiing, great!"), ("Ann", "user", _LONG)])
    service.sync_index()
    lines = _why_lines(service, "Where did Ann go skiing?", ("s6-0", "s6-1"))
    assert "demoted: a short message (chat_length_prior / length_prior)" in lines["s6-0"]
    assert "demoted" not in lines["s6-1"]
