"""The mapper's hand-built ids and the queue's orjson encoding give exactly what the standard
library gave (the ids are the store's identities: a change would store re-sent history again)."""

from __future__ import annotations

import hashlib
import json
import math
import uuid

from memviewer.sources import otlp_queue
from memviewer.sources.genai_map import NAMESPACE, uid, uuid7_from

NAMES = [
    ("",),
    ("a",),
    ("conversation:c-1",),
    ("otel-123", "user:" + "f" * 32 + ":0"),
    ("otel-x", "episode:tool-result:call_1"),
    ("sess", "ünïcødé ✓ 中文 🎉", "\x00", "x" * 5000),
]


def test_uid_is_uuid5_of_the_joined_parts() -> None:
    for parts in NAMES:
        assert uid(*parts) == str(uuid.uuid5(NAMESPACE, "\x00".join(parts))), parts
    for i in range(2000):
        parts = (f"otel-{i}", f"user:{i * 7919}:{i % 3}")
        assert uid(*parts) == str(uuid.uuid5(NAMESPACE, "\x00".join(parts)))


def _uuid7_reference(ts: float, *parts: str) -> str:
    ms = max(0, int(ts * 1000)) & ((1 << 48) - 1)
    h = int.from_bytes(hashlib.sha256("\x00".join(parts).encode()).digest()[:10], "big")
    value = (ms << 80) | (0x7 << 76) | (((h >> 68) & 0xFFF) << 64) | (0b10 << 62) | (h & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


def test_uuid7_from_is_the_uuid_of_its_value() -> None:
    for ts in (0.0, -5.0, 1.5, 1765000000.123, 2**47):
        for parts in NAMES:
            assert uuid7_from(ts, *parts) == _uuid7_reference(ts, *parts)
    assert uuid.UUID(uuid7_from(1765000000.0, "t", "s")).version == 7


def test_queue_encoding_reads_back_as_the_standard_librarys() -> None:
    commands = [
        {"op": "add_turn", "content": 'ünïcødé \n\t"quoted" \\ \u2028 🎉', "ts": 1765000000.123456},
        {"op": "record_llm_call", "input": [{"role": "user", "parts": []}], "output": None, "n": 2**63},
        {"op": "x", "score": 0.1 + 0.2, "neg": -1e-300, "big": 1.7976931348623157e308, "t": True},
    ]
    standard = json.dumps(commands, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    assert json.loads(otlp_queue.encode(commands)) == json.loads(standard)


def test_what_orjson_refuses_goes_through_the_sockets_encoder() -> None:
    odd = [{"text": "lone \ud800 surrogate", "huge": 2**70, "keys": {1: "int key"}}]
    assert json.loads(otlp_queue.encode(odd)) == [
        {"text": "lone \ud800 surrogate", "huge": 2**70, "keys": {"1": "int key"}}
    ]
    # NaN and infinities are not JSON: null, as on the hub's socket
    assert json.loads(otlp_queue.encode([{"s": math.nan, "t": math.inf}])) == [{"s": None, "t": None}]
    assert json.loads(otlp_queue.encode([{"s": math.nan, "huge": 2**70}])) == [{"s": None, "huge": 2**70}]


def test_a_chat_spans_json_attributes_are_parsed_once(monkeypatch) -> None:
    """The turns and the LLM call read the same ``gen_ai.input/output.messages``: one parse
    each (the mapping parsed them twice), and the call's input is what the span sent."""
    from memviewer.sources import genai_calls
    from memviewer.sources.genai_map import GenAIMapper
    from memviewer.sources.otlp_decode import SpanRecord

    loads = []
    real = json.loads

    def counting(text, *a, **kw):
        loads.append(text)
        return real(text, *a, **kw)

    monkeypatch.setattr(genai_calls.json, "loads", counting)
    question = [{"role": "user", "parts": [{"type": "text", "content": "q"}]}]
    answer = [{"role": "assistant", "parts": [{"type": "text", "content": "a"}]}]
    span = SpanRecord(
        trace_id="ab" * 16,
        span_id="cd" * 8,
        parent_span_id="",
        name="chat m",
        start=1765000000.0,
        end=1765000001.0,
        attrs={
            "gen_ai.operation.name": "chat",
            "gen_ai.conversation.id": "c-1",
            "gen_ai.input.messages": json.dumps(question),
            "gen_ai.output.messages": json.dumps(answer),
        },
        resource={},
    )
    commands = GenAIMapper().map_spans([span]).commands
    assert len(loads) == 2
    assert [c["op"] for c in commands] == ["open_session", "start_episode", "add_turn", "record_llm_call"]
    assert commands[-1]["input"] == question and commands[-1]["output"] == answer
