"""Compaction keeps indexes = projection positions, one carried-forward summary,
and every turn's content, index and metadata once archived."""

from __future__ import annotations

import pytest

from memviewer.session.manager import SessionManager
from memviewer.store import repos
from memviewer.store.db import Store


@pytest.fixture
def mgr(tmp_path):
    store = Store.open(tmp_path / "m.db")
    yield SessionManager(store)
    store.close()


def projection(mgr, sid="s1"):
    with mgr.store.read() as conn:
        return repos.session_turns(conn, sid)


def check_invariants(turns, total_real):
    assert [t["idx"] for t in turns] == list(range(len(turns)))
    archived = [t for t in turns if t["archived"]]
    active = [t for t in turns if not t["archived"]]
    assert turns[: len(archived)] == archived  # archived first
    summaries = [t for t in turns if t["is_compaction_summary"]]
    assert len(summaries) <= 1
    if summaries:
        s = summaries[0]
        assert active[0] is s and s["role"] == "system"
        assert s["replaced_count"] == len(archived)
        assert s["meta"] == {"compaction": True, "compacted_count": len(archived)}
        assert s["content"].count("[compaction summary]") == 1  # never nested
    real = [t for t in turns if not t["is_compaction_summary"]]
    assert len(real) == total_real


def test_several_rounds_preserve_counts_and_archived_turns(mgr):
    mgr.open_session(session_id="s1", active_window=6)
    mgr.start_episode("s1", "start", episode_id="e1", metadata={"n": -1})
    frozen: dict[str, dict] = {}
    rounds = []
    mgr.bus.on("session.compacted", rounds.append)
    for i in range(40):
        mgr.add_turn("e1", "assistant" if i % 2 else "user", f"message {i}", metadata={"n": i})
        turns = projection(mgr)
        check_invariants(turns, total_real=i + 2)
        for t in turns:
            if t["archived"]:
                if t["id"] in frozen:  # once archived, nothing about it changes
                    assert t == frozen[t["id"]]
                frozen[t["id"]] = t
        active_real = [t for t in turns if not t["archived"] and not t["is_compaction_summary"]]
        assert len(active_real) <= 6
    assert len(rounds) >= 3
    assert sum(r.payload["archived_count"] for r in rounds) == len(frozen)
    assert rounds[-1].payload["replaced_count"] == len(frozen)
    # archived turns keep their content and metadata
    assert [t["content"] for t in projection(mgr) if t["archived"]][:2] == ["start", "message 0"]
    assert [t["meta"] for t in projection(mgr) if t["archived"]][:2] == [{"n": -1}, {"n": 0}]


def test_summary_carries_highlights_forward(mgr):
    mgr.open_session(session_id="s1", active_window=4)
    mgr.start_episode("s1", "the deploy token is XZ99", episode_id="e1")
    for i in range(12):
        mgr.add_turn("e1", "assistant", f"step {i}")
    summary = next(t for t in projection(mgr) if t["is_compaction_summary"])
    assert "XZ99" in summary["content"]  # first-round highlight survived later rounds
    assert summary["content"].startswith("[compaction summary] ")


def test_keep_all_never_compacts(mgr):
    mgr.open_session(session_id="s1", active_window=3, retention="keep_all")
    mgr.start_episode("s1", "go", episode_id="e1")
    for i in range(10):
        mgr.add_turn("e1", "assistant", f"m{i}")
    turns = projection(mgr)
    assert not any(t["archived"] or t["is_compaction_summary"] for t in turns)


def test_compaction_event_names_the_archived_turns(mgr):
    events = []
    mgr.bus.on("session.compacted", events.append)
    mgr.open_session(session_id="s1", active_window=2)
    mgr.start_episode("s1", "go", episode_id="e1", turn_id="t0")
    mgr.add_turn("e1", "assistant", "a", turn_id="t1")
    mgr.add_turn("e1", "assistant", "b", turn_id="t2")
    assert len(events) == 1
    p = events[0].payload
    assert p["archived_turn_ids"] == ["t0", "t1"]
    assert p["summary_index"] == 2 and p["replaced_count"] == 2
    turns = projection(mgr)
    assert [(t["id"], t["idx"], t["archived"]) for t in turns if not t["is_compaction_summary"]] == [
        ("t0", 0, True),
        ("t1", 1, True),
        ("t2", 3, False),
    ]


def _call(cid: str) -> list[dict]:
    return [{"id": cid, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]


def test_a_tool_call_and_its_results_stay_on_one_side_of_the_boundary(mgr):
    """Whatever the window, the active side never opens with a tool result whose call was
    archived, and every result sits on the same side as its call (the real manager)."""
    for window in (3, 4, 5, 6, 7):
        sid = f"s{window}"
        mgr.open_session(session_id=sid, active_window=window)
        mgr.start_episode(sid, "read the logs", episode_id=f"e{window}")
        for n in range(12):
            cid = f"c{window}-{n}"
            mgr.add_turn(f"e{window}", "assistant", "", tool_calls=_call(cid))
            for _ in range(1 + n % 3):  # one to three results per call
                mgr.add_turn(f"e{window}", "tool", f"<log {n}>", tool_call_id=cid)
            mgr.add_turn(f"e{window}", "user", f"next {n}")
            turns = projection(mgr, sid)
            active_real = [t for t in turns if not t["archived"] and not t["is_compaction_summary"]]
            assert active_real[0]["role"] != "tool", (window, n)
            side = {
                c["id"]: t["archived"] for t in turns for c in (t["tool_calls"] or []) if isinstance(c, dict)
            }
            for t in turns:
                if t["role"] == "tool":
                    assert side[t["tool_call_id"]] == t["archived"], (window, n, t["idx"])
        assert any(t["archived"] for t in projection(mgr, sid))  # it did compact


def test_tool_safe_cut_moves_forward_when_the_call_opens_the_session():
    from memviewer.session.compaction import tool_safe_cut

    real = [{"role": r} for r in ("assistant", "tool", "tool", "user", "assistant")]
    assert tool_safe_cut(real, 1) == 3  # back would archive nothing: the results go with the call
    assert tool_safe_cut(real, 2) == 3
    assert tool_safe_cut(real, 4) == 4 and tool_safe_cut(real, 0) == 0
    mixed = [{"role": r} for r in ("user", "assistant", "tool", "user")]
    assert tool_safe_cut(mixed, 2) == 1  # the call stays active with its result
