"""One summary per event for people, shared by ``memviewer tail`` and the Live screen:
lists are a count and their first items, never a Python repr; a tool-call-only turn
shows its calls with a short form of their arguments."""

from __future__ import annotations

import json

from memviewer.present.snippets import tool_call_brief
from memviewer.wire.event_summary import event_summary


def _call(name: str, arguments: object) -> dict[str, object]:
    return {"id": f"c-{name}", "type": "function", "function": {"name": name, "arguments": arguments}}


def test_a_deleted_session_names_a_count_and_the_first_turn_ids() -> None:
    line = event_summary("session.deleted", {"turn_ids": ["t-a", "t-b", "t-c"], "turns": 3, "episodes": 1})
    assert line == "deleted 1 episode, 3 turns: t-a, t-b +1 more"
    assert "[" not in line and "'" not in line


def test_an_unknown_payload_is_fields_never_a_repr() -> None:
    line = event_summary("something.new", {"ids": ["x1", "x2"], "opts": {"a": 1}, "flag": True, "none": None})
    assert line == 'ids: 2 items: x1, x2 opts={"a":1} flag=true'


def test_a_tool_call_only_turn_shows_its_calls_and_their_arguments() -> None:
    turn = {
        "role": "assistant",
        "index": 1,
        "content": "",
        "tool_calls": [_call("get_weather", json.dumps({"city": "Paris"})), _call("get_time", "{}")],
    }
    assert event_summary("episode.turn_added", {"turn": turn}) == (
        '#1 assistant: → get_weather(city="Paris"), get_time()'
    )
    long_args = tool_call_brief([_call("write", {"text": "x" * 200})], width=20)
    assert long_args == '→ write(text="xxxxxxxxxxxxx…)' and len(long_args) < 40
    assert tool_call_brief([_call("odd", "not json")]) == "→ odd(not json)"


def test_every_known_event_kind_reads_for_people_and_can_be_filtered() -> None:
    """Each kind the store emits has its own summary (no fallback to fields) and is a kind
    `tail --kind` and the hub's subscribe filter accept."""
    from memviewer.events import EVENT_KINDS
    from memviewer.wire.event_summary import SUMMARIES

    assert set(SUMMARIES) <= set(EVENT_KINDS)
    assert set(EVENT_KINDS) - set(SUMMARIES) <= {"session.closed"}  # its payload is empty
    assert {"session.agent_changed", "llm_call.recorded", "session.deleted"} <= set(EVENT_KINDS)
    changed = {
        "agent": "refunds",
        "previous_agent": "svc",
        "scope": "agent",
        "scope_id": "refunds",
        "scope_changed": True,
    }
    assert event_summary("session.agent_changed", changed) == "agent svc → refunds (scope agent:refunds)"
