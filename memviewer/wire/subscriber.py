"""``Subscriber``: an asyncio client of the live event stream that survives hub restarts.

```python
sub = Subscriber(socket_path, from_seq=0)
async for item in sub.stream(states=True):
    if isinstance(item, ConnectionState): show(item.status)   # connected / reconnecting / resumed …
    else: handle(item)                                         # an EventRecord
```

It remembers the last seq it yielded and always (re)subscribes from there, so
across reconnects and ``lagged`` notices it never yields a seq twice; for an
unfiltered subscription it checks that seqs are consecutive and, should a
gap ever show up, re-subscribes from the last good seq instead of skipping.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memviewer.events import EventRecord
from memviewer.wire import protocol, tls
from memviewer.wire.trust import UntrustedPath, check_socket, hello_home_problem

log = logging.getLogger("memviewer.hub")

READ_LIMIT = 64 * 1024 * 1024


@dataclass(frozen=True)
class ConnectionState:
    """A change of connection state, for the UI (``status`` is one of ``STATUSES``)."""

    status: str
    last_seq: int
    detail: str = ""
    attempt: int = 0
    at: float = field(default_factory=time.time)


STATUSES = ("connecting", "connected", "resumed", "lagged", "reconnecting", "closed")


class _Resync(Exception):
    pass


class Subscriber:
    def __init__(
        self,
        socket_path: str | Path | tls.HubAddress,
        from_seq: int = 0,
        kinds: list[str] | None = None,
        session_id: str | None = None,
        *,
        on_state: Callable[[ConnectionState], None] | None = None,
        min_backoff: float = 0.1,
        max_backoff: float = 2.0,
        client: str = "memviewer.subscriber",
        home: str | Path | None = None,
    ) -> None:
        """``home``: the home this stream is for; a hub serving another one is never used
        (the state says why and the subscriber keeps waiting for the right hub)."""
        # A remote hub (``tls://``): reached over TCP, its token in hello, no home check.
        self.address = socket_path if isinstance(socket_path, tls.HubAddress) else None
        self.socket_path = Path(str(socket_path)) if self.address is None else Path()
        self.home = home if self.address is None else None
        self.last_seq = int(from_seq)
        self.kinds = list(kinds) if kinds else None
        self.session_id = session_id
        self.on_state = on_state
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self.client = client
        self.state = ConnectionState("connecting", self.last_seq)
        self.received = 0
        self.duplicates_dropped = 0
        self.gaps = 0
        self.lagged = 0
        self.reconnects = 0
        self._ids = itertools.count(1)
        self._closed = False
        self._writer: asyncio.StreamWriter | None = None
        self._wake = asyncio.Event()

    @property
    def filtered(self) -> bool:
        return bool(self.kinds) or self.session_id is not None

    def close(self) -> None:
        """End ``stream()`` (from any task of the same loop)."""
        self._closed = True
        self._wake.set()
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()

    def _set(self, status: str, detail: str = "", attempt: int = 0) -> ConnectionState:
        self.state = ConnectionState(status, self.last_seq, detail, attempt)
        if self.on_state is not None:
            try:
                self.on_state(self.state)
            except Exception:
                log.exception("on_state callback failed")
        return self.state

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Connect: the Unix socket (checked: never another user's), or the remote hub with
        its certificate and host name verified (``tls.HubAccessError`` names what failed)."""
        addr = self.address
        if addr is None:
            check_socket(self.socket_path)
            return await asyncio.open_unix_connection(str(self.socket_path), limit=READ_LIMIT)
        if not addr.tls:
            return await asyncio.open_connection(addr.host, addr.port, limit=READ_LIMIT)
        ctx = tls.client_context(addr.ca_file)
        try:
            return await asyncio.open_connection(
                addr.host, addr.port, ssl=ctx, server_hostname=addr.host, limit=READ_LIMIT
            )
        except ssl.SSLError as exc:
            raise tls.handshake_error(addr, exc) from None

    def _sub_params(self) -> dict[str, Any]:
        return {"from_seq": self.last_seq, "kinds": self.kinds, "session_id": self.session_id}

    async def _call(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, method: str, params: dict[str, Any]
    ) -> Any:
        req_id = next(self._ids)
        writer.write(protocol.request(method, params, req_id))
        await writer.drain()
        while True:
            line = await reader.readline()
            if not line:
                raise ConnectionError("hub closed the connection")
            msg = json.loads(line)
            if msg.get("id") == req_id:
                if "error" in msg:
                    raise protocol.RpcError.from_dict(msg["error"])
                return msg.get("result")

    async def stream(self, *, states: bool = False) -> AsyncIterator[EventRecord | ConnectionState]:
        """Events in seq order, forever (until ``close()``); with ``states`` also ``ConnectionState``s."""
        attempt = 0
        connected_once = False
        detail = ""
        while not self._closed:
            if attempt:
                st = self._set("reconnecting", detail, attempt)
                if states:
                    yield st
                delay = min(self.max_backoff, self.min_backoff * 2 ** (attempt - 1))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=delay)
                if self._closed:
                    break
            try:
                reader, writer = await self._open()
            except (UntrustedPath, tls.HubAccessError) as exc:
                attempt += 1
                detail = str(exc)
                continue
            except OSError as exc:
                attempt += 1
                where = self.address.url if self.address is not None else self.socket_path
                detail = f"no hub on {where}: {exc.strerror or exc}"
                continue
            self._writer = writer
            try:
                hello = await asyncio.wait_for(
                    self._call(
                        reader,
                        writer,
                        protocol.HELLO,
                        {
                            "protocol": protocol.PROTOCOL_VERSION,
                            "role": "subscriber",
                            "client": self.client,
                            **({"token": self.address.token} if self.address and self.address.token else {}),
                        },
                    ),
                    timeout=10,
                )
                problem = hello_home_problem(hello, self.home, self.socket_path) if self.home else None
                if problem is not None:
                    raise _Resync(problem)
                await asyncio.wait_for(
                    self._call(reader, writer, protocol.SUBSCRIBE, self._sub_params()), timeout=30
                )
                info = f"from seq {self.last_seq}"
                hub_last = hello.get("last_seq") if isinstance(hello, dict) else None
                if isinstance(hub_last, int) and hub_last < self.last_seq:
                    info += f"; the hub's store ends at seq {hub_last} (a different or restored store?)"
                if connected_once:
                    self.reconnects += 1
                st = self._set("resumed" if connected_once else "connected", info)
                connected_once = True
                attempt = 0
                if states:
                    yield st
                resub_id: int | None = None
                while not self._closed:
                    line = await reader.readline()
                    if not line:
                        raise ConnectionError("hub closed the connection")
                    msg = json.loads(line)
                    if not isinstance(msg, dict):
                        continue
                    method = msg.get("method")
                    if method == protocol.EVENT:
                        ev = EventRecord.from_dict(msg["params"])
                        if ev.seq <= self.last_seq:
                            self.duplicates_dropped += 1
                            continue
                        if not self.filtered and ev.seq != self.last_seq + 1:
                            self.gaps += 1
                            raise _Resync(f"gap after seq {self.last_seq} (got {ev.seq}); re-subscribing")
                        self.last_seq = ev.seq
                        self.received += 1
                        yield ev
                    elif method == protocol.LAGGED:
                        self.lagged += 1
                        st = self._set("lagged", f"hub dropped our queue; resuming from seq {self.last_seq}")
                        if states:
                            yield st
                        resub_id = next(self._ids)
                        writer.write(protocol.request(protocol.SUBSCRIBE, self._sub_params(), resub_id))
                        await writer.drain()
                    elif "id" in msg:
                        if "error" in msg:
                            raise protocol.RpcError.from_dict(msg["error"])
                        if msg["id"] == resub_id:
                            resub_id = None
                            st = self._set("resumed", f"from seq {self.last_seq}")
                            if states:
                                yield st
            except protocol.RpcError as err:
                if err.code == protocol.INVALID_PARAMS:
                    raise  # our own request is wrong: retrying cannot help
                attempt = 1
                detail = f"hub error: {err.message}"
            except _Resync as exc:
                log.warning("%s", exc)
                attempt = 1
                detail = str(exc)
            except (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError, ValueError) as exc:
                attempt = 1
                detail = f"connection lost: {exc}" if str(exc) else "connection lost"
            finally:
                with contextlib.suppress(Exception):
                    writer.close()
                self._writer = None
        st = self._set("closed", "")
        if states:
            yield st
