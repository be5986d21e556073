"""uvicorn serving the OTLP receiver's ASGI app on the hub's event loop, with the receiver's bounds.

uvicorn's own ``limit_concurrency`` answers 503 once a request's headers arrived and its idle
timer starts only after a first answer; the receiver's contract is stricter (a connection
beyond ``max_connections`` gets 503 + ``Retry-After`` on accept, nothing read; a connection
that sends nothing is closed after the keep-alive; a request whose headers stop arriving is
dropped after ``IDLE_TIMEOUT``), so the HTTP/1.1 protocol is uvicorn's h11 one with those
three hooks. ``Server.serve`` is not used: it would take over the hub's SIGINT/SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from typing import Any, Protocol

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from memviewer.sources.status import SourceStatus


class Receiver(Protocol):
    """What the protocol needs of ``otlp_http.OtlpReceiver`` (no import back up to it)."""

    max_connections: int
    state: SourceStatus

    def refusal(self, status: int, message: str) -> bytes: ...


STOP_S = 2.5  # a stop waits this long for answers in progress, then cancels them


def protocol_for(receiver: Receiver, idle_timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol bound to ``receiver``'s connection cap and counters."""

    class Protocol(H11Protocol):
        refused = False
        stall: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if len(self.connections) >= receiver.max_connections:  # answered unread
                self.refused = True
                self.transport = transport
                receiver.state.count("connections_refused")
                transport.write(
                    receiver.refusal(503, f"too many connections (at most {receiver.max_connections})")
                )
                transport.close()
                return
            super().connection_made(transport)
            # nothing sent yet is an idle keep-alive too (uvicorn arms it after a first answer only)
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )

        def connection_lost(self, exc: Exception | None) -> None:
            self._unstall()
            if not self.refused:
                super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            self._unstall()
            super().data_received(data)
            between = self.cycle is None or self.cycle.response_complete
            if between and self.timeout_keep_alive_task is None and not self.transport.is_closing():
                # part of a request's head: it must go on arriving (a body's wait is the app's)
                self.stall = self.loop.call_later(idle_timeout, self._stalled)

        def _unstall(self) -> None:
            if self.stall is not None:
                self.stall.cancel()
                self.stall = None

        def _stalled(self) -> None:
            self.stall = None
            if not self.transport.is_closing():
                self.transport.close()

        def timeout_keep_alive_handler(self) -> None:
            if not self.transport.is_closing():
                receiver.state.count("idle_closed")
            super().timeout_keep_alive_handler()

    return Protocol


def bind(host: str, port: int) -> socket.socket:
    """The listening socket (its real port known before the app serves; errors raised here)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


class Server:
    """One uvicorn server on the running loop: ``start`` returns once it accepts."""

    def __init__(
        self,
        app: Callable[..., Any],
        receiver: Receiver,
        *,
        keepalive_s: float,
        max_header: int,
        idle_timeout: float,
    ) -> None:
        config = uvicorn.Config(
            app,
            interface="asgi3",
            lifespan="off",
            http=protocol_for(receiver, idle_timeout),
            timeout_keep_alive=keepalive_s,  # type: ignore[arg-type]  # a float is fine: call_later
            h11_max_incomplete_event_size=max_header,
            timeout_graceful_shutdown=int(STOP_S),
            log_config=None,
            log_level="warning",
            access_log=False,
            proxy_headers=False,
            server_header=False,
            date_header=False,
        )
        self.uvicorn = uvicorn.Server(config)
        self._task: asyncio.Task[None] | None = None

    @property
    def connections(self) -> int:
        return len(self.uvicorn.server_state.connections)

    async def start(self, sock: socket.socket) -> None:
        self._task = asyncio.create_task(self.uvicorn._serve(sockets=[sock]), name="memviewer-otlp-http")
        while not self.uvicorn.started:
            if self._task.done():
                self._task.result()  # its error
                raise RuntimeError("the OTLP HTTP server ended at its start")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        if self._task is None:
            return
        self.uvicorn.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(self._task), STOP_S + 0.5)
        except TimeoutError:
            self.uvicorn.force_exit = True
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        self._task = None
