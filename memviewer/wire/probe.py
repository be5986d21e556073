"""Is a hub answering on this socket? (``doctor``, the TUI, ``serve``, ``demo``.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memviewer.wire import protocol
from memviewer.wire.syncclient import RpcConnection


def hub_hello(socket_path: str | Path, timeout: float = 0.5) -> dict[str, Any] | None:
    """The hub's ``hello`` result, or None when nothing answers in time."""
    try:
        with RpcConnection(socket_path, timeout=timeout) as conn:
            result = conn.call(
                protocol.HELLO,
                {"protocol": protocol.PROTOCOL_VERSION, "role": "reader", "client": "memviewer.probe"},
            )
    except (OSError, protocol.RpcError, ValueError):
        return None
    return result if isinstance(result, dict) else None


def probe_hub(socket_path: str | Path, timeout: float = 0.5) -> str | None:
    """The version string of the hub on ``socket_path``, or None if none answers."""
    hello = hub_hello(socket_path, timeout)
    if hello is None:
        return None
    return str(hello.get("server_version") or "unknown")
