"""An OTLP/HTTP receiver inside the hub: ``POST /v1/traces`` and ``POST /v1/logs``.

The receiver is an ASGI app served by uvicorn (``otlp_server``: its h11 protocol, keep-alive,
chunked bodies); it never waits on the store itself: decoding and mapping run in a thread, the
commands are fsync'd to the durable queue (``otlp_queue``) and the exporter is answered;
``_drain`` hands the queue to ``Hub.submit`` (the publishers' queue, group commit). The hub's
receiver (``process=True``, ``build_sources``) runs the HTTP side in a child process
(``otlp_child``, ``otlp_supervisor``) and keeps only the socket and the drain; without it
(unit tests) all of it runs on the hub's loop. Answers follow the OTLP/HTTP spec:

* 200 with an ``Export*ServiceResponse`` in the request's encoding (protobuf or JSON);
  ``partial_success`` names how many spans/records were rejected and why;
* 400 for a body that is not a request (a ``google.rpc.Status`` saying why), 404 for
  another path, 405 for another method, 413 for a body over ``max_body`` (after gzip too),
  415 for a content type other than ``application/x-protobuf`` / ``application/json``;
* 503 with ``Retry-After`` when the store refused the batch (full disk …) or the hub is
  stopping while the body arrives: exporters retry;
* 401 (``WWW-Authenticate: Bearer``) before any body is read when the request does not carry
  ``Authorization: Bearer <token>`` (``memviewer.access``: the home's token file);
* a loopback receiver answers 421 to a ``Host`` that does not name it and 403 to a request
  with an ``Origin`` other than itself (a web page, DNS rebinding), before the token is read;
* bounded: ``MAX_CONNECTIONS`` (503 + ``Retry-After`` on accept beyond it, nothing read),
  ``KEEPALIVE_S`` (idle connections closed, a fresh one that sends nothing too),
  ``IDLE_TIMEOUT`` (a request whose head or body stops arriving is dropped / 408),
  ``MAX_INFLIGHT_BYTES`` of bodies held at once (429 + ``Retry-After`` on the headers: the
  ``Content-Length`` is checked before the body is read; a chunked body as it arrives).
  Every refusal before or while the body is read closes the connection.

``/v1/metrics`` is answered 200 and ignored (counted), so an agent that exports metrics
to the same endpoint (Claude Code) does not log errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import socket
import time
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memviewer import access
from memviewer.errors import MemviewerError
from memviewer.sources import otlp_decode
from memviewer.sources.genai_map import MAX_TEXT, GenAIMapper, MapResult
from memviewer.sources.latency import Durations
from memviewer.sources.otlp_queue import DurableQueue
from memviewer.sources.status import SourceStatus

if TYPE_CHECKING:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

log = logging.getLogger("memviewer.sources.otlp")

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
MAX_BODY = 32 * 1024 * 1024
MAX_HEADER = 64 * 1024
IDLE_TIMEOUT = 60.0  # a request that stops arriving for this long is dropped
#: A kept-alive connection with no request for this long is closed: idle sockets must not
#: pile up to the file limit (exporters reconnect at once when they have spans).
KEEPALIVE_S = 10.0
MAX_CONNECTIONS = 64  # beyond: 503 + Retry-After on accept, nothing read
#: Bytes of bodies held at once (read, decompressed, being mapped): beyond, a request gets 429
#: with Retry-After before its body is read, so parallel big exports cannot grow the hub.
MAX_INFLIGHT_BYTES = 96 * 1024 * 1024
RETRY_AFTER_S = "2"
# The drain stores a queued request this many commands (~32 chat spans) per writer job and
# lets a request being mapped go first between jobs: an exporter's answer waits on its
# mapping, which shares the interpreter with the writer when the receiver runs in the hub
# (docs/benchmarks.md, "OTLP at the SDK's pace"). Its wait is bounded, so a flood of requests
# cannot stop the storing.
DRAIN_CHUNK = 128
DRAIN_YIELD_MAX_S = 0.5


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[v6]:PORT``, ``:PORT`` or ``PORT``; no host means 127.0.0.1."""
    raw = str(text).strip()
    if raw.startswith("["):
        host, _, port = raw[1:].partition("]:")
    elif raw.count(":") == 1 or raw.isdigit():
        host, _, port = raw.rpartition(":")
    else:
        raise ValueError(f"otlp address {text!r} is not HOST:PORT")
    host = host or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"otlp address {text!r}: the port must be a number 0-65535")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def warm_imports() -> None:
    """Import what the first request needs (the OTLP protobuf request and response modules):
    ~50 ms that the first exporter's answer otherwise waited for, in its p99."""
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2  # noqa: F401
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: F401


class _Reject(Exception):
    def __init__(self, status: int, message: str, headers: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or []


def _refusal(status: int, message: str) -> bytes:
    """A whole HTTP/1.1 answer written before reading anything (the connection closes)."""
    body = _status_json(message)
    reason = {429: "Too Many Requests", 503: "Service Unavailable"}.get(status, "")
    head = (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: {JSON}\r\ncontent-length: {len(body)}\r\n"
        f"retry-after: {RETRY_AFTER_S}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class _Budget:
    """The bytes one request holds against the receiver's ``max_inflight_bytes``."""

    def __init__(self, receiver: OtlpReceiver) -> None:
        self.receiver = receiver
        self.held = 0

    def take(self, n: int) -> bool:
        """Reserve ``n`` more bytes; False (nothing reserved) when that would pass the limit."""
        rx = self.receiver
        if n > 0 and rx.inflight_bytes + n > rx.max_inflight_bytes:
            return False
        rx.inflight_bytes += n
        self.held += n
        return True

    def release(self) -> None:
        self.receiver.inflight_bytes -= self.held
        self.held = 0


class OtlpReceiver:
    """``start(hub)`` binds the address (a host other than loopback only when named)."""

    kind = "otlp"

    def __init__(
        self,
        host: str,
        port: int,
        *,
        token: str,
        token_file: Any = None,
        new: bool = False,
        max_body: int = MAX_BODY,
        max_connections: int = MAX_CONNECTIONS,
        max_inflight_bytes: int = MAX_INFLIGHT_BYTES,
        keepalive_s: float = KEEPALIVE_S,
        queue: DurableQueue | None = None,
        drain: bool = True,
        sock: socket.socket | None = None,
        process: bool = False,
    ) -> None:
        self.host = host
        self.port = port
        self.max_body = max_body
        self.max_connections = max_connections
        self.max_inflight_bytes = max(max_inflight_bytes, max_body)  # one biggest body always fits
        self.keepalive_s = keepalive_s
        self.inflight_bytes = 0  # reserved by the requests in progress (``_Budget``)
        # Accepted batches wait here (on disk) for the hub's writer; without one (unit tests of
        # the HTTP side) a request is answered after the hub stored it.
        self.queue = queue
        self.drain = drain  # False in the receiver's own process: the hub drains
        # True: HTTP, mapping and the queue's writes run in a child process (``otlp_child``),
        # the hub keeps the socket and the drain (``otlp_supervisor``)
        self.process = process
        self._child: Any = None
        self.on_answer: Any = None  # called after each answer (the child pushes its status)
        self._queued = asyncio.Event()
        self._drainer: asyncio.Task[None] | None = None
        self.token = token  # every request carries it (``Authorization: Bearer``): 401 otherwise
        self.token_file = token_file
        self.token_new = new  # made for this start: the start line shows it once
        self.mapper = GenAIMapper()
        self.state = SourceStatus(self.kind, f"{host}:{port}")
        for name in (
            "requests",
            "spans",
            "genai_spans",
            "log_records",
            "turns",
            "recalls",
            "rejected_spans",
            "bad_requests",
            "unsupported_media_type",
            "without_conversation_id",
            "bad_messages",
            "command_errors",
            "recall_refusals",
            "store_refusals",
            "metrics_ignored",
            "internal_errors",
            "unauthorized",
            "connections_refused",
            "overloaded",
            "idle_closed",
            "queue_full",
            "queue_errors",
            "bad_host",
            "process_restarts",
        ):
            self.state.counters[name] = 0
        self._hub: Any = None
        self._server: Any = None  # ``otlp_server.Server`` (imported at the start: uvicorn)
        self._sock: socket.socket | None = sock  # bound by the hub (the child is given it)
        self._lock = asyncio.Lock()  # one mapping at a time: the mapper's state is ordered
        self._mapping = 0  # requests being mapped and queued (waiting for ``_lock`` included)
        self._idle = asyncio.Event()  # set while none is
        self._idle.set()
        self.drain_yields = 0  # writer jobs the drain held back for a request's mapping
        # Each accepted export's time from its first byte read to its answer written: the
        # hub's own part of an exporter's export() time (``status()["ack_ms"]``).
        self.ack = Durations()
        self._warming: asyncio.Future[None] | None = None
        self._reading: set[asyncio.Task[Any]] = set()  # requests whose body is still arriving
        self._stopping = False

    @property
    def address(self) -> tuple[str, int]:
        if self._sock is not None:
            name = self._sock.getsockname()
            return name[0], name[1]
        return self.host, self.port

    async def start(self, hub: Any) -> None:
        self._hub = hub
        if not is_loopback(self.host):
            log.warning("OTLP receiver listens on %s, reachable from other machines", self.host)
        try:
            from memviewer.sources import otlp_server

            if self._sock is None:
                self._sock = otlp_server.bind(self.host, self.port)
        except OSError as exc:
            self.state.error(f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}")
            log.error("OTLP receiver not started: cannot listen on %s:%s: %s", self.host, self.port, exc)
            raise
        try:
            if self.process:
                await self._start_child()
            else:
                self._server = otlp_server.Server(
                    self, self, keepalive_s=self.keepalive_s, max_header=MAX_HEADER, idle_timeout=IDLE_TIMEOUT
                )
                await self._server.start(self._sock)
        except BaseException as exc:
            self.state.error(f"cannot start: {exc}")
            self._sock.close()
            self._sock, self._server, self._child = None, None, None
            raise
        host, port = self.address
        self.state.target = f"{host}:{port}"
        self.state.connected = True
        if not self.process:  # the first export must not pay the imports (~50 ms: protobuf)
            self._warming = asyncio.get_running_loop().run_in_executor(None, warm_imports)
        if self.queue is not None and self.drain:  # what a previous run accepted and did not store goes first
            self._queued.set()
            self._drainer = asyncio.create_task(self._drain(), name="memviewer-otlp-drain")
        log.info("OTLP/HTTP receiver on http://%s:%s (/v1/traces, /v1/logs)", host, port)

    async def _start_child(self) -> None:
        from memviewer.sources.otlp_supervisor import Supervisor

        assert self.queue is not None, "the receiver's process needs the durable queue"
        config = {
            "host": self.host,
            "port": self.port,
            "token": self.token,
            "token_file": self.token_file,
            "max_body": self.max_body,
            "max_connections": self.max_connections,
            "max_inflight_bytes": self.max_inflight_bytes,
            "keepalive_s": self.keepalive_s,
            "queue": str(self.queue.folder),
            "max_queue_bytes": self.queue.max_bytes,
            "log_level": logging.getLevelName(logging.getLogger().getEffectiveLevel()),
        }
        self._child = Supervisor(self, self._sock, config)
        await self._child.start()
        self._child.pending(self.queue.pending_bytes)

    def wake_drain(self) -> None:
        self._queued.set()

    async def stop(self) -> None:
        self.state.connected = False
        if self._child is not None:  # first: no batch is queued after the drain stopped
            await self._child.stop()
        self._stopping = True  # a body still arriving is dropped (the exporter sends it again)
        reading = list(self._reading)
        for task in reading:
            task.cancel()
        if reading:
            await asyncio.wait(reading, timeout=1.0)
        if self._drainer is not None:  # what is still queued stays on disk for the next start
            self._drainer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._drainer
            self._drainer = None
        if self._server is not None:  # answers in progress get ``otlp_server.STOP_S`` to finish
            await self._server.stop()
            self._server = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def status(self) -> dict[str, Any]:
        if self._child is not None:
            return self._merged_status()
        out = self.state.to_dict()
        out["token_file"] = str(self.token_file) if self.token_file else None
        out["inflight_bytes"] = self.inflight_bytes
        if self.queue is not None:
            out["queued_bytes"] = self.queue.pending_bytes
        out["connections"] = self._server.connections if self._server is not None else 0
        out["ack_ms"] = self.ack.summary_ms()
        out["limits"] = {
            "max_connections": self.max_connections,
            "max_inflight_bytes": self.max_inflight_bytes,
            "keepalive_s": self.keepalive_s,
            "max_body": self.max_body,
        }
        return out

    def _merged_status(self) -> dict[str, Any]:
        """The hub's part (the drain's counters) and the child's (the requests'), summed."""
        child = self._child.last
        out = self.state.to_dict()
        for name, n in (child.get("counters") or {}).items():
            out["counters"][name] = out["counters"].get(name, 0) + n
        out["last_error"] = self.state.last_error or child.get("last_error")
        out["token_file"] = str(self.token_file) if self.token_file else None
        out["inflight_bytes"] = child.get("inflight_bytes", 0)
        if self.queue is not None:
            out["queued_bytes"] = self.queue.pending_bytes
        out["connections"] = child.get("connections", 0)
        out["ack_ms"] = child.get("ack_ms") or Durations().summary_ms()
        out["limits"] = {
            "max_connections": self.max_connections,
            "max_inflight_bytes": self.max_inflight_bytes,
            "keepalive_s": self.keepalive_s,
            "max_body": self.max_body,
        }
        out["process"] = self._child.status()
        return out

    # -- HTTP (an ASGI app served by uvicorn: ``otlp_server``) ------------------------------
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        t0 = time.perf_counter()  # the request's head is read: the exporter's wait has begun
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        budget = _Budget(self)
        try:
            try:
                got = await self._exchange(scope, headers, receive, budget)
            except _Reject as rej:  # refused before or while its body was read: the connection goes
                got = rej.status, JSON, _status_json(rej.message), [*rej.headers, ("connection", "close")]
        finally:
            budget.release()
        if got is None:
            return  # the client went away
        status, ctype, payload, extra = got
        head = [(b"content-type", ctype.encode()), (b"content-length", str(len(payload)).encode())]
        head += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in extra]
        await send({"type": "http.response.start", "status": status, "headers": head})
        await send({"type": "http.response.body", "body": payload})
        if status == 200 and scope["path"] in ("/v1/traces", "/v1/logs"):
            self.ack.add(time.perf_counter() - t0)  # an accepted export, answered
        if self.on_answer is not None:
            self.on_answer()

    def _check_peer(self, headers: dict[str, str]) -> None:
        """A loopback receiver answers only requests that name it (``Host``) and no web page's
        (``Origin``): a page the user visits cannot reach it through DNS rebinding."""
        names = access.host_names(*self.address) if is_loopback(self.address[0]) else None
        if names is not None and headers.get("host", "") not in names:
            self.state.count("bad_host")
            raise _Reject(421, f"the Host header must name this receiver ({', '.join(sorted(names))})")
        origin = headers.get("origin")
        if origin is not None and (names is None or origin.removeprefix("http://") not in names):
            self.state.count("bad_host")
            raise _Reject(403, f"requests from a web page ({origin}) are refused")

    async def _exchange(
        self, scope: dict[str, Any], headers: dict[str, str], receive: Any, budget: _Budget
    ) -> tuple[int, str, bytes, list[tuple[str, str]]] | None:
        """The answer to one request (``None``: the client went away); a ``_Reject`` raised
        before its body is read (the header checks, the size, the bytes in flight) or while."""
        self._check_peer(headers)
        if not access.bearer_ok(headers.get("authorization"), self.token):
            self.state.count("unauthorized")  # refused before its body is read or held
            where = f", in {self.token_file}" if self.token_file else ""
            raise _Reject(
                401,
                f"send the header 'Authorization: Bearer <token>' (the home's token{where})",
                [("www-authenticate", 'Bearer realm="memviewer"')],
            )
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            raise _Reject(413, f"body larger than {self.max_body} bytes")
        if length is not None and length.isdigit() and not budget.take(int(length)):
            raise self._overloaded()
        chunks: list[bytes] = []
        size = 0
        task = asyncio.current_task()
        assert task is not None
        while True:
            self._reading.add(task)
            try:
                message = await asyncio.wait_for(receive(), IDLE_TIMEOUT)
            except TimeoutError:
                raise _Reject(408, f"the body stopped arriving for {IDLE_TIMEOUT:g} s") from None
            except asyncio.CancelledError:
                if self._stopping:  # ``stop``: nothing of it was accepted; the exporter retries
                    raise _Reject(503, "the hub is stopping", [("retry-after", "5")]) from None
                raise
            finally:
                self._reading.discard(task)
            if message["type"] == "http.disconnect":
                return None
            data = message.get("body", b"")
            size += len(data)
            if size > self.max_body:
                raise _Reject(413, f"body larger than {self.max_body} bytes")
            if size > budget.held and not budget.take(size - budget.held):  # chunked: as it comes
                raise self._overloaded()
            if data:
                chunks.append(data)
            if not message.get("more_body", False):
                break
        return await self._handle(scope["method"], scope["path"], headers, b"".join(chunks), budget)

    def _overloaded(self) -> _Reject:
        self.state.count("overloaded")
        return _Reject(
            429,
            f"the receiver holds {self.inflight_bytes:,} bytes of requests (at most "
            f"{self.max_inflight_bytes:,}); retry after {RETRY_AFTER_S} s",
            [("retry-after", RETRY_AFTER_S)],
        )

    @staticmethod
    def refusal(status: int, message: str) -> bytes:
        """A whole HTTP/1.1 answer written on accept, nothing read (the connection closes)."""
        return _refusal(status, message)

    async def _handle(
        self, method: str, path: str, headers: dict[str, str], body: bytes, budget: _Budget
    ) -> tuple[int, str, bytes, list[tuple[str, str]]]:
        ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        answer_type = JSON if ctype == JSON else PROTOBUF
        self.state.count("requests")
        if path not in ("/v1/traces", "/v1/logs", "/v1/metrics"):
            return 404, JSON, _status_json(f"no such endpoint {path}; use /v1/traces or /v1/logs"), []
        if method != "POST":
            return 405, JSON, _status_json("use POST"), [("allow", "POST")]
        if ctype not in (PROTOBUF, JSON):
            self.state.count("unsupported_media_type")
            return (
                415,
                JSON,
                _status_json(f"content type {ctype or '(none)'!r}: use {PROTOBUF} or {JSON}"),
                [],
            )
        try:
            raw = len(body)
            body = _decompress(body, headers.get("content-encoding", "").strip().lower(), self.max_body)
        except _Reject as rej:
            self.state.count("bad_requests")
            return rej.status, answer_type, _status(answer_type, rej.message), []
        if len(body) != raw and not budget.take(len(body)):  # the inflated copy counts too
            over = self._overloaded()
            return over.status, answer_type, _status(answer_type, over.message), over.headers
        if path == "/v1/metrics":
            self.state.count("metrics_ignored")
            return 200, answer_type, _response(answer_type, "metrics", 0, ""), []
        signal = "traces" if path == "/v1/traces" else "logs"
        loop = asyncio.get_running_loop()
        if self.queue is not None and not self.queue.has_room(len(body)):  # before mapping: a
            self.state.count("queue_full")  # refused request must leave the mapper untouched
            over = _Reject(
                429,
                f"{self.queue.pending_bytes:,} bytes wait to be stored; retry after {RETRY_AFTER_S} s",
                [("retry-after", RETRY_AFTER_S)],
            )
            return over.status, answer_type, _status(answer_type, over.message), over.headers
        self._mapping += 1
        self._idle.clear()
        try:
            async with self._lock:  # decode + map (+ queue) in one thread job, in arrival order
                if self.queue is None:
                    result = await loop.run_in_executor(None, self._map, signal, ctype, body)
                    commands = result.commands
                    outcome: list[dict[str, Any]] | None = (
                        await self._hub.submit(commands) if commands else []
                    )
                else:
                    outcome = None  # stored by ``_drain``; the answer waits for the fsync only
                    result = await loop.run_in_executor(None, self._map_and_queue, signal, ctype, body)
                    commands = result.commands
                    if commands:
                        self._queued.set()
        except OSError as exc:  # the queue could not be written (a full disk): retryable
            self._forget()
            self.state.count("queue_errors")
            self.state.error(f"cannot queue the batch: {exc}")
            log.error("OTLP %s request not queued: %s", signal, exc)
            message = f"cannot queue the batch: {exc.strerror or exc}"
            return 503, answer_type, _status(answer_type, message), [("retry-after", "5")]
        except otlp_decode.OtlpDecodeError as exc:
            self.state.count("bad_requests")
            self.state.error(str(exc))
            log.warning("OTLP %s request refused: %s", signal, exc)
            return 400, answer_type, _status(answer_type, str(exc)), []
        except MemviewerError as exc:  # the store failed or the hub is stopping: retryable
            self._forget()  # the mapper counted this batch as sent: the retry must send it again
            self.state.count("store_refusals")
            self.state.error(exc.message)
            log.error("OTLP %s request not stored: %s", signal, exc.message)
            return 503, answer_type, _status(answer_type, exc.message), [("retry-after", "5")]
        except Exception as exc:  # a mapping bug must cost one request, never the receiver
            self._forget()
            self.state.count("internal_errors")
            self.state.error(f"{type(exc).__name__}: {exc}")
            log.exception("OTLP %s request failed", signal)
            return 500, answer_type, _status(answer_type, f"internal error: {type(exc).__name__}"), []
        finally:
            self._mapping -= 1
            if not self._mapping:
                self._idle.set()
        return self._account(signal, answer_type, result, commands, outcome or [])

    async def _yield_to_requests(self) -> None:
        """Wait (at most ``DRAIN_YIELD_MAX_S``) while a request is being mapped and queued."""
        if self._idle.is_set():
            return
        self.drain_yields += 1
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._idle.wait(), DRAIN_YIELD_MAX_S)

    async def _drain(self) -> None:
        """Store the queued batches in order through the hub's writer, ``DRAIN_CHUNK``
        commands a job (one transaction each; the batch's file goes once all are stored). A
        refusal (a full disk, a stopping hub) keeps the batch and retries from the first
        job not stored, so nothing accepted is lost or counted twice; after a crash the
        whole file is stored again, and what was stored already is a replay (a no-op)."""
        assert self.queue is not None
        loop = asyncio.get_running_loop()
        backoff = 0.5
        stored_path: Path | None = None  # the batch a refusal interrupted, and how far it got
        stored_n = 0
        while True:
            path = self.queue.oldest()
            if path is None:
                self._queued.clear()
                if self.queue.oldest() is None:
                    await self._queued.wait()
                continue
            try:
                commands = await loop.run_in_executor(None, self.queue.load, path)
            except (OSError, ValueError) as exc:  # unreadable: kept aside, never retried forever
                self.state.count("queue_errors")
                self.state.error(f"queued batch {path.name} unreadable: {exc}")
                log.error("OTLP queued batch %s is unreadable (%s): moved to %s.bad", path, exc, path.name)
                try:
                    self.queue.set_aside(path)
                except OSError:  # cannot even move it: wait rather than spin on it
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 5.0)
                continue
            # a job's bytes for the writer's bound: its share of the file (not encoded again)
            per_command = path.stat().st_size // max(1, len(commands)) if commands else 0
            try:
                for i in range(stored_n if path == stored_path else 0, len(commands), DRAIN_CHUNK):
                    await self._yield_to_requests()
                    chunk = commands[i : i + DRAIN_CHUNK]
                    self._stored(chunk, await self._hub.submit(chunk, nbytes=per_command * len(chunk)))
                    stored_path, stored_n = path, i + len(chunk)
                await loop.run_in_executor(None, self.queue.done, path)
                stored_path, stored_n = None, 0
                if self._child is not None:
                    self._child.pending(self.queue.pending_bytes)
            except Exception as exc:  # noqa: BLE001 - the batch stays queued; the drain goes on
                why = exc.message if isinstance(exc, MemviewerError) else f"{type(exc).__name__}: {exc}"
                self.state.count("store_refusals" if isinstance(exc, MemviewerError) else "queue_errors")
                self.state.error(why)
                log.warning("OTLP batch %s not stored yet (%s); retrying in %.1f s", path.name, why, backoff)
                await asyncio.sleep(backoff)  # a stored batch retried is a replay: a no-op
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.5

    def _stored(self, commands: list[dict[str, Any]], outcome: list[dict[str, Any]]) -> list[str]:
        """Count what the store did with a batch; the problems it reported."""
        st = self.state
        problems: list[str] = []
        stored = 0
        for cmd, res in zip(commands, outcome, strict=False):
            err = res.get("error")
            if err is None:
                if cmd["op"] in ("start_episode", "add_turn"):
                    stored += 1
                    st.count("turns")
                elif cmd["op"] == "record_recall":
                    st.count("recalls")
                continue
            if cmd["op"] == "record_recall":
                st.count("recall_refusals")
                continue  # the hub's recall log may be absent; the turns still count
            st.count("command_errors")
            problems.append(f"{cmd['op']}: {err.get('message', err)}")
        for reason in problems[:5]:
            log.warning("OTLP: %s", reason)
        if problems:
            st.error(problems[0])
        if stored:
            st.delivered()
        return problems

    def _forget(self) -> None:
        """Drop the mapper's memory of what was sent (after a batch that was not stored): the
        exporter's retry then maps every turn again, and the store answers the ones it has as
        no-ops (the ids are derived), exactly as after a hub restart."""
        self.mapper = GenAIMapper(self.mapper.max_conversations)

    def _map_and_queue(self, signal: str, ctype: str, body: bytes) -> MapResult:
        """``_map``, then the commands written to the queue, in the same thread job: one hand-off
        to the event loop a request instead of two (each waits for the interpreter, which the
        writer thread and the loop share)."""
        assert self.queue is not None
        result = self._map(signal, ctype, body)
        if result.commands:
            self.queue.put(result.commands)
        return result

    def _map(self, signal: str, ctype: str, body: bytes) -> MapResult:
        try:
            return self._map_body(signal, ctype, body)
        except RecursionError:
            raise otlp_decode.OtlpDecodeError("the request is nested too deeply") from None

    def _map_body(self, signal: str, ctype: str, body: bytes) -> MapResult:
        if signal == "traces":
            spans = (otlp_decode.decode_traces_pb if ctype == PROTOBUF else otlp_decode.decode_traces_json)(
                body
            )
            return self.mapper.map_spans(spans)
        records = (otlp_decode.decode_logs_pb if ctype == PROTOBUF else otlp_decode.decode_logs_json)(body)
        return self.mapper.map_logs(records)

    def _account(
        self,
        signal: str,
        answer_type: str,
        result: MapResult,
        commands: list[dict[str, Any]],
        outcome: list[dict[str, Any]],
    ) -> tuple[int, str, bytes, list[tuple[str, str]]]:
        st = self.state
        st.count("spans" if signal == "traces" else "log_records", result.spans)
        st.count("genai_spans", result.genai_spans)
        for name, n in result.counters.items():
            if name in ("turns", "recalls"):
                continue
            st.count(name, n)
        problems = [reason for _, reason in result.rejected]
        if outcome:  # stored before the answer (no queue): the store's refusals are reported
            problems += self._stored(commands, outcome)
        if result.counters.get("without_conversation_id"):
            log.info(
                "%d %s without gen_ai.conversation.id: grouped by trace id",
                result.counters["without_conversation_id"],
                "spans" if signal == "traces" else "log records",
            )
        for reason in [reason for _, reason in result.rejected][:5]:
            log.warning("OTLP %s: %s", signal, reason)
        if result.rejected:
            st.error(result.rejected[0][1])
        rejected = len(result.rejected)
        st.count("rejected_spans", rejected)
        if result.cut:  # stored, but not whole: the exporter hears it as a warning (rejected 0)
            longest = max(result.cut)
            problems.append(
                f"{len(result.cut)} message{'s' if len(result.cut) != 1 else ''} longer than "
                f"{MAX_TEXT:,} characters (the longest {longest:,}) stored cut to {MAX_TEXT:,}"
            )
        message = "; ".join(problems[:3])
        return 200, answer_type, _response(answer_type, signal, rejected, message), []


def _decompress(body: bytes, encoding: str, limit: int) -> bytes:
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise _Reject(415, f"content encoding {encoding!r} is not supported (use gzip)")
    wbits = 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS
    d = zlib.decompressobj(wbits)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as exc:
        raise _Reject(400, f"the {encoding} body is corrupt: {exc}") from None
    if len(out) > limit or d.unconsumed_tail:
        raise _Reject(413, f"the body inflates past {limit} bytes")
    if not d.eof:
        raise _Reject(400, f"the {encoding} body is truncated")
    return out


def _status_json(message: str) -> bytes:
    return json.dumps({"code": 3, "message": message}).encode()


def _status(ctype: str, message: str) -> bytes:
    if ctype == JSON:
        return _status_json(message)
    # google.rpc.Status {int32 code = 1; string message = 2}, encoded by hand: its
    # generated module lives in googleapis-common-protos, not in opentelemetry-proto.
    text = message.encode("utf-8")[:65536]
    return b"\x08\x03\x12" + _varint(len(text)) + text


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _response(ctype: str, signal: str, rejected: int, message: str) -> bytes:
    field = {"traces": "rejected_spans", "logs": "rejected_log_records", "metrics": "rejected_data_points"}[
        signal
    ]
    if ctype == JSON:
        if not rejected and not message:
            return b"{}"
        camel = {"traces": "rejectedSpans", "logs": "rejectedLogRecords", "metrics": "rejectedDataPoints"}[
            signal
        ]
        return json.dumps({"partialSuccess": {camel: str(rejected), "errorMessage": message}}).encode()
    resp: ExportTraceServiceResponse | ExportLogsServiceResponse | ExportMetricsServiceResponse
    if signal == "traces":
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

        resp = trace_service_pb2.ExportTraceServiceResponse()
    elif signal == "logs":
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2

        resp = logs_service_pb2.ExportLogsServiceResponse()
    else:
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

        resp = metrics_service_pb2.ExportMetricsServiceResponse()
    if rejected or message:
        setattr(resp.partial_success, field, rejected)
        resp.partial_success.error_message = message
    return resp.SerializeToString()
