"""The SQLite batch fast path stores exactly what the portable path stores."""

from __future__ import annotations

from memviewer.session.manager import SessionManager
from memviewer.store import repos
from memviewer.store.db import Store


def commands():
    cmds = [
        {"op": "open_session", "session_id": "s1", "agent": "bot", "active_window": 4, "ts": 100.0},
        {
            "op": "start_episode",
            "session_id": "s1",
            "user_message": "go",
            "episode_id": "e1",
            "turn_id": "u0",
            "ts": 101.0,
        },
    ]
    for i in range(9):  # crosses the window twice: two compaction rounds mid-batch
        cmds.append(
            {
                "op": "add_turn",
                "episode_id": "e1",
                "role": "assistant",
                "content": f"step {i}",
                "turn_id": f"t{i}",
                "ts": 102.0 + i,
                "metadata": {"i": i},
                "tool_calls": [{"name": "ls"}] if i == 3 else None,
            }
        )
    cmds += [
        {
            "op": "add_turn",
            "episode_id": "e1",
            "role": "assistant",
            "content": "step 0",
            "turn_id": "t0",
            "ts": 102.0,
            "metadata": {"i": 0},
        },  # replay
        {"op": "add_turn", "episode_id": "nope", "role": "assistant", "content": "x", "ts": 1.0},
        {"op": "add_turn", "episode_id": "e1", "role": "wizard", "content": "x", "ts": 1.0},
        {"op": "add_turn", "episode_id": "e1", "role": "user", "ts": 1.0},
        {"op": "finalize_episode", "episode_id": "e1", "ts": 120.0},
        {
            "op": "add_turn",
            "episode_id": "e1",
            "role": "assistant",
            "content": "late",
            "turn_id": "late",
            "ts": 121.0,
        },  # conflict: finalized earlier in the same batch
    ]
    return cmds


def snapshot(store: Store):
    with store.read() as conn:
        turns = repos.session_turns(conn, "s1")
        session = repos.get_session(conn, "s1")
    rows = [
        {k: v for k, v in t.items() if k not in ("num", "id", "timestamp")}
        | {"id": None if t["is_compaction_summary"] else t["id"]}
        for t in turns
    ]
    events = [(e.seq, e.kind, e.session_id, e.episode_id) for e in store.events_since(0)]
    turn_payloads = [e.payload for e in store.events_since(0, kinds=["episode.turn_added"])]
    return rows, events, turn_payloads, session["last_seen_at"]


def test_fast_batch_equals_one_by_one(tmp_path):
    slow, fast = Store.open(tmp_path / "a.db"), Store.open(tmp_path / "b.db")
    ms, mf = SessionManager(slow), SessionManager(fast)
    slow_results = []
    for cmd in commands():
        slow_results.extend(ms.apply_batch([cmd]) if cmd["op"] != "add_turn" else [_portable(ms, cmd)])
    fast_results = mf.apply_batch(commands())
    assert fast_results == slow_results
    assert [r.get("error", {}).get("code") for r in fast_results][-6:] == [
        None,
        "episode_not_found",
        "invalid_argument",
        "invalid_argument",
        None,
        "conflict",
    ]
    assert snapshot(fast) == snapshot(slow)
    assert snapshot(fast)[3] == 110.0  # last_seen_at = the newest turn (step 8 at 102 + 8)
    slow.close()
    fast.close()


def _portable(manager: SessionManager, cmd):
    from memviewer.errors import MemviewerError

    try:
        with manager.store.write():
            return {"ok": manager.apply(cmd)}
    except MemviewerError as exc:
        return {"error": exc.to_dict()}


def test_a_failing_compaction_leaves_no_turn_on_either_path(tmp_path, monkeypatch):
    """The fast path compacts inside the command's savepoint, as ``Store.write`` nests it: a
    compaction that fails takes its turn with it, and the command is answered as failed
    (it stored the turn and answered ``internal`` before, so the publisher never resent it)."""
    from memviewer.errors import INTERNAL, MemviewerError
    from memviewer.session import compaction

    def broken(*_args, **_kwargs):
        raise MemviewerError(INTERNAL, "compaction broke")

    monkeypatch.setattr(compaction, "compact", broken)
    cmds = commands()[:2] + [
        {"op": "add_turn", "episode_id": "e1", "role": "assistant", "content": f"c{i}", "turn_id": f"c{i}"}
        for i in range(5)
    ]
    cmds[0] = {**cmds[0], "active_window": 2}
    slow, fast = Store.open(tmp_path / "a.db"), Store.open(tmp_path / "b.db")
    ms, mf = SessionManager(slow), SessionManager(fast)
    slow_results = [
        r
        for cmd in cmds
        for r in (ms.apply_batch([cmd]) if cmd["op"] != "add_turn" else [_portable(ms, cmd)])
    ]
    fast_results = mf.apply_batch(cmds)
    assert [("ok" in r) for r in fast_results] == [("ok" in r) for r in slow_results]
    assert not all("ok" in r for r in fast_results)  # the compaction did fail some commands
    assert snapshot(fast)[:2] == snapshot(slow)[:2]  # the same turns and events: none of a failed one
    slow.close()
    fast.close()
