"""An OTLP/HTTP receiver inside the hub: ``POST /v1/traces`` and ``POST /v1/logs``.

HTTP/1.1 framing is ``h11``'s (keep-alive, chunked bodies); the server runs on the hub's
event loop and never waits on the store itself: decoding and mapping run in a thread,
the commands go through ``Hub.submit`` (the publishers' queue, group commit), and the
answer is sent once they are durable. Answers follow the OTLP/HTTP spec:

* 200 with an ``Export*ServiceResponse`` in the request's encoding (protobuf or JSON);
  ``partial_success`` names how many spans/records were rejected and why;
* 400 for a body that is not a request (a ``google.rpc.Status`` saying why), 404 for
  another path, 405 for another method, 413 for a body over ``max_body`` (after gzip too),
  415 for a content type other than ``application/x-protobuf`` / ``application/json``;
* 503 with ``Retry-After`` when the store refused the batch (full disk …): exporters retry;
* 401 (``WWW-Authenticate: Bearer``) before any body is read when the request does not carry
  ``Authorization: Bearer <token>`` (``memviewer.access``: the home's token file);
* bounded: ``MAX_CONNECTIONS`` (503 on accept beyond it), ``KEEPALIVE_S`` (idle connections
  closed), ``MAX_INFLIGHT_BYTES`` of bodies held at once (429 + ``Retry-After`` on the headers).

``/v1/metrics`` is answered 200 and ignored (counted), so an agent that exports metrics
to the same endpoint (Claude Code) does not log errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
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
# mapping, which shares the interpreter with the writer (docs/benchmarks.md, "OTLP at the
# SDK's pace"). Its wait is bounded, so a flood of requests cannot stop the storing.
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
    """Import what the first request needs (h11, the OTLP protobuf request and response
    modules): ~50 ms that the first exporter's answer otherwise waited for, in its p99."""
    import h11  # noqa: F401
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
        ):
            self.state.counters[name] = 0
        self._hub: Any = None
        self._server: asyncio.Server | None = None
        self._lock = asyncio.Lock()  # one mapping at a time: the mapper's state is ordered
        self._mapping = 0  # requests being mapped and queued (waiting for ``_lock`` included)
        self._idle = asyncio.Event()  # set while none is
        self._idle.set()
        self.drain_yields = 0  # writer jobs the drain held back for a request's mapping
        # Each accepted export's time from its first byte read to its answer written: the
        # hub's own part of an exporter's export() time (``status()["ack_ms"]``).
        self.ack = Durations()
        self._conns: set[asyncio.Task[Any]] = set()
        self._warming: asyncio.Future[None] | None = None

    @property
    def address(self) -> tuple[str, int]:
        if self._server is not None and self._server.sockets:
            name = self._server.sockets[0].getsockname()
            return name[0], name[1]
        return self.host, self.port

    async def start(self, hub: Any) -> None:
        self._hub = hub
        if not is_loopback(self.host):
            log.warning("OTLP receiver listens on %s, reachable from other machines", self.host)
        try:
            self._server = await asyncio.start_server(self._client, self.host, self.port, limit=MAX_HEADER)
        except OSError as exc:
            self.state.error(f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}")
            log.error("OTLP receiver not started: cannot listen on %s:%s: %s", self.host, self.port, exc)
            raise
        host, port = self.address
        self.state.target = f"{host}:{port}"
        self.state.connected = True
        # the first export must not pay the imports (~50 ms: h11, the OTLP protobuf modules)
        self._warming = asyncio.get_running_loop().run_in_executor(None, warm_imports)
        if self.queue is not None:  # what a previous run accepted and did not store goes first
            self._queued.set()
            self._drainer = asyncio.create_task(self._drain(), name="memviewer-otlp-drain")
        log.info("OTLP/HTTP receiver on http://%s:%s (/v1/traces, /v1/logs)", host, port)

    async def stop(self) -> None:
        self.state.connected = False
        if self._drainer is not None:  # what is still queued stays on disk for the next start
            self._drainer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._drainer
            self._drainer = None
        if self._server is not None:
            self._server.close()
            for task in list(self._conns):
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    def status(self) -> dict[str, Any]:
        out = self.state.to_dict()
        out["token_file"] = str(self.token_file) if self.token_file else None
        out["inflight_bytes"] = self.inflight_bytes
        if self.queue is not None:
            out["queued_bytes"] = self.queue.pending_bytes
        out["connections"] = len(self._conns)
        out["ack_ms"] = self.ack.summary_ms()
        out["limits"] = {
            "max_connections": self.max_connections,
            "max_inflight_bytes": self.max_inflight_bytes,
            "keepalive_s": self.keepalive_s,
            "max_body": self.max_body,
        }
        return out

    # -- HTTP --------------------------------------------------------------------------------
    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import h11

        if len(self._conns) >= self.max_connections:  # answered unread: the client retries later
            self.state.count("connections_refused")
            with contextlib.suppress(Exception):
                writer.write(_refusal(503, f"too many connections (at most {self.max_connections})"))
                await asyncio.wait_for(writer.drain(), 1.0)
            writer.close()
            return
        task = asyncio.current_task()
        if task is not None:
            self._conns.add(task)
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER)
        try:
            while True:
                budget = _Budget(self)
                try:
                    request, body, error, t0 = await self._read_request(conn, reader, budget)
                    if request is None and error is None:
                        return  # the client closed, or stayed idle past the keep-alive
                    if error is not None:
                        status, ctype, payload, headers = (
                            error.status,
                            JSON,
                            _status_json(error.message),
                            error.headers,
                        )
                    else:
                        status, ctype, payload, headers = await self._handle(request, body, budget)
                    del body
                finally:
                    budget.release()
                await self._send(conn, writer, status, ctype, payload, headers)
                if status == 200 and request.target.startswith((b"/v1/traces", b"/v1/logs")):
                    self.ack.add(time.perf_counter() - t0)  # an accepted export, answered
                if conn.our_state is h11.MUST_CLOSE or error is not None:
                    return
                try:
                    conn.start_next_cycle()
                except h11.LocalProtocolError:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            return
        except asyncio.CancelledError:
            return
        except Exception:
            log.exception("OTLP connection failed")
        finally:
            if task is not None:
                self._conns.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _read_request(
        self, conn: Any, reader: asyncio.StreamReader, budget: _Budget
    ) -> tuple[Any, bytes, _Reject | None, float]:
        """The next request, its body or why it is refused, and when its first byte was read
        (``perf_counter``; a request already buffered with the previous one: now)."""
        import h11

        request = None
        chunks: list[bytes] = []
        size = 0
        started = False  # a byte of this request has arrived (before it: the keep-alive wait)
        t0 = 0.0
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                return None, b"", _Reject(400, f"bad HTTP request: {exc}"), t0
            if event is not h11.NEED_DATA and not started:
                started, t0 = True, time.perf_counter()
            if event is h11.NEED_DATA:
                try:
                    wait = IDLE_TIMEOUT if started else self.keepalive_s
                    data = await asyncio.wait_for(reader.read(256 * 1024), wait)
                except TimeoutError:
                    if started:
                        raise
                    self.state.count("idle_closed")
                    return None, b"", None, t0
                if not started:
                    started, t0 = True, time.perf_counter()
                conn.receive_data(data)
                if not data and request is None:
                    return None, b"", None, t0
                continue
            if isinstance(event, h11.ConnectionClosed):
                return None, b"", None, t0
            if isinstance(event, h11.Request):
                request = event
                if not access.bearer_ok(dict(event.headers).get(b"authorization"), self.token):
                    self.state.count("unauthorized")  # refused before its body is read or held
                    where = f", in {self.token_file}" if self.token_file else ""
                    return (
                        request,
                        b"",
                        _Reject(
                            401,
                            f"send the header 'Authorization: Bearer <token>' (the home's token{where})",
                            [("www-authenticate", 'Bearer realm="memviewer"')],
                        ),
                        t0,
                    )
                length = dict(event.headers).get(b"content-length")
                if length is not None and length.isdigit() and int(length) > self.max_body:
                    return request, b"", _Reject(413, f"body larger than {self.max_body} bytes"), t0
                if length is not None and length.isdigit() and not budget.take(int(length)):
                    return request, b"", self._overloaded(), t0
                continue
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size > self.max_body:
                    return request, b"", _Reject(413, f"body larger than {self.max_body} bytes"), t0
                if size > budget.held and not budget.take(size - budget.held):  # chunked: as it comes
                    return request, b"", self._overloaded(), t0
                chunks.append(event.data)
                continue
            if isinstance(event, h11.EndOfMessage):
                return request, b"".join(chunks), None, t0

    def _overloaded(self) -> _Reject:
        self.state.count("overloaded")
        return _Reject(
            429,
            f"the receiver holds {self.inflight_bytes:,} bytes of requests (at most "
            f"{self.max_inflight_bytes:,}); retry after {RETRY_AFTER_S} s",
            [("retry-after", RETRY_AFTER_S)],
        )

    async def _send(
        self, conn: Any, writer: asyncio.StreamWriter, status: int, ctype: str, payload: bytes, headers: Any
    ) -> None:
        import h11

        head = [("content-type", ctype), ("content-length", str(len(payload))), *headers]
        out = conn.send(h11.Response(status_code=status, headers=head))
        out += conn.send(h11.Data(data=payload)) if payload else b""
        out += conn.send(h11.EndOfMessage())
        writer.write(out)
        await writer.drain()

    async def _handle(
        self, request: Any, body: bytes, budget: _Budget
    ) -> tuple[int, str, bytes, list[tuple[str, str]]]:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in request.headers}
        path = request.target.decode("latin-1").split("?", 1)[0]
        ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        answer_type = JSON if ctype == JSON else PROTOBUF
        self.state.count("requests")
        if path not in ("/v1/traces", "/v1/logs", "/v1/metrics"):
            return 404, JSON, _status_json(f"no such endpoint {path}; use /v1/traces or /v1/logs"), []
        if request.method != b"POST":
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
