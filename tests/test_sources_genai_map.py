"""The pure span → command mapping: every message shape, dedupe, retrieval → record_recall,
bad input; and the mapped commands applied to a real store (HashEmbedder service)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from memviewer.sources import otlp_decode
from memviewer.sources.genai_map import GenAIMapper, uuid7_from
from memviewer.sources.otlp_decode import LogRecord, SpanEvent, SpanRecord
from memviewer.sources.otlp_http import parse_address

TRACE = "0af7651916cd43dd8448eb211c80319c"


def span(
    span_id: str, attrs: dict[str, Any], *, name: str = "chat m", start: float = 1_765_000_000.0, **kw: Any
):
    return SpanRecord(
        trace_id=kw.pop("trace_id", TRACE),
        span_id=span_id,
        parent_span_id="",
        name=name,
        start=start,
        end=start + 1,
        attrs=attrs,
        resource=kw.pop("resource", {"service.name": "svc"}),
        **kw,
    )


def ops(commands: list[dict[str, Any]]) -> list[str]:
    return [c["op"] for c in commands]


def turns(commands: list[dict[str, Any]]) -> list[tuple[str, str]]:
    out = []
    for c in commands:
        if c["op"] == "start_episode":
            out.append(("user", c["user_message"]))
        elif c["op"] == "add_turn":
            out.append((c["role"], c["content"]))
    return out


def test_flattened_gen_ai_prompt_completion_with_tool_calls() -> None:
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.conversation.id": "c1",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "be nice",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": "weather?",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "",
        "gen_ai.completion.0.tool_calls.0.id": "call_9",
        "gen_ai.completion.0.tool_calls.0.name": "weather",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Oslo"}',
    }
    r = GenAIMapper().map_spans([span("01" * 8, attrs)])
    assert ops(r.commands) == ["open_session", "start_episode", "add_turn", "record_llm_call"]
    assert r.commands[0]["meta"]["system_instructions"] == "be nice"
    llm = r.commands[3]  # the call, in the flattened shape's messages, after its turns
    assert llm["input"] == [{"role": "system", "content": "be nice"}, {"role": "user", "content": "weather?"}]
    assert llm["output"][0]["tool_calls"][0]["function"]["name"] == "weather"
    assert llm["session_id"] == r.commands[0]["session_id"]
    assert llm["episode_id"] == r.commands[1]["episode_id"]
    call = r.commands[2]["tool_calls"][0]
    assert call == {
        "id": "call_9",
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
    }


def test_openinference_messages_and_session_id() -> None:
    attrs = {
        "openinference.span.kind": "LLM",
        "session.id": "oi-1",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "hi",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "t1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "lookup",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": "{}",
    }
    r = GenAIMapper().map_spans([span("02" * 8, attrs)])
    assert turns(r.commands) == [("user", "hi"), ("assistant", "")]
    assert r.commands[2]["tool_calls"][0]["function"]["name"] == "lookup"
    assert r.commands[0]["meta"]["otlp"]["conversation"] == "oi-1"


def test_span_events_and_log_records_shapes() -> None:
    events = [
        SpanEvent("gen_ai.user.message", 1.0, {"content": "what is 2+2"}),
        SpanEvent(
            "gen_ai.choice",
            2.0,
            {"message": json.dumps({"role": "assistant", "content": "4"}), "index": 0},
        ),
        SpanEvent("gen_ai.tool.message", 3.0, {"content": "ok", "id": "call_x"}),
    ]
    r = GenAIMapper().map_spans([span("03" * 8, {"gen_ai.operation.name": "chat"}, events=events)])
    assert turns(r.commands) == [("user", "what is 2+2"), ("assistant", "4"), ("tool", "ok")]
    assert r.commands[-2]["tool_call_id"] == "call_x"
    assert r.counters["without_conversation_id"] == 1
    llm = r.commands[-1]  # kept, grouped by trace, and flagged: it named no conversation
    assert llm["op"] == "record_llm_call" and llm["problems"] == ["without_conversation_id"]
    assert [m["role"] for m in llm["input"]] == ["user", "tool"] and llm["output"][0]["content"] == "4"

    m = GenAIMapper()
    logs = [
        LogRecord("gen_ai.user.message", 10.0, {"content": "hello"}, {"gen_ai.conversation.id": "L"}, {}),
        LogRecord(
            "gen_ai.choice",
            11.0,
            {"index": 0, "message": {"role": "assistant", "content": "hi!"}},
            {"gen_ai.conversation.id": "L"},
            {},
        ),
        LogRecord("gen_ai.user.message", 12.0, {"content": "hello"}, {"gen_ai.conversation.id": "L"}, {}),
    ]
    r = m.map_logs(logs)
    # the same words said twice in separate records are two turns (records have their own identity)
    assert turns(r.commands) == [("user", "hello"), ("assistant", "hi!"), ("user", "hello")]
    assert "finalize_episode" in ops(r.commands)
    assert m.map_logs(logs).commands == []  # the same records exported again


def test_openlit_content_events() -> None:
    events = [
        SpanEvent("gen_ai.content.prompt", 1.0, {"gen_ai.prompt": "user: summarise the log"}),
        SpanEvent("gen_ai.content.completion", 2.0, {"gen_ai.completion": "It failed twice."}),
    ]
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.conversation.id": "lit"}
    r = GenAIMapper().map_spans([span("0d" * 8, attrs, events=events)])
    assert turns(r.commands) == [("user", "user: summarise the log"), ("assistant", "It failed twice.")]


def test_claude_code_log_records() -> None:
    attrs = {"session.id": "cc-1", "prompt": "fix the flaky test", "prompt_length": 18}
    r = GenAIMapper().map_logs(
        [
            LogRecord("user_prompt", 1.0, "claude_code.user_prompt", attrs, {"service.name": "claude-code"}),
            LogRecord(
                "tool_result",
                2.0,
                "claude_code.tool_result",
                {"session.id": "cc-1", "tool_name": "Bash", "success": "true"},
                {},
            ),
            LogRecord("api_request", 3.0, "claude_code.api_request", {"session.id": "cc-1"}, {}),
        ]
    )
    assert turns(r.commands) == [("user", "fix the flaky test"), ("tool", "Bash: success=true")]
    assert r.commands[0]["agent"] == "claude-code"
    assert r.counters["records_ignored"] == 1


def test_resent_history_and_replayed_spans_add_nothing() -> None:
    m = GenAIMapper()
    u = {"role": "user", "parts": [{"type": "text", "content": "yes"}]}
    a = {"role": "assistant", "parts": [{"type": "text", "content": "ok"}]}
    first = span(
        "04" * 8,
        {
            "gen_ai.conversation.id": "c",
            "gen_ai.input.messages": json.dumps([u]),
            "gen_ai.output.messages": json.dumps([a]),
        },
    )
    again = span(
        "05" * 8,
        {
            "gen_ai.conversation.id": "c",
            "gen_ai.input.messages": json.dumps([u, a, u]),  # "yes" again: a new turn (2nd occurrence)
            "gen_ai.output.messages": json.dumps([a]),
        },
        start=1_765_000_010.0,
    )
    r1 = m.map_spans([first])
    r2 = m.map_spans([again])
    assert turns(r1.commands) == [("user", "yes"), ("assistant", "ok")]
    assert turns(r2.commands) == [("user", "yes"), ("assistant", "ok")]
    assert ops(r2.commands)[0] == "finalize_episode"
    assert m.map_spans([first, again]).commands == []
    # a fresh mapper (hub restart) gives the same ids: the store sees replays
    fresh = GenAIMapper().map_spans([first, again])
    ids = [c.get("turn_id") for c in fresh.commands if "turn_id" in c]
    assert ids == [c["turn_id"] for c in r1.commands + r2.commands if "turn_id" in c]


def test_retrieval_spans_become_record_recall() -> None:
    attrs = {
        "openinference.span.kind": "RETRIEVER",
        "session.id": "r1",
        "input.value": "where is the cache?",
        "retrieval.documents.0.document.id": "t-abc",
        "retrieval.documents.0.document.content": "the cache lives in /srv/cache",
        "retrieval.documents.0.document.score": 0.91,
        "retrieval.documents.1.document.content": "unrelated",
    }
    s = span("06" * 8, attrs, name="retrieve")
    r = GenAIMapper().map_spans([s])
    assert ops(r.commands) == ["open_session", "record_recall"]
    rec = r.commands[1]
    assert rec["source"] == "otlp" and rec["query"] == "where is the cache?"
    assert rec["results"][0] == {
        "rank": 1,
        "text": "the cache lives in /srv/cache",
        "score": 0.91,
        "turn_id": "t-abc",
    }
    assert rec["results"][1] == {"rank": 2, "text": "unrelated"}
    assert uuid.UUID(rec["recall_id"]).version == 7
    assert rec["recall_id"] == GenAIMapper().map_spans([s]).commands[1]["recall_id"]  # replay-stable
    mem = span("07" * 8, {"gen_ai.operation.name": "search_memory", "gen_ai.memory.query": "q"})
    assert ops(GenAIMapper().map_spans([mem]).commands)[-1] == "record_recall"


def test_bad_messages_reject_only_their_span() -> None:
    good = span(
        "08" * 8,
        {
            "gen_ai.conversation.id": "b",
            "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"fine"}]}]',
        },
    )
    bad = span("09" * 8, {"gen_ai.conversation.id": "b", "gen_ai.input.messages": "{oops"})
    shape = span("0a" * 8, {"gen_ai.conversation.id": "b", "gen_ai.input.messages": '{"role": "user"}'})
    other = span("0b" * 8, {"http.method": "GET"}, name="GET /")
    r = GenAIMapper().map_spans([good, bad, shape, other])
    assert turns(r.commands) == [("user", "fine")]
    assert [sid for sid, _ in r.rejected] == ["09" * 8, "0a" * 8]
    assert r.counters["bad_messages"] == 2 and r.counters["spans_ignored"] == 1


def test_decoders_refuse_malformed_requests() -> None:
    with pytest.raises(otlp_decode.OtlpDecodeError):
        otlp_decode.decode_traces_json(b'{"resourceSpans": {"x": 1}}')
    with pytest.raises(otlp_decode.OtlpDecodeError):
        otlp_decode.decode_traces_json(
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "xyz"}]}]}]}'
        )
    with pytest.raises(otlp_decode.OtlpDecodeError):
        otlp_decode.decode_logs_pb(b"\x0a\xff\xff\xff")
    assert otlp_decode.decode_traces_json(b"{}") == []


def test_parse_address() -> None:
    assert parse_address("4318") == ("127.0.0.1", 4318)
    assert parse_address(":4318") == ("127.0.0.1", 4318)
    assert parse_address("0.0.0.0:4318") == ("0.0.0.0", 4318)
    assert parse_address("[::1]:4318") == ("::1", 4318)
    with pytest.raises(ValueError):
        parse_address("localhost:http")


def test_uuid7_from_is_a_valid_time_ordered_uuid7() -> None:
    a, b = uuid7_from(1_000.0, "x"), uuid7_from(2_000.0, "x")
    assert uuid.UUID(a).version == 7 and a < b


def test_mapped_commands_apply_to_a_real_store(service) -> None:
    """The commands are valid publish commands: the manager stores them, a replay adds nothing."""
    m = GenAIMapper()
    msgs = [
        {"role": "user", "parts": [{"type": "text", "content": "book a table"}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "c1", "name": "book", "arguments": {"n": 2}}],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": {"ok": True}}]},
    ]
    s = span("0c" * 8, {"gen_ai.conversation.id": "store", "gen_ai.input.messages": json.dumps(msgs)})
    cmds = m.map_spans([s]).commands
    results = service.apply_batch(cmds)
    assert all("ok" in r for r in results), results
    replay = GenAIMapper().map_spans([s]).commands
    assert all("ok" in r for r in service.apply_batch(replay))
    sid = cmds[0]["session_id"]
    stored = service.session(sid)["turns"]
    assert [t["role"] for t in stored] == ["user", "assistant", "tool"]
    assert stored[2]["content"] == '{"ok": true}' and stored[2]["tool_call_id"] == "c1"


def test_the_agent_name_does_not_depend_on_how_the_exporter_batched_the_spans(service) -> None:
    """A chat span exported before its agent span (each exported alone) and the same spans
    in one export end in the same session, named by the agent span; the session's rows in
    the vector index follow the new scope."""
    msgs = [{"role": "user", "parts": [{"type": "text", "content": "refund order 88 to the card"}]}]
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.conversation.id": "c-88",
        "gen_ai.input.messages": json.dumps(msgs),
    }
    agent = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "refunds",
        "gen_ai.conversation.id": "c-88",
    }

    def spans() -> list[SpanRecord]:
        return [
            span("a1" * 8, dict(chat), start=10.0),
            span("a2" * 8, dict(agent), name="invoke_agent", start=9.0),
        ]

    together = GenAIMapper().map_spans(spans()).commands
    alone = GenAIMapper()
    first = alone.map_spans(spans()[:1]).commands  # the chat span ends (and is exported) first
    second = alone.map_spans(spans()[1:]).commands
    assert next(c for c in first if c["op"] == "open_session")["agent"] == "svc"  # not known yet
    assert [c for c in second if c["op"] == "set_session_agent"] == [
        {"op": "set_session_agent", "session_id": first[0]["session_id"], "agent": "refunds", "ts": 9.0}
    ]
    assert next(c for c in together if c["op"] == "open_session")["agent"] == "refunds"
    # the agent span in an earlier export than a chat span of its trace: named from the start
    early = GenAIMapper()
    early.map_spans([span("b2" * 8, {**agent, "gen_ai.conversation.id": "c-89"}, name="invoke_agent")])
    later = early.map_spans([span("b1" * 8, {**chat, "gen_ai.conversation.id": "c-89"})]).commands
    assert next(c for c in later if c["op"] == "open_session")["agent"] == "refunds"

    assert all("ok" in r for r in service.apply_batch(first))
    service.sync_index()  # embedded under the first name's scope
    assert all("ok" in r for r in service.apply_batch(second))
    sid = first[0]["session_id"]
    assert service.session(sid)["session"]["agent"] == "refunds"
    assert service.session(sid)["session"]["scope_id"] == "refunds"
    again = service.apply_batch([second[-1]])  # a replay (a hub restart re-maps): no new event
    assert "ok" in again[0]
    changed = service.store.events_since(0, 1000, ["session.agent_changed"])
    assert [(e.session_id, e.payload["previous_agent"], e.payload["scope_changed"]) for e in changed] == [
        (sid, "svc", True)
    ]
    service.sync_index()
    found = service.recall("refund order 88", scope="agent", scope_id="refunds")
    assert [r["session_id"] for r in found["results"]][:1] == [sid]
    assert not service.recall("refund order 88", scope="agent", scope_id="svc")["results"]


def test_sources_label_for_the_viewer_header() -> None:
    from memviewer.tui.hub_link import sources_label

    label = sources_label(
        [
            {"kind": "praisonai", "target": "/data/s", "connected": True, "last_delivery": 990.0},
            {"kind": "otlp", "target": "127.0.0.1:4318", "connected": True, "last_delivery": None},
            {"kind": "praisonai", "target": "/gone", "connected": False, "last_delivery": None},
        ],
        now=1000.0,
    )
    assert (
        label
        == "praisonai /data/s: 10s ago · otlp 127.0.0.1:4318: nothing yet · praisonai /gone: not connected"
    )


def test_doctor_sources_line() -> None:
    from memviewer.sources.status import doctor_check

    assert doctor_check([])["ok"]
    line = doctor_check(
        [
            {
                "kind": "otlp",
                "target": "127.0.0.1:4318",
                "connected": True,
                "counters": {"bad_requests": 2, "turns": 9},
                "last_error": "not valid JSON",
            },
            {"kind": "praisonai", "target": "/x", "connected": False, "counters": {}},
        ]
    )
    assert not line["ok"]
    assert line["detail"] == (
        "otlp 127.0.0.1:4318: connected (bad_requests 2); last: not valid JSON; praisonai /x: NOT connected"
    )


def test_receiver_answers_503_with_retry_after_when_the_store_refuses() -> None:
    """A full disk (the hub's submit raising its retryable error) is a 503 the exporter retries."""
    import asyncio

    from memviewer.errors import MemviewerError
    from memviewer.sources.otlp_http import OtlpReceiver

    class FullDiskHub:
        full = True
        stored: list[dict] = []

        async def submit(self, commands, **_):
            if not self.full:
                self.stored.extend(commands)
                return [{"ok": True} for _ in commands]
            raise MemviewerError(
                "internal", "batch not applied: database or disk is full", data={"retry": True}
            )

    user = '[{"role":"user","parts":[{"type":"text","content":"x"}]}]'
    body = json.dumps(
        {
            "resourceSpans": [
                {
                    "scopeSpans": [
                        {
                            "spans": [
                                {
                                    "traceId": "ab" * 16,
                                    "spanId": "cd" * 8,
                                    "name": "chat m",
                                    "attributes": [
                                        {
                                            "key": "gen_ai.input.messages",
                                            "value": {"stringValue": user},
                                        }
                                    ],
                                }
                            ]
                        }
                    ]
                }
            ]
        }
    ).encode()

    def post(port: int) -> tuple[int, str | None]:
        return _post_traces(port, body)

    async def scenario() -> None:
        rx = OtlpReceiver("127.0.0.1", 0, token="k" * 32)
        hub = FullDiskHub()
        await rx.start(hub)
        try:
            code, retry = await asyncio.to_thread(post, rx.address[1])
            assert (code, retry) == (503, "5")
            assert rx.status()["counters"]["store_refusals"] == 1
            assert "disk is full" in rx.status()["last_error"]
            # the disk is freed; the exporter retries the very same request: its turn is sent
            # again (the refused batch must not count as already sent)
            hub.full = False
            assert (await asyncio.to_thread(post, rx.address[1]))[0] == 200
            assert [c["user_message"] for c in hub.stored if c["op"] == "start_episode"] == ["x"]
        finally:
            await rx.stop()

    asyncio.run(scenario())


def test_receiver_caps_connections_idle_sockets_and_bytes_in_flight() -> None:
    """Another local user cannot exhaust the hub through the OTLP port: connections beyond the
    cap get 503 unread, idle kept-alive sockets are closed, and bodies held at once are bounded
    (429 with Retry-After on the headers alone). Raw sockets, an in-process receiver."""
    import asyncio
    import socket as so

    from memviewer.sources.otlp_http import OtlpReceiver

    class NullHub:
        async def submit(self, commands, **_):
            return [{"ok": True} for _ in commands]

    token = "k" * 32
    auth = f"Authorization: Bearer {token}\r\n".encode()

    def head(length: int) -> bytes:
        return (
            f"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
            + b"Content-Type: application/json\r\n"
            + auth
            + f"Content-Length: {length}\r\n\r\n".encode()
        )

    def recv_all(s: so.socket) -> bytes:
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out

    port = 0  # the receiver's, once started (the Host header names it)

    async def scenario() -> None:
        rx = OtlpReceiver(
            "127.0.0.1",
            0,
            token=token,
            max_connections=3,
            max_inflight_bytes=1_000_000,
            keepalive_s=0.5,
            max_body=1_000_000,
        )
        await rx.start(NullHub())
        nonlocal port
        port = rx.address[1]
        try:

            def connect() -> so.socket:
                return so.create_connection(("127.0.0.1", port), timeout=10)

            # three connections are held; each sends part of a 600 KB body, the second is over
            # the bytes in flight and gets 429 at once, unread
            a = await asyncio.to_thread(connect)
            a.sendall(head(600_000) + b"{" * 1000)
            await _until_async(lambda: rx.inflight_bytes == 600_000)
            b = await asyncio.to_thread(connect)
            b.sendall(head(600_000))
            answer = await asyncio.to_thread(recv_all, b)
            assert answer.startswith(b"HTTP/1.1 429") and b"retry-after: 2" in answer.lower(), answer
            c = await asyncio.to_thread(connect)
            d = await asyncio.to_thread(connect)
            await _until_async(lambda: rx.status()["connections"] == 3)  # a, c, d
            e = await asyncio.to_thread(connect)  # the fourth at once: 503, nothing read
            answer = await asyncio.to_thread(recv_all, e)
            assert answer.startswith(b"HTTP/1.1 503") and b"too many connections" in answer, answer
            # c and d stay idle past the keep-alive: closed by the receiver
            assert await asyncio.to_thread(recv_all, c) == b"" and await asyncio.to_thread(recv_all, d) == b""
            a.close()  # the held body goes with its connection
            await _until_async(lambda: rx.inflight_bytes == 0 and rx.status()["connections"] == 0)
            ok = await asyncio.to_thread(connect)
            ok.sendall(head(2) + b"{}")
            assert (await asyncio.to_thread(ok.recv, 4096)).startswith(b"HTTP/1.1 200")
            ok.close()
            c_ = rx.status()["counters"]
            assert c_["overloaded"] == 1 and c_["connections_refused"] == 1 and c_["idle_closed"] >= 2
            for s in (b, e):
                s.close()
        finally:
            await rx.stop()

    asyncio.run(scenario())


async def _until_async(what, timeout: float = 10.0) -> None:
    import asyncio
    import time

    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "condition not met"
        await asyncio.sleep(0.01)


def test_an_accepted_batch_waits_on_disk_until_the_store_takes_it(tmp_path) -> None:
    """With its durable queue the receiver answers once a batch is fsync'd, and keeps it (on
    disk) through store refusals until the hub stored it; a full queue is a 429 before the
    mapper sees the request, and a queue it cannot write is a 503 that loses nothing."""
    import asyncio

    from memviewer.errors import MemviewerError
    from memviewer.sources.otlp_http import OtlpReceiver
    from memviewer.sources.otlp_queue import DurableQueue

    class FlakyHub:
        full = True
        stored: list[dict] = []

        async def submit(self, commands, **_):
            if self.full:
                raise MemviewerError("internal", "database or disk is full", data={"retry": True})
            self.stored.extend(commands)
            return [{"ok": True} for _ in commands]

    def body(text: str) -> bytes:
        msgs = json.dumps([{"role": "user", "parts": [{"type": "text", "content": text}]}])
        attrs = [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            {"key": "gen_ai.conversation.id", "value": {"stringValue": "q-1"}},
            {"key": "gen_ai.input.messages", "value": {"stringValue": msgs}},
        ]
        span = {
            "traceId": "ab" * 16,
            "spanId": text.encode().hex()[:16].ljust(16, "0"),
            "name": "chat",
            "startTimeUnixNano": "1765000000000000000",
            "endTimeUnixNano": "1765000001000000000",
            "attributes": attrs,
        }
        return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()

    post = _post_traces

    async def scenario() -> None:
        queue = DurableQueue(tmp_path / "otlp-queue", max_bytes=4000)
        hub = FlakyHub()
        rx = OtlpReceiver("127.0.0.1", 0, token="k" * 32, queue=queue)
        await rx.start(hub)
        port = rx.address[1]
        try:
            assert (await asyncio.to_thread(post, port, body("alpha")))[0] == 200  # on disk, not stored
            await _until_async(lambda: rx.status()["counters"]["store_refusals"] >= 1)
            assert len(queue) == 1 and not hub.stored
            # the queue is full (4,000 bytes): refused before mapping, so nothing is marked sent
            code, retry = await asyncio.to_thread(post, port, body("b" * 5000))
            assert (code, retry) == (429, "2") and rx.status()["counters"]["queue_full"] == 1
            # a queue that cannot be written: 503, and the mapper forgets the batch
            real_put = queue.put

            def broken(commands):
                raise OSError(28, "No space left on device")

            queue.put = broken  # type: ignore[method-assign]
            assert (await asyncio.to_thread(post, port, body("gamma")))[0] == 503
            queue.put = real_put  # type: ignore[method-assign]
            real_done, fails = queue.done, []

            def done_once_failing(path):  # deleting a stored batch's file fails once: the
                if not fails:  # drain retries (a replay) instead of dying
                    fails.append(path)
                    raise OSError(5, "Input/output error")
                real_done(path)

            queue.done = done_once_failing  # type: ignore[method-assign]
            hub.full = False  # the disk is freed: the queued batch is stored, in order, once
            assert (await asyncio.to_thread(post, port, body("gamma")))[0] == 200
            await _until_async(lambda: len(queue) == 0 and rx.status()["queued_bytes"] == 0)
            users = [c["user_message"] for c in hub.stored if c["op"] == "start_episode"]
            assert (
                fails and users[0] == "alpha" and set(users) == {"alpha", "gamma"}
            )  # alpha twice: the replay
            assert rx.status()["counters"]["queue_errors"] == 2  # the unwritable queue, the failed delete
        finally:
            await rx.stop()

    asyncio.run(scenario())


def _post_traces(port: int, body: bytes, token: str = "k" * 32) -> tuple[int, str | None]:
    """POST a JSON traces export to an in-process receiver: (status, Retry-After)."""
    import urllib.error
    import urllib.request

    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/traces",
        data=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    try:
        urllib.request.urlopen(req, timeout=10)
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Retry-After")
    return 200, None
