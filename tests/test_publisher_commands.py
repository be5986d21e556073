"""The publisher's commands on the wire, byte for byte: the lines every publishing call
spools (and sends) are pinned here, so splitting or reworking the builders
(``memviewer/publisher/commands.py``) cannot change a key, its order or a left-out ``None``.
No hub: with none answering, every command goes to the spool at once."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from memviewer.client import Publisher
from memviewer.publisher import commands

# Written by the one-module publisher (before the split), from the calls in ``_publish_all``.
EXPECTED = [
    '{"cid":1,"op":"open_session","session_id":"s-1","agent":"a","scope":"user","scope_id":"u1","meta":{"k":1},"title":"T","source":"src","lineage_id":"l-1","root_session_id":"s-0","thread_id":"th","parent_session_id":"s-p","retention":"keep_all","active_window":8,"ts":1.5}',
    '{"cid":2,"op":"open_session","session_id":"s-2","agent":"","ts":2.0}',
    '{"cid":3,"op":"start_episode","session_id":"s-1","user_message":"task","episode_id":"e-1","turn_id":"t-0","meta":{"m":1},"metadata":{"speaker":"x"},"ts":3.0}',
    '{"cid":4,"op":"add_turn","episode_id":"e-1","role":"assistant","content":"hello","turn_id":"t-1","metadata":{"a":[1,2]},"tool_calls":[{"id":"c1","name":"f"}],"tool_call_id":"c0","ts":4.0}',
    '{"cid":5,"op":"add_turn","episode_id":"e-1","role":"tool","content":"","turn_id":"t-2","ts":4.5}',
    '{"cid":6,"op":"record_recall","recall_id":"r-1","query":"q","results":[{"turn_id":"t-1","score":0.5,"rank":1},{"text":"x"}],"session_id":"s-1","episode_id":"e-1","params":{"k":5},"source":"agent","diagnostics":{"d":1},"ts":5.0}',
    '{"cid":7,"op":"record_recall","recall_id":"r-2","query":"q2","results":[],"source":"agent","ts":5.5}',
    '{"cid":8,"op":"record_llm_call","call_id":"c-1","input":[{"role":"user","content":"hi"}],"output":"out","session_id":"s-1","episode_id":"e-1","model":"m","provider":"p","usage":{"input_tokens":3,"output_tokens":0},"latency_ms":12.5,"recall_ids":["r-1"],"in_prompt":["t-1"],"context_window":8192,"meta":{"x":null},"ts":6.0}',
    '{"cid":9,"op":"record_llm_call","call_id":"c-2","input":"[]","ts":6.5}',
    '{"cid":10,"op":"finalize_episode","episode_id":"e-1","r_task":0.75,"ts":7.0}',
    '{"cid":11,"op":"abandon_episode","episode_id":"e-9","reason":"gave up","ts":7.5}',
    '{"cid":12,"op":"abandon_episode","episode_id":"e-8","ts":7.75}',
    '{"cid":13,"op":"add_turn","episode_id":"e-9","role":"user","content":"raw","turn_id":"t-9","metadata":null,"ts":8.0}',
    '{"cid":14,"op":"close_session","session_id":"s-1","ts":9.0}',
]


def _publish_all(pub: Publisher) -> None:
    pub.open_session(
        agent="a",
        scope="user",
        scope_id="u1",
        meta={"k": 1},
        session_id="s-1",
        title="T",
        source="src",
        lineage_id="l-1",
        root_session_id="s-0",
        thread_id="th",
        parent_session_id="s-p",
        retention="keep_all",
        active_window=8,
        ts=1.5,
    )
    pub.open_session(session_id="s-2", ts=2.0)
    pub.start_episode(
        "s-1", "task", episode_id="e-1", turn_id="t-0", meta={"m": 1}, metadata={"speaker": "x"}, ts=3.0
    )
    pub.add_turn(
        "e-1",
        "assistant",
        "hello",
        metadata={"a": [1, 2]},
        tool_calls=[{"id": "c1", "name": "f"}],
        tool_call_id="c0",
        turn_id="t-1",
        ts=4.0,
    )
    pub.add_turn("e-1", "tool", "", turn_id="t-2", ts=4.5)
    pub.record_recall(
        "q",
        [{"turn_id": "t-1", "score": 0.5, "rank": 1}, {"text": "x"}],
        session_id="s-1",
        episode_id="e-1",
        params={"k": 5},
        source="agent",
        diagnostics={"d": 1},
        recall_id="r-1",
        ts=5.0,
    )
    pub.record_recall("q2", [], recall_id="r-2", ts=5.5)
    pub.record_llm_call(
        [{"role": "user", "content": "hi"}],
        "out",
        session_id="s-1",
        episode_id="e-1",
        model="m",
        provider="p",
        input_tokens=3,
        output_tokens=0,
        latency_ms=12.5,
        recall_ids=["r-1"],
        in_prompt=["t-1"],
        context_window=8192,
        meta={"x": None},
        call_id="c-1",
        ts=6.0,
    )
    pub.record_llm_call("[]", call_id="c-2", ts=6.5)
    pub.finalize_episode("e-1", 0.75, ts=7.0)
    pub.abandon_episode("e-9", "gave up", ts=7.5)
    pub.abandon_episode("e-8", ts=7.75)
    pub.publish(
        {
            "op": "add_turn",
            "cid": 99,
            "episode_id": "e-9",
            "role": "user",
            "content": "raw",
            "turn_id": "t-9",
            "metadata": None,
            "ts": 8.0,
        }
    )
    pub.close_session("s-1", ts=9.0)


def test_every_command_is_spooled_exactly_as_before(tmp_path: Path) -> None:
    pub = Publisher(home=tmp_path, socket_path=tmp_path / "no-hub.sock", sync_interval=0)
    _publish_all(pub)
    assert pub.close(timeout=0.2, end_episodes=False) is False  # no hub: kept in the spool
    spooled = [
        line
        for path in sorted((tmp_path / "spool").glob("*.ndjson"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    assert spooled == EXPECTED


@pytest.mark.parametrize(
    "name",
    [
        "open_session",
        "start_episode",
        "add_turn",
        "finalize_episode",
        "abandon_episode",
        "close_session",
        "record_recall",
        "record_llm_call",
    ],
)
def test_a_publishing_method_has_its_builders_signature_and_docstring(name: str) -> None:
    """``help(pub.add_turn)`` shows the real parameters, not ``*args, **kwargs``."""
    build = getattr(commands, name)
    method = getattr(Publisher, name)
    params = list(inspect.signature(method).parameters)
    assert params == ["self", *inspect.signature(build).parameters]
    assert method.__doc__ == build.__doc__ and method.__doc__
