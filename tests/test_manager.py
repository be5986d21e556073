"""Session and episode lifecycle, guards, idempotence, pruning and shutdown."""

from __future__ import annotations

import time

import pytest

from memviewer.errors import MemviewerError
from memviewer.session.manager import SessionManager
from memviewer.store import repos
from memviewer.store.db import Store


@pytest.fixture
def mgr(tmp_path):
    store = Store.open(tmp_path / "m.db")
    m = SessionManager(store)
    yield m
    store.close()


def kinds(events):
    return [e.kind for e in events]


def test_open_session_is_idempotent(mgr):
    seen = []
    mgr.bus.on_any(seen.append)
    a = mgr.open_session(session_id="s1", agent="bot", scope="user", scope_id="u1")
    b = mgr.open_session(session_id="s1", agent="other-name", scope="user", scope_id="u2")
    assert a == b  # the second call neither changes nor duplicates the session
    assert kinds(seen) == ["session.started"]
    with mgr.store.read() as conn:
        assert repos.count_sessions(conn) == 1


def test_scope_defaults_follow_agent_when_no_scope_id(mgr):
    s = mgr.open_session(session_id="s1", agent="bot")
    assert (s["scope"], s["scope_id"]) == ("agent", "bot")
    u = mgr.open_session(session_id="s2", agent="bot", scope_id="u7")
    assert (u["scope"], u["scope_id"]) == ("user", "u7")


def test_episode_lifecycle_and_event_order(mgr):
    seen = []
    mgr.bus.on_any(seen.append)
    mgr.open_session(session_id="s1", agent="bot")
    ep = mgr.start_episode("s1", "fix the flaky test", episode_id="e1")
    assert ep["first_turn"]["role"] == "user"
    assert ep["first_turn"]["index"] == 0
    t = mgr.add_turn("e1", "assistant", "Reading the log…")
    assert t["index"] == 1
    mgr.add_turn("e1", "tool", "<log>", metadata={"tool": "read_file"})
    done = mgr.finalize_episode("e1", r_task=0.5)
    assert done["status"] == "closed" and done["closed_by"] == "finalized" and done["r_task"] == 0.5
    assert kinds(seen) == [
        "session.started",
        "episode.started",
        "episode.turn_added",
        "episode.turn_added",
        "episode.turn_added",
        "episode.finalized",
    ]
    assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
    assert seen[-1].payload == {"closed_by": "finalized", "r_task": 0.5}
    with mgr.store.read() as conn:
        turns = repos.session_turns(conn, "s1")
    assert [x["role"] for x in turns] == ["user", "assistant", "tool"]
    assert turns[2]["meta"] == {"tool": "read_file"}


def test_session_title_defaults_to_first_user_message(mgr):
    mgr.open_session(session_id="s1", agent="bot")
    mgr.start_episode("s1", "  plan the billing\nmigration  ", episode_id="e1")
    with mgr.store.read() as conn:
        assert repos.get_session(conn, "s1")["title"] == "plan the billing migration"


@pytest.mark.parametrize("message", ["", "   ", "\n\t"])
def test_empty_user_message_is_invalid_argument(mgr, message):
    mgr.open_session(session_id="s1")
    with pytest.raises(MemviewerError) as err:
        mgr.start_episode("s1", message)
    assert err.value.code == "invalid_argument"


def test_guards_and_error_codes(mgr):
    with pytest.raises(MemviewerError) as err:
        mgr.start_episode("nope", "hello")
    assert err.value.code == "session_not_found"
    with pytest.raises(MemviewerError) as err:
        mgr.add_turn("nope", "assistant", "x")
    assert err.value.code == "episode_not_found"
    with pytest.raises(MemviewerError) as err:
        mgr.finalize_episode("nope")
    assert err.value.code == "episode_not_found"
    mgr.open_session(session_id="s1")
    mgr.start_episode("s1", "go", episode_id="e1")
    with pytest.raises(MemviewerError) as err:
        mgr.add_turn("e1", "robot", "x")
    assert err.value.code == "invalid_argument"
    with pytest.raises(MemviewerError) as err:
        mgr.add_turn("e1", "assistant", 42)  # type: ignore[arg-type]
    assert err.value.code == "invalid_argument"
    mgr.abandon_episode("e1", reason="user left")
    with pytest.raises(MemviewerError) as err:
        mgr.add_turn("e1", "assistant", "late")
    assert err.value.code == "conflict"
    with pytest.raises(MemviewerError) as err:
        mgr.finalize_episode("e1")
    assert err.value.code == "conflict"


def test_abandon_emits_finalized_with_closed_by_then_abandoned(mgr):
    seen = []
    mgr.bus.on("episode.finalized", seen.append)
    mgr.bus.on("episode.abandoned", seen.append)
    mgr.open_session(session_id="s1")
    mgr.start_episode("s1", "go", episode_id="e1")
    ep = mgr.abandon_episode("e1", reason="timeout")
    assert ep["closed_by"] == "abandoned" and ep["meta"]["close_reason"] == "timeout"
    assert [(e.kind, e.payload["closed_by"]) for e in seen] == [
        ("episode.finalized", "abandoned"),
        ("episode.abandoned", "abandoned"),
    ]


def test_replayed_commands_are_idempotent(mgr):
    mgr.open_session(session_id="s1")
    mgr.start_episode("s1", "go", episode_id="e1", turn_id="t0")
    first = mgr.add_turn("e1", "assistant", "one", turn_id="t1")
    mgr.finalize_episode("e1")
    # a publisher replaying its spool after the hub acknowledged everything
    again = mgr.start_episode("s1", "go", episode_id="e1", turn_id="t0")
    assert again["episode_id"] == "e1"
    assert mgr.add_turn("e1", "assistant", "one", turn_id="t1") == first
    mgr.finalize_episode("e1")
    with mgr.store.read() as conn:
        assert len(repos.session_turns(conn, "s1")) == 2
    assert mgr.store.last_seq == 5  # started, ep.started, 2 turn_added, finalized


def test_batch_isolates_bad_commands(mgr):
    mgr.open_session(session_id="s1")
    mgr.start_episode("s1", "go", episode_id="e1")
    results = mgr.apply_batch(
        [
            {"op": "add_turn", "episode_id": "e1", "role": "assistant", "content": "ok 1"},
            {"op": "add_turn", "episode_id": "missing", "role": "assistant", "content": "x"},
            {"op": "add_turn", "episode_id": "e1", "role": "assistant"},
            {"op": "explode"},
            "not a dict",
            {"op": "add_turn", "episode_id": "e1", "role": "assistant", "content": "ok 2"},
        ]
    )
    codes = [r.get("error", {}).get("code") for r in results]
    assert codes == [
        None,
        "episode_not_found",
        "invalid_argument",
        "invalid_argument",
        "invalid_argument",
        None,
    ]
    with mgr.store.read() as conn:
        contents = [t["content"] for t in repos.session_turns(conn, "s1")]
    assert contents == ["go", "ok 1", "ok 2"]
    events = mgr.store.events_since(0)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def test_close_session_abandons_open_episodes(mgr):
    mgr.open_session(session_id="s1")
    mgr.start_episode("s1", "go", episode_id="e1")
    s = mgr.close_session("s1")
    assert s["status"] == "closed"
    with mgr.store.read() as conn:
        ep = repos.get_episode(conn, "e1")
    assert ep["closed_by"] == "abandoned" and ep["meta"]["close_reason"] == "session_closed"
    with pytest.raises(MemviewerError) as err:
        mgr.start_episode("s1", "again")
    assert err.value.code == "conflict"


def test_prune_idle_only_touches_idle_open_sessions(mgr):
    old = time.time() - 3 * 86400
    mgr.open_session(session_id="old", ts=old)
    mgr.start_episode("old", "hi", episode_id="e-old", ts=old)
    mgr.open_session(session_id="fresh")
    mgr.open_session(session_id="closed-old", ts=old)
    mgr.close_session("closed-old", ts=old)
    pruned = mgr.prune_idle(time.time() - 86400)
    assert pruned == ["old"]
    with mgr.store.read() as conn:
        assert repos.get_session(conn, "old")["status"] == "pruned"
        assert repos.get_session(conn, "fresh")["status"] == "open"
        assert repos.get_episode(conn, "e-old")["closed_by"] == "abandoned"
    assert mgr.store.events_since(0, kinds=["session.idle_pruned"])[0].session_id == "old"


def test_shutdown_abandons_open_episodes_and_keeps_sessions(mgr):
    mgr.open_session(session_id="s1")
    mgr.start_episode("s1", "a", episode_id="e1")
    mgr.start_episode("s1", "b", episode_id="e2")
    mgr.finalize_episode("e2")
    assert mgr.shutdown() == ["e1"]
    with mgr.store.read() as conn:
        assert repos.get_episode(conn, "e1")["meta"]["close_reason"] == "shutdown"
        assert repos.get_session(conn, "s1")["status"] == "open"


def test_intent_is_stored_on_the_episode(tmp_path):
    from memviewer.session.intent import IntentClassifier

    store = Store.open(tmp_path / "m.db")
    mgr = SessionManager(store, classify=IntentClassifier().classify)
    mgr.open_session(session_id="s1")
    ep = mgr.start_episode("s1", "do you remember what we decided last time?")
    assert ep["intent"]["kind"] == "memory_probe"
    assert ep["intent"]["rule_id"] != "none"
    with store.read() as conn:
        row = repos.get_episode(conn, ep["episode_id"])
    assert row["intent_kind"] == "memory_probe" and row["intent_confidence"] > 0
    store.close()


def test_values_no_column_can_hold_are_invalid_arguments_not_internal_errors(tmp_path) -> None:  # noqa: ANN001
    """They used to come back as ``internal`` (which a publisher may retry) with the SQL statement."""
    from memviewer.session.manager import SessionManager
    from memviewer.store.db import Store

    mgr = SessionManager(Store.open(tmp_path / "m.db"))
    results = mgr.apply_batch(
        [
            {"op": "open_session", "session_id": "s-nan", "agent": "a", "ts": float("nan")},
            {"op": "open_session", "session_id": "s-big", "agent": "a", "active_window": 10**30},
            {"op": "open_session", "session_id": "s-far", "agent": "a", "ts": 1e300},
            {"op": "open_session", "session_id": "s-ok", "agent": "a"},
        ]
    )
    for r in results[:3]:
        assert r["error"]["code"] == "invalid_argument", r
        assert "[SQL:" not in r["error"]["message"] and "INSERT" not in r["error"]["message"]
    assert "ok" in results[3]
