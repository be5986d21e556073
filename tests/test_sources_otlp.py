"""The OTLP/HTTP receiver in a real hub process, fed by real clients: the OpenTelemetry
Python SDK's OTLP/HTTP exporter and a pydantic-ai agent run offline (TestModel)."""

from __future__ import annotations

import gzip
import json
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from waiting import wait_for

from memviewer.sources.genai_map import uid
from memviewer.wire.remote import RemoteService
from memviewer.wire.testing import HubProcess


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def otlp_status(remote: RemoteService) -> dict[str, Any]:
    return next(s for s in remote.stats()["hub"]["sources"] if s["kind"] == "otlp")


def session_for(conversation: str) -> str:
    return "otel-" + uid(f"conversation:{conversation}")


def auth_headers() -> dict[str, str]:
    """The header the fixture gave every exporter (``OTEL_EXPORTER_OTLP_HEADERS``, as a user
    configures one), for the hand-made requests."""
    raw = os.environ.get("OTEL_EXPORTER_OTLP_HEADERS", "")
    return dict(urllib.parse.unquote(p).split("=", 1) for p in raw.split(",") if "=" in p)


def post(
    url: str, body: bytes, ctype: str, encoding: str | None = None, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    sent = {"Content-Type": ctype, **(auth_headers() if headers is None else headers)}
    req = urllib.request.Request(url, data=body, method="POST", headers=sent)
    if encoding:
        req.add_header("Content-Encoding", encoding)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def start_otlp_hub(
    home: Path, sock: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[HubProcess, RemoteService, str]:
    """A hub process with the OTLP receiver on a free loopback port; every exporter made
    afterwards sends the home's token (``OTEL_EXPORTER_OTLP_HEADERS``, read by the SDK)."""
    port = free_port()
    hub = HubProcess(home, sock, args=("--no-index", "--otlp", f"127.0.0.1:{port}"))
    hub.start()
    remote = RemoteService(hub.socket_path)
    wait_for(lambda: otlp_status(remote)["connected"], what="the receiver")
    token = (home / "token").read_text().strip()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=" + urllib.parse.quote(f"Bearer {token}"))
    return hub, remote, f"http://127.0.0.1:{port}"


@pytest.fixture
def otlp_hub(
    tmp_path: Path, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, RemoteService]]:
    hub, remote, endpoint = start_otlp_hub(tmp_path / "home", short_tmp / "hub.sock", monkeypatch)
    try:
        yield endpoint, remote
    finally:
        remote.close()
        hub.stop()


def _provider(endpoint: str, service: str = "billing-agent") -> tuple[TracerProvider, OTLPSpanExporter]:
    exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _chat(tracer: Any, conv: str, inputs: list[dict], outputs: list[dict]) -> None:
    with tracer.start_as_current_span("chat gpt-test") as span:
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute("gen_ai.conversation.id", conv)
        span.set_attribute("gen_ai.request.model", "gpt-test")
        span.set_attribute("gen_ai.input.messages", json.dumps(inputs))
        span.set_attribute("gen_ai.output.messages", json.dumps(outputs))


@pytest.mark.integration
def test_sdk_exporter_history_resent_tool_call_and_retry(otlp_hub) -> None:
    endpoint, remote = otlp_hub
    provider, _ = _provider(endpoint)
    tracer = provider.get_tracer("test")
    sys_msg = {"role": "system", "parts": [{"type": "text", "content": "You are the billing agent."}]}
    u1 = {"role": "user", "parts": [{"type": "text", "content": "What did invoice 4471 cost?"}]}
    call = {
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": "call_1", "name": "lookup_invoice", "arguments": {"id": 4471}}],
    }
    result = {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "call_1", "response": "EUR 310.00"}],
    }
    a1 = {"role": "assistant", "parts": [{"type": "text", "content": "Invoice 4471 cost EUR 310.00."}]}
    with tracer.start_as_current_span("invoke_agent billing") as agent_span:
        agent_span.set_attribute("gen_ai.operation.name", "invoke_agent")
        agent_span.set_attribute("gen_ai.agent.name", "billing")
        agent_span.set_attribute("gen_ai.conversation.id", "conv-42")
        _chat(tracer, "conv-42", [sys_msg, u1], [call])
        with tracer.start_as_current_span("execute_tool lookup_invoice") as tool:
            tool.set_attribute("gen_ai.operation.name", "execute_tool")
            tool.set_attribute("gen_ai.conversation.id", "conv-42")
            tool.set_attribute("gen_ai.tool.call.id", "call_1")
            tool.set_attribute("gen_ai.tool.name", "lookup_invoice")
            tool.set_attribute("gen_ai.tool.call.result", "EUR 310.00")
        _chat(tracer, "conv-42", [sys_msg, u1, call, result], [a1])  # the history is re-sent
    sid = session_for("conv-42")
    turns = wait_for(lambda: _turns(remote, sid) if len(_turns(remote, sid)) >= 4 else None, what="4 turns")
    assert [(t["role"], t["content"]) for t in turns] == [
        ("user", "What did invoice 4471 cost?"),
        ("assistant", ""),
        ("tool", "EUR 310.00"),
        ("assistant", "Invoice 4471 cost EUR 310.00."),
    ]
    assert turns[1]["tool_calls"][0]["id"] == "call_1"
    assert turns[1]["tool_calls"][0]["function"]["name"] == "lookup_invoice"
    assert turns[2]["tool_call_id"] == "call_1"
    # each span is exported alone (SimpleSpanProcessor): the chat span opened the session
    # under the resource's service.name; the invoke_agent span, exported after it, names the
    # agent, so the session ends up as a batching exporter would have made it
    detail = wait_for(
        lambda: remote.session(sid) if remote.session(sid)["session"]["agent"] == "billing" else None,
        what="the agent span's name",
    )
    assert detail["session"]["scope_id"] == "billing"
    assert detail["session"]["title"] == "What did invoice 4471 cost?"
    assert [e["status"] for e in detail["episodes"]] == ["closed"]  # the agent run ended

    # an exporter retry: the very same spans again add nothing
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: F401

    exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")
    second = TracerProvider(resource=Resource.create({"service.name": "billing-agent"}))
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    second.add_span_processor(SimpleSpanProcessor(memory))
    t2 = second.get_tracer("test")
    _chat(t2, "conv-42", [sys_msg, u1, call, result], [a1])
    spans = memory.get_finished_spans()
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    assert len(_turns(remote, sid)) == 4
    st = otlp_status(remote)
    assert st["counters"]["turns"] == 4 and st["counters"]["genai_spans"] >= 5
    assert st["last_delivery"] is not None
    # the receiver timed every export it answered (4 spans exported alone + the 2 retries)
    ack = wait_for(
        lambda: otlp_status(remote)["ack_ms"] if otlp_status(remote)["ack_ms"]["n"] >= 6 else None,
        what="6 exports timed",
    )
    assert ack["window"] == ack["n"]
    assert 0 < ack["p50"] <= ack["p99"] <= ack["max"] < 10_000
    provider.shutdown()


def _turns(remote: RemoteService, sid: str) -> list[dict[str, Any]]:
    try:
        return remote.session(sid)["turns"]
    except Exception:
        return []


@pytest.mark.integration
def test_bad_bodies_are_answered_and_the_receiver_keeps_serving(otlp_hub) -> None:
    endpoint, remote = otlp_hub
    url = f"{endpoint}/v1/traces"
    assert post(url, b"\xff\x00garbage", "application/x-protobuf")[0] == 400
    status, body = post(url, b"{not json", "application/json")
    assert status == 400 and b"not valid JSON" in body
    assert post(url, b"{}", "text/plain")[0] == 415
    assert post(f"{endpoint}/v2/other", b"{}", "application/json")[0] == 404
    assert post(url, b"\x1f\x8b\x08garbage", "application/json", "gzip")[0] == 400
    deep = b'{"resourceSpans": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert post(url, deep, "application/json")[0] == 400
    bomb = gzip.compress(b"0" * (33 * 1024 * 1024))  # inflates past the 32 MB limit
    assert post(url, bomb, "application/x-protobuf", "gzip")[0] == 413
    # a span whose messages are not JSON: partial success names it; the good span is stored
    good = _json_span(
        "aa" * 8, "conv-7", [{"role": "user", "parts": [{"type": "text", "content": "hello there"}]}]
    )
    bad = _json_span("bb" * 8, "conv-7", None)
    bad["attributes"].append({"key": "gen_ai.input.messages", "value": {"stringValue": "not [json"}})
    payload = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [good, bad]}]}]}
    status, body = post(url, gzip.compress(json.dumps(payload).encode()), "application/json", "gzip")
    assert status == 200
    answer = json.loads(body)
    assert answer["partialSuccess"]["rejectedSpans"] == "1"
    assert "not JSON" in answer["partialSuccess"]["errorMessage"]
    stored = wait_for(lambda: _turns(remote, session_for("conv-7")), what="the good span's turn")
    assert [t["content"] for t in stored] == ["hello there"]
    # a span with no conversation id goes to its trace's session, and is counted
    lone = _json_span("cc" * 8, None, [{"role": "user", "parts": [{"type": "text", "content": "no conv"}]}])
    lone["traceId"] = "cd" * 16  # (a trace already seen with a conversation id would join it)
    payload = {"resourceSpans": [{"scopeSpans": [{"spans": [lone]}]}]}
    assert post(url, json.dumps(payload).encode(), "application/json")[0] == 200
    sid = "otel-" + uid("trace:" + "cd" * 16)
    assert [t["content"] for t in wait_for(lambda: _turns(remote, sid), what="the trace's turn")] == [
        "no conv"
    ]
    # a lone UTF-16 surrogate can never be stored: a malformed body (400), not a 500
    status, body = post(url, b'{"resourceSpans": [{"x": "\\ud800"}]}', "application/json")
    assert status == 400 and b"surrogate" in body, body
    # spans with neither a trace id nor a conversation id are refused one by one, never
    # merged across requests into one "no trace" session
    for n in range(2):
        says = [{"role": "user", "parts": [{"type": "text", "content": "x"}]}]
        orphan = _json_span(f"e{n}" * 8, None, says)
        orphan["traceId"] = ""
        payload = {"resourceSpans": [{"scopeSpans": [{"spans": [orphan]}]}]}
        status, body = post(url, json.dumps(payload).encode(), "application/json")
        answer = json.loads(body)["partialSuccess"]
        assert status == 200 and answer["rejectedSpans"] == "1"
        assert "neither a trace id" in answer["errorMessage"]
    assert remote.sessions()["total"] == 2  # conv-7 and the trace's session only
    # a message over the 1,000,000-character cap is stored cut, and the answer says so
    huge = "y" * 1_200_000
    big = _json_span("dd" * 8, "conv-big", [{"role": "user", "parts": [{"type": "text", "content": huge}]}])
    payload = {"resourceSpans": [{"scopeSpans": [{"spans": [big]}]}]}
    status, body = post(url, json.dumps(payload).encode(), "application/json")
    answer = json.loads(body)["partialSuccess"]
    assert status == 200 and answer["rejectedSpans"] == "0"
    assert "1 message longer than 1,000,000 characters (the longest 1,200,000)" in answer["errorMessage"]
    big_turns = wait_for(lambda: _turns(remote, session_for("conv-big")), what="the cut message")
    assert [len(t["content"]) for t in big_turns] == [1_000_000]
    c = otlp_status(remote)["counters"]
    assert c["bad_requests"] == 6 and c["unsupported_media_type"] == 1
    assert c["rejected_spans"] == 3 and c["without_conversation_id"] == 1 and c["messages_cut"] == 1
    # still serving the protocol socket
    assert remote.hello()["server"] == "memviewer-hub"


@pytest.mark.integration
def test_a_request_without_the_homes_token_is_refused_before_its_body_is_read(
    otlp_hub, tmp_path: Path
) -> None:
    """Another local user can reach a loopback port but cannot read the 0600 token file."""
    endpoint, remote = otlp_hub
    url = f"{endpoint}/v1/traces"
    span = _json_span(
        "ab" * 8, "conv-forged", [{"role": "user", "parts": [{"type": "text", "content": "wire it"}]}]
    )
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
    for headers in (
        {},
        {"Authorization": "Bearer wrong-token-of-some-length"},
        {"Authorization": "Basic eDp4"},
    ):
        status, answer = post(url, body, "application/json", headers=headers)
        assert status == 401 and b"Authorization: Bearer" in answer, answer
    # a 20 MB body without the token: refused on its headers, the connection closed
    port = int(endpoint.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(
            f"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
            + b"Content-Type: application/json\r\nContent-Length: 20000000\r\n\r\n"
            + b"{" * 65536
        )
        head = s.recv(4096)
    assert head.startswith(b"HTTP/1.1 401") and b"www-authenticate: bearer" in head.lower()
    assert remote.sessions()["total"] == 0 and otlp_status(remote)["counters"]["unauthorized"] == 4
    token = tmp_path / "home" / "token"
    assert token.stat().st_mode & 0o777 == 0o600
    assert post(url, body, "application/json")[0] == 200  # with the token (the fixture's header)
    wait_for(lambda: remote.sessions()["total"] == 1, what="the session")


def _json_span(span_id: str, conv: str | None, inputs: list[dict] | None) -> dict[str, Any]:
    attrs = [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}]
    if conv:
        attrs.append({"key": "gen_ai.conversation.id", "value": {"stringValue": conv}})
    if inputs is not None:
        attrs.append({"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(inputs)}})
    return {
        "traceId": "ab" * 16,
        "spanId": span_id,
        "name": "chat m",
        "startTimeUnixNano": str(int(1_765_000_000e9)),
        "endTimeUnixNano": str(int(1_765_000_001e9)),
        "attributes": attrs,
    }


@pytest.mark.integration
def test_pydantic_ai_run_with_a_tool_is_one_session(otlp_hub) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.test import TestModel

    endpoint, remote = otlp_hub
    provider, _ = _provider(endpoint, "weather-service")
    agent = Agent(
        TestModel(),
        name="weather-agent",
        system_prompt="Answer with the tool's words.",
        capabilities=[Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))],
    )

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return f"sunny in {city}"

    result = agent.run_sync("What is the weather in Paris?")
    provider.force_flush()
    sessions = wait_for(
        lambda: [s for s in remote.sessions()["sessions"] if s["agent"] == "weather-agent"],
        what="the session",
    )
    assert len(sessions) == 1
    turns = wait_for(
        lambda: (
            _turns(remote, sessions[0]["session_id"])
            if len(_turns(remote, sessions[0]["session_id"])) >= 4
            else None
        ),
        what="the run's turns",
    )
    roles = [t["role"] for t in turns]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert turns[0]["content"] == "What is the weather in Paris?"
    call_id = turns[1]["tool_calls"][0]["id"]
    assert turns[1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert turns[2]["tool_call_id"] == call_id and turns[2]["content"].startswith("sunny in")
    assert turns[3]["content"] == str(result.output) or "sunny" in turns[3]["content"]
    provider.shutdown()


@pytest.mark.integration
def test_sdk_log_exporter_events_and_retrieval_spans(otlp_hub) -> None:
    from opentelemetry._logs import LogRecord
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

    endpoint, remote = otlp_hub
    logs = LoggerProvider(resource=Resource.create({"service.name": "events-agent"}))
    logs.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f"{endpoint}/v1/logs")))
    logger = logs.get_logger("gen_ai")
    conv = {"gen_ai.conversation.id": "logs-1"}
    logger.emit(LogRecord(event_name="gen_ai.user.message", body={"content": "ping"}, attributes=conv))
    logger.emit(
        LogRecord(
            event_name="gen_ai.choice",
            body={"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "pong"}},
            attributes=conv,
        )
    )
    logger.emit(LogRecord(event_name="app.other", body="not a GenAI event", attributes=conv))
    sid = session_for("logs-1")
    got = wait_for(lambda: len(_turns(remote, sid)) == 2 and _turns(remote, sid), what="2 turns from logs")
    assert [(t["role"], t["content"]) for t in got] == [("user", "ping"), ("assistant", "pong")]
    assert remote.session(sid)["session"]["agent"] == "events-agent"
    logs.shutdown()

    # a retrieval span is handed on as record_recall: stored by a hub with the recall log,
    # refused (and counted) by one without it; the request succeeds either way
    provider, _ = _provider(endpoint)
    with provider.get_tracer("t").start_as_current_span("retrieval memory") as span:
        span.set_attribute("gen_ai.operation.name", "retrieval")
        span.set_attribute("gen_ai.conversation.id", "logs-1")
        span.set_attribute("gen_ai.retrieval.query.text", "what did I say?")
        span.set_attribute("retrieval.documents.0.document.content", "ping")
    provider.shutdown()
    c = wait_for(
        lambda: (lambda c: c if c["recalls"] + c["recall_refusals"] == 1 else None)(
            otlp_status(remote)["counters"]
        ),
        what="the recall handed on",
    )
    assert c["command_errors"] == 0


@pytest.mark.integration
def test_a_batch_acknowledged_before_a_crash_is_stored_by_the_next_hub(
    tmp_path: Path, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer comes once a batch is on disk in the home's OTLP queue: a hub killed before
    its writer stored it leaves the file, and the next hub stores it before anything else."""
    from memviewer.sources.genai_map import GenAIMapper
    from memviewer.sources.otlp_decode import SpanRecord
    from memviewer.sources.otlp_queue import FOLDER, DurableQueue

    home = tmp_path / "home"
    msgs = [{"role": "user", "parts": [{"type": "text", "content": "acknowledged, then the hub died"}]}]
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.conversation.id": "crash-1",
        "gen_ai.input.messages": json.dumps(msgs),
    }
    span = SpanRecord(
        "cd" * 16, "ef" * 8, "", "chat", 1_765_000_000.0, 1_765_000_001.0, attrs, {"service.name": "svc"}
    )
    home.mkdir(mode=0o700)
    DurableQueue(home / FOLDER).put(GenAIMapper().map_spans([span]).commands)  # as a killed hub left it
    hub, remote, _endpoint = start_otlp_hub(home, short_tmp / "hub.sock", monkeypatch)
    try:
        turns = wait_for(lambda: _turns(remote, session_for("crash-1")), what="the queued batch")
        assert [t["content"] for t in turns] == ["acknowledged, then the hub died"]
        wait_for(lambda: not list((home / FOLDER).glob("q-*.json")), what="the queue file to go")
    finally:
        remote.close()
        hub.stop()
