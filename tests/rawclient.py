"""A raw NDJSON socket client for hub tests: sends exactly the bytes given, reads answers line
by line (the protocol tests and the threaded-connection tests share it)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any


def frame(method: str, params: Any = None, req_id: Any = 1) -> bytes:
    """One JSON-RPC request as a newline-terminated frame."""
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": req_id, "method": method}
    if params is not None:
        msg["params"] = params
    return json.dumps(msg).encode() + b"\n"


class Raw:
    def __init__(self, path: Path, timeout: float = 20.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.rfile = self.sock.makefile("rb")

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(self, method: str, params: Any = None, req_id: Any = 1) -> bytes:
        return frame(method, params, req_id)

    def read(self) -> dict[str, Any] | None:
        """The next answer, or None when the hub closed the connection."""
        line = self.rfile.readline()
        return json.loads(line) if line else None

    def answer(self) -> dict[str, Any]:
        """The next answer; fails the test when the hub closed the connection instead."""
        out = self.read()
        assert out is not None, "the hub closed the connection"
        return out

    def call(self, method: str, params: Any = None, req_id: Any = 1) -> dict[str, Any]:
        self.send(frame(method, params, req_id))
        return self.answer()

    def at_eof(self) -> bool:
        return self.rfile.readline() == b""

    def close(self) -> None:
        self.rfile.close()
        self.sock.close()
