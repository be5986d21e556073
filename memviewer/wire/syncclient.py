"""A blocking JSON-RPC connection to the hub (standard library only).

Shared by the publisher, ``RemoteService`` and ``probe_hub``: one request at a
time, responses matched by id, notifications handed to a callback.
"""

from __future__ import annotations

import itertools
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memviewer.wire import protocol, tls
from memviewer.wire.trust import check_socket


class HubUnavailable(OSError):
    """No hub answers on the socket (missing, refused, or it went away)."""


class RpcConnection:
    def __init__(
        self,
        socket_path: str | Path | tls.HubAddress,
        *,
        timeout: float | None = 30.0,
        on_notification: Callable[[str, dict[str, Any]], None] | None = None,
        decode: Callable[[bytes], Any] = protocol.decode_answer,
    ) -> None:
        """``decode`` reads each frame from the hub (``protocol.decode_answer``, or
        ``fastjson.decode_answer`` where orjson may be imported: not in the publisher)."""
        self.socket_path = str(socket_path)
        self.on_notification = on_notification
        self._decode = decode
        self._ids = itertools.count(1)
        # A hub on TCP (``tls://``): its token goes in ``hello``; the Unix socket needs none.
        self.address = socket_path if isinstance(socket_path, tls.HubAddress) else None
        if self.address is not None:
            try:
                self.sock: socket.socket = tls.connect(self.address, timeout)
            except tls.HubAccessError:
                raise
            except OSError as exc:
                raise HubUnavailable(
                    exc.errno, f"no hub at {self.address.url}: {exc.strerror or exc}"
                ) from None
            self._rfile = self.sock.makefile("rb")
            return
        assert not isinstance(socket_path, tls.HubAddress)
        check_socket(socket_path)  # raises UntrustedPath: never talk to another user's socket
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(self.socket_path)
        except OSError as exc:
            sock.close()
            raise HubUnavailable(exc.errno, f"no hub on {self.socket_path}: {exc.strerror or exc}") from None
        self.sock = sock
        self._rfile = sock.makefile("rb")

    def settimeout(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)

    def send_raw(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise HubUnavailable(exc.errno, f"hub connection lost: {exc}") from None

    def read_message(self) -> dict[str, Any]:
        try:
            line = self._rfile.readline()
        except OSError as exc:  # includes socket timeouts
            raise HubUnavailable(getattr(exc, "errno", None), f"hub connection lost: {exc}") from None
        if self.address is not None and (not line or line.startswith(b"\x15\x03")):
            problem = tls.plaintext_problem(self.address, line)
            if problem is not None:
                raise problem
        if not line:
            raise HubUnavailable(None, "hub closed the connection")
        try:
            msg = self._decode(line)
        except protocol.RpcError as exc:
            raise HubUnavailable(None, f"unreadable frame from the hub: {exc.message}") from None
        if not isinstance(msg, dict):
            raise HubUnavailable(None, f"unexpected frame from the hub: {msg!r:.200}")
        return msg

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send one request and wait for its response; errors raise ``RpcError``."""
        req_id = next(self._ids)
        if method == protocol.HELLO and self.address is not None and self.address.token:
            params = {**(params or {}), "token": self.address.token}
        self.send_raw(protocol.request(method, params, req_id))
        return self.wait(req_id)

    def call_raw(self, method: str, params_json: bytes) -> Any:
        """Like ``call`` but with pre-encoded params (the publisher's hot path)."""
        req_id = next(self._ids)
        head = b'{"jsonrpc":"2.0","id":%d,"method":"%s","params":' % (req_id, method.encode("ascii"))
        self.send_raw(head + params_json + b"}\n")
        return self.wait(req_id)

    def wait(self, req_id: int) -> Any:
        while True:
            msg = self.read_message()
            if "id" not in msg:
                if self.on_notification is not None:
                    self.on_notification(str(msg.get("method")), msg.get("params") or {})
                continue
            if msg.get("id") != req_id:
                if msg.get("id") is None and "error" in msg:  # e.g. frame too large
                    raise protocol.RpcError.from_dict(msg["error"])
                continue
            if "error" in msg:
                raise protocol.RpcError.from_dict(msg["error"])
            return msg.get("result")

    def close(self) -> None:
        for closer in (self._rfile.close, self.sock.close):
            try:
                closer()
            except OSError:
                pass

    def __enter__(self) -> RpcConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
