"""The OTLP receiver on uvicorn keeps its own HTTP contract: a loopback receiver answers only
requests whose ``Host`` names it and no web page's (``Origin``), a head that stops arriving
is dropped, and a stop with a connection open returns promptly. Raw sockets, in-process."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

from memviewer.sources import otlp_server
from memviewer.sources.otlp_http import OtlpReceiver

TOKEN = "k" * 32


class NullHub:
    async def submit(self, commands: list[dict[str, Any]], **_: Any) -> list[dict[str, Any]]:
        return [{"ok": True} for _ in commands]


def ask(port: int, extra: str) -> bytes:
    """One request (``{}`` to /v1/traces) with the header lines ``extra``; the whole answer."""
    head = (
        "POST /v1/traces HTTP/1.1\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {TOKEN}\r\nContent-Length: 2\r\nConnection: close\r\n{extra}\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.encode() + b"{}")
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def test_host_and_origin_must_name_the_loopback_receiver() -> None:
    async def scenario() -> None:
        rx = OtlpReceiver("127.0.0.1", 0, token=TOKEN)
        await rx.start(NullHub())
        port = rx.address[1]
        try:
            for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
                answer = await asyncio.to_thread(ask, port, f"Host: {host}\r\n")
                assert answer.startswith(b"HTTP/1.1 200"), answer
            rebound = await asyncio.to_thread(ask, port, f"Host: evil.example:{port}\r\n")
            assert rebound.startswith(b"HTTP/1.1 421") and b"Host header" in rebound, rebound
            page = f"Host: 127.0.0.1:{port}\r\nOrigin: http://evil.example\r\n"
            refused = await asyncio.to_thread(ask, port, page)
            assert refused.startswith(b"HTTP/1.1 403"), refused
            same = f"Host: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\n"
            assert (await asyncio.to_thread(ask, port, same)).startswith(b"HTTP/1.1 200")
            counters = rx.status()["counters"]
            assert counters["bad_host"] == 2 and counters["requests"] == 3
        finally:
            await rx.stop()

    asyncio.run(scenario())


def test_a_head_that_stops_arriving_is_dropped(monkeypatch: Any) -> None:
    monkeypatch.setattr("memviewer.sources.otlp_http.IDLE_TIMEOUT", 0.3)

    async def scenario() -> None:
        rx = OtlpReceiver("127.0.0.1", 0, token=TOKEN, keepalive_s=30)
        await rx.start(NullHub())
        try:

            def stall() -> bytes:
                with socket.create_connection(("127.0.0.1", rx.address[1]), timeout=10) as s:
                    s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and no more
                    return s.recv(4096)

            assert await asyncio.to_thread(stall) == b""  # closed by the receiver, not after 30 s
            assert rx.status()["counters"]["idle_closed"] == 0  # not an idle keep-alive
        finally:
            await rx.stop()

    asyncio.run(scenario())


def test_a_stop_with_connections_open_is_bounded(caplog: Any) -> None:
    async def scenario() -> None:
        rx = OtlpReceiver("127.0.0.1", 0, token=TOKEN, keepalive_s=30)
        await rx.start(NullHub())
        idle = await asyncio.to_thread(socket.create_connection, ("127.0.0.1", rx.address[1]), 10)
        part = await asyncio.to_thread(socket.create_connection, ("127.0.0.1", rx.address[1]), 10)
        part.sendall(
            f"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1:{rx.address[1]}\r\n"
            f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n".encode()
            + b"Content-Length: 100\r\n\r\n{"
        )
        await asyncio.to_thread(lambda: _until(lambda: rx.inflight_bytes == 100))
        t0 = time.monotonic()
        await rx.stop()
        assert time.monotonic() - t0 < otlp_server.STOP_S  # the half-sent body is not waited for
        assert rx.inflight_bytes == 0
        idle.close()
        part.close()
        assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text

    asyncio.run(scenario())


def _until(what: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.01)
