"""Is a hub answering on this socket? (``doctor``, the TUI, ``serve``, ``demo``.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memviewer.wire import protocol
from memviewer.wire.syncclient import RpcConnection

# In the home: which hub (pid, socket) serves it (see wire.hub). Not "*.lock": a socket
# lock is "<socket>.lock", and `--socket <home>/hub` must not make the two one file.
HOME_LOCK = "hub.owner"


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


def home_hub_socket(home: str | Path, timeout: float = 0.5) -> Path | None:
    """The socket of the hub that serves ``home`` (named in ``<home>/hub.owner``), if it answers.

    A hub started with ``--socket`` elsewhere still owns the home; commands and the
    viewer that were not told that socket find it here instead of missing it (or, for
    the viewer, failing to host a second hub over the same store).
    """
    try:
        lines = (Path(home) / HOME_LOCK).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    if len(lines) < 2 or not lines[1].strip():
        return None
    sock = Path(lines[1].strip())
    return sock if hub_hello(sock, timeout) is not None else None


def serving_hub(settings: Any, timeout: float = 0.5) -> Path | None:
    """The socket of the hub that serves ``settings``' home, or None when none answers.

    The one place that decides which hub a command, the viewer, the MCP server or a
    reader talks to (``memviewer.api.open_reader`` calls it). A socket that was not
    chosen (``sources['socket'] == 'default'``) follows the hub named in the home.
    """
    if getattr(settings, "sources", {}).get("socket") == "default":
        found = home_hub_socket(settings.home_path, timeout)
        if found is not None:
            return found
    sock = Path(settings.socket_path)
    return sock if hub_hello(sock, timeout) is not None else None
