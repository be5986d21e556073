"""The OTLP receiver times its own acknowledgements (first byte read → answer written) and
reports them in its status (``ack_ms``): accepted exports only, a request pipelined behind
another timed from when it was read, the summary bounded by a ring."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import types
from typing import Any

import pytest

from memviewer.sources import otlp_http
from memviewer.sources.latency import Durations
from memviewer.sources.otlp_http import OtlpReceiver

TOKEN = "k" * 32
STEP_S = 0.25  # what the fake hub's store "takes" on the receiver's clock
PORT = [0]  # the receiver's in the running test (the Host header must name it)


def chat_body(text: str) -> bytes:
    attrs = [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
        {"key": "gen_ai.conversation.id", "value": {"stringValue": "ack-1"}},
        {
            "key": "gen_ai.input.messages",
            "value": {
                "stringValue": json.dumps([{"role": "user", "parts": [{"type": "text", "content": text}]}])
            },
        },
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


def request(path: str, body: bytes, token: str = TOKEN, port: int = 0) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port or PORT[0]}\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def read_answers(sock: socket.socket, n: int) -> list[int]:
    """The status codes of ``n`` answers on one kept-alive connection."""
    data = b""
    while data.count(b"HTTP/1.1 ") < n:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    return [int(code) for code in re.findall(rb"HTTP/1\.1 (\d{3})", data)]


def test_each_accepted_export_is_timed_from_its_first_byte_to_its_answer(monkeypatch: Any) -> None:
    clock = [1000.0]
    monkeypatch.setattr(otlp_http, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))

    class SlowHub:
        """Its store takes ``STEP_S`` on the receiver's clock: the ack must measure exactly it."""

        async def submit(self, commands: list[dict[str, Any]], **_: Any) -> list[dict[str, Any]]:
            clock[0] += STEP_S
            return [{"ok": True} for _ in commands]

    async def scenario() -> None:
        rx = OtlpReceiver("127.0.0.1", 0, token=TOKEN)
        await rx.start(SlowHub())
        PORT[0] = rx.address[1]
        try:
            assert rx.status()["ack_ms"] == {"p50": None, "p99": None, "max": None, "n": 0, "window": 0}

            def exchange() -> list[int]:
                with socket.create_connection(("127.0.0.1", rx.address[1]), timeout=10) as s:
                    # two exports pipelined in one write (the second is read with the first),
                    # then a 404 and a metrics export: answered, not exports, not timed
                    two = request("/v1/traces", chat_body("one")) + request("/v1/traces", chat_body("two"))
                    s.sendall(two)
                    first = read_answers(s, 2)
                    s.sendall(request("/v1/nothing", b"{}") + request("/v1/metrics", b"{}"))
                    return first + read_answers(s, 2)

            answers = await asyncio.to_thread(exchange)
            assert answers == [200, 200, 404, 200]

            def refused() -> list[int]:  # refused before its body is read: not an export
                with socket.create_connection(("127.0.0.1", rx.address[1]), timeout=10) as s:
                    s.sendall(request("/v1/traces", chat_body("three"), token="wrong"))
                    return read_answers(s, 1)

            assert (await asyncio.to_thread(refused)) == [401]
            ack = rx.status()["ack_ms"]
            assert ack == {"p50": 250.0, "p99": 250.0, "max": 250.0, "n": 2, "window": 2}
        finally:
            await rx.stop()

    asyncio.run(scenario())


def test_real_acknowledgements_are_positive_and_bounded() -> None:
    class NullHub:
        async def submit(self, commands: list[dict[str, Any]], **_: Any) -> list[dict[str, Any]]:
            return [{"ok": True} for _ in commands]

    async def scenario() -> None:
        rx = OtlpReceiver("127.0.0.1", 0, token=TOKEN)
        await rx.start(NullHub())
        PORT[0] = rx.address[1]
        try:

            def exchange() -> list[int]:
                with socket.create_connection(("127.0.0.1", rx.address[1]), timeout=10) as s:
                    out = []
                    for text in ("a1", "a2", "a3"):
                        s.sendall(request("/v1/traces", chat_body(text)))
                        out += read_answers(s, 1)
                    return out

            assert await asyncio.to_thread(exchange) == [200] * 3
            ack = rx.status()["ack_ms"]
            assert ack["n"] == 3 and ack["window"] == 3
            assert 0 < ack["p50"] <= ack["p99"] <= ack["max"] < 10_000
        finally:
            await rx.stop()

    asyncio.run(scenario())


def test_the_summary_covers_the_last_window_only() -> None:
    d = Durations(size=100)
    for i in range(1, 301):  # 1 ms … 300 ms; the ring keeps 201 … 300
        d.add(i / 1000)
    assert d.summary_ms() == {"p50": 251.0, "p99": 300.0, "max": 300.0, "n": 300, "window": 100}


@pytest.mark.parametrize("values", [[0.005], [0.001, 0.002]])
def test_small_windows(values: list[float]) -> None:
    d = Durations()
    for v in values:
        d.add(v)
    s = d.summary_ms()
    assert s["n"] == len(values) and s["max"] == max(values) * 1000 and s["p50"] is not None


def test_the_first_export_does_not_pay_the_imports() -> None:
    """A started receiver imports uvicorn's HTTP protocol and the OTLP protobuf modules before any request
    (~50 ms the first exporter's answer waited for). A fresh interpreter, nothing imported."""
    import subprocess
    import sys

    code = """
import asyncio, sys
from memviewer.sources.otlp_http import OtlpReceiver
NEEDED = ("uvicorn.protocols.http.h11_impl", "opentelemetry.proto.collector.trace.v1.trace_service_pb2")
assert not any(m in sys.modules for m in NEEDED), [m for m in NEEDED if m in sys.modules]
async def main():
    rx = OtlpReceiver("127.0.0.1", 0, token="k" * 32)
    await rx.start(None)
    await rx._warming
    assert all(m in sys.modules for m in NEEDED), [m for m in NEEDED if m not in sys.modules]
    await rx.stop()
asyncio.run(main())
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
