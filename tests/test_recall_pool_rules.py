"""Hierarchical recall's pool rules for chats between named people: the flat safety net
(the best Stage-2 turns join the pool whatever their session) and the session prior (a
pooled turn takes a share of its session's Stage-1 score; a net turn from outside Stage 1
the weakest Stage-1 session's). Agent sessions keep the plain
post-filter. Real store and LanceDB, ``HashEmbedder``."""

from __future__ import annotations

from typing import Any

TOPICS = (
    "sourdough bread baking starter flour",
    "marathon running shoes training plan",
    "guitar chords practice songs evening",
    "garden tomatoes watering summer heat",
    "train tickets weekend trip mountains",
    "chess openings online tournament rating",
)


def _chats(svc: Any, scope_id: str, named: bool) -> None:
    for n, topic in enumerate(TOPICS):
        words = topic.split()
        turns = [
            ("Ann" if i % 2 == 0 else "Bob", "user" if i % 2 == 0 else "assistant", text)
            for i, text in enumerate(
                [
                    f"I was thinking about {words[0]} {words[1]} today",
                    f"{words[2]} and {words[3]} sound great",
                    f"Ann keeps talking about {words[4]}",
                    f"what about {words[0]} and {words[4]} with bread",
                ]
            )
        ]
        svc.import_session(
            {
                "id": f"{scope_id}-{n}",
                "agent": "chat",
                "scope": "conv",
                "scope_id": scope_id,
                "started_at": 1_700_000_000.0 + n * 86_400,
            },
            [
                {
                    "id": f"{scope_id}-{n}-{i}",
                    "role": role,
                    "content": text,
                    "timestamp": 1_700_000_000.0 + n * 86_400 + i,
                    **({"meta": {"speaker": who}} if named else {}),
                }
                for i, (who, role, text) in enumerate(turns)
            ],
        )


Q = "What did Ann say about bread and flour and tomatoes?"


def _ids(out: dict[str, Any]) -> list[str]:
    return [r["turn_id"] for r in out["results"]]


def test_safety_net_without_prior_makes_hierarchical_return_flats_top(service: Any) -> None:
    _chats(service, "c1", named=True)
    service.sync_index()
    kw: dict[str, Any] = {"scope": "conv", "scope_id": "c1", "top_k": 6}
    flat = service.recall(Q, mode="flat", **kw)
    net = service.recall(Q, top_sessions=1, tuning={"chat_session_prior": 0, "chat_flat_pool": 6}, **kw)
    bare = service.recall(Q, top_sessions=1, tuning={"chat_session_prior": 0, "chat_flat_pool": 0}, **kw)
    assert _ids(net) == _ids(flat)  # the best 6 anywhere are pooled, so top 6 is flat's top 6
    assert len({r["session_id"] for r in bare["results"]}) == 1  # without it: one session's turns
    assert len({r["session_id"] for r in flat["results"]}) > 1
    rules = net["diagnostics"]["pool_rules"]
    assert rules["chat"] is True and rules["flat_pool"] == 6 and rules["safety_net"]
    dropped = {d["turn_id"] for d in net["diagnostics"]["dropped"] + net["diagnostics"]["capped"]}
    assert not dropped & set(rules["safety_net"])  # re-added turns are not reported as dropped


def test_session_prior_blends_the_sessions_stage1_score(service: Any) -> None:
    _chats(service, "c1", named=True)
    service.sync_index()
    kw: dict[str, Any] = {"scope": "conv", "scope_id": "c1", "top_k": 10}
    off = service.recall(Q, tuning={"chat_session_prior": 0}, **kw)
    on = service.recall(Q, tuning={"chat_session_prior": 0.5}, **kw)
    stage1 = {s["session_id"]: s["score"] for s in on["diagnostics"]["stage1"]}
    top = max(stage1.values())
    before = {r["turn_id"]: r["score"] for r in off["results"]}
    assert on["diagnostics"]["pool_rules"]["session_prior"] == 0.5
    checked = 0
    for r in on["results"]:
        part = stage1.get(r["session_id"], 0.0) / top
        assert abs(r["score_breakdown"]["session"] - part) < 1e-5
        if r["turn_id"] in before:
            assert abs(r["score"] - before[r["turn_id"]] * (0.5 + 0.5 * part)) < 1e-5
            checked += 1
    assert checked >= 3
    assert all("session" not in r["score_breakdown"] for r in off["results"])
    scores = [r["score"] for r in on["results"]]
    assert scores == sorted(scores, reverse=True)


def test_safety_net_turns_outside_stage1_take_the_weakest_sessions_prior(service: Any) -> None:
    _chats(service, "c1", named=True)
    service.sync_index()
    kw: dict[str, Any] = {"scope": "conv", "scope_id": "c1", "top_k": 30, "top_sessions": 2}
    default = service.recall(Q, **kw)["diagnostics"]["pool_rules"]
    assert default["flat_pool"] == 3 and default["session_prior"] == 0.2  # the chat defaults
    out = service.recall(Q, tuning={"chat_flat_pool": 8}, **kw)  # deep enough to reach past Stage 1
    rules = out["diagnostics"]["pool_rules"]
    stage1 = {s["session_id"]: s["score"] for s in out["diagnostics"]["stage1"]}
    top, weakest = max(stage1.values()), min(stage1.values())
    assert weakest < top
    outside = [r for r in out["results"] if r["session_id"] not in stage1]
    assert outside and {r["turn_id"] for r in outside} <= set(rules["safety_net"])
    for r in outside:
        assert abs(r["score_breakdown"]["session"] - weakest / top) < 1e-5
    inside = [r for r in out["results"] if r["session_id"] in stage1]
    for r in inside:
        assert abs(r["score_breakdown"]["session"] - stage1[r["session_id"]] / top) < 1e-5


def test_agent_sessions_keep_the_plain_post_filter(service: Any) -> None:
    _chats(service, "agent", named=False)
    service.sync_index()
    kw: dict[str, Any] = {"scope": "conv", "scope_id": "agent", "top_k": 10, "top_sessions": 1}
    default = service.recall(Q, **kw)
    off = service.recall(Q, tuning={"chat_session_prior": 0, "chat_flat_pool": 0}, **kw)
    assert default["diagnostics"]["pool_rules"] == {
        "chat": False,
        "chunks_per_session": 3,
        "flat_pool": 0,
        "session_prior": 0.0,
        "safety_net": [],
    }
    assert [(r["turn_id"], r["score"]) for r in default["results"]] == [
        (r["turn_id"], r["score"]) for r in off["results"]
    ]
    assert len({r["session_id"] for r in default["results"]}) == 1
    # the rules can still be asked for explicitly
    net = service.recall(Q, tuning={"flat_pool": 10}, **kw)
    assert len({r["session_id"] for r in net["results"]}) > 1


def test_session_turn_top_sums_more_than_the_best_turn(service: Any) -> None:
    _chats(service, "c1", named=True)
    service.sync_index()

    def stage1(**tuning: float) -> dict[str, float]:
        out = service.recall(Q, scope="conv", scope_id="c1", tuning=tuning)
        return {s["session_id"]: s["score_breakdown"]["best_turn"] for s in out["diagnostics"]["stage1"]}

    one, three = stage1(), stage1(session_turn_top=3)
    assert any(three[s] > one[s] + 1e-6 for s in one if s in three)


def test_chats_raise_m_agent_sessions_keep_it(service: Any) -> None:
    _chats(service, "c1", named=True)
    _chats(service, "agent", named=False)
    service.sync_index()

    def per_session(scope_id: str, **tuning: float) -> tuple[int, int]:
        out = service.recall(Q, scope="conv", scope_id=scope_id, top_sessions=1, tuning=tuning or None)
        return len(out["results"]), out["diagnostics"]["params"]["chunks_per_session"]

    # all four turns of the one Stage-1 session (the safety net off: it would add others)
    assert per_session("c1", chat_flat_pool=0) == (4, 10)
    assert per_session("c1", chat_chunks_per_session=0, chat_flat_pool=0) == (3, 3)
    n, m = per_session("agent")
    assert n <= 3 and m == 3


def test_chats_score_a_turn_with_its_neighbours_agent_sessions_do_not(service: Any) -> None:
    _chats(service, "c1", named=True)
    _chats(service, "agent", named=False)
    service.sync_index()
    for mode in ("hierarchical", "flat"):
        chat = service.recall(Q, scope="conv", scope_id="c1", mode=mode)
        off = service.recall(Q, scope="conv", scope_id="c1", mode=mode, tuning={"chat_neighbour_share": 0})
        agent = service.recall(Q, scope="conv", scope_id="agent", mode=mode)
        assert all("neighbour" in r["score_breakdown"] for r in chat["results"])
        assert all("neighbour" not in r["score_breakdown"] for r in off["results"] + agent["results"])
        # a turn whose neighbour is a candidate gets 0.2 of the neighbour's score
        by_id = {r["turn_id"]: r for r in chat["results"]}
        assert any(r["score_breakdown"]["neighbour"] > 0 for r in by_id.values())


def test_why_follows_a_turn_the_safety_net_kept(service: Any) -> None:
    from memviewer.recall.why import NET_REASON, why_not

    _chats(service, "c1", named=True)
    service.sync_index()
    params: dict[str, Any] = {"scope": "conv", "scope_id": "c1", "top_k": 30, "top_sessions": 2}
    params["tuning"] = {"chat_flat_pool": 8}
    out = service.recall(Q, **params)
    stage1 = {s["session_id"] for s in out["diagnostics"]["stage1"]}
    net = [r for r in out["results"] if r["session_id"] not in stage1]
    assert net and {r["turn_id"] for r in net} <= set(out["diagnostics"]["pool_rules"]["safety_net"])
    turn = net[-1]["turn_id"]
    _, why = why_not(service.parts, Q, turn, params)
    stages = {s["stage"]: s for s in why["stages"]}
    assert why["retrieved"] is True and why["eliminated_at"] is None
    assert stages["stage1"]["passed"] is False  # its session was not chosen …
    assert (
        stages["post_filter"]["passed"] is True and stages["post_filter"]["reason"] == NET_REASON
    )  # … the net kept it
    assert stages["session_cap"]["passed"] is True and stages["top_k"]["passed"] is True
    # cut below it: eliminated by the final cut, not by the post-filter
    rank = [r["turn_id"] for r in out["results"]].index(turn) + 1
    _, cut = why_not(service.parts, Q, turn, {**params, "top_k": rank - 1})
    assert cut["retrieved"] is False and cut["eliminated_at"] in ("top_k", "rerank")
