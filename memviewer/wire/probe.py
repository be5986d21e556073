"""Is a hub answering on this socket? (``doctor``, the TUI, ``serve``, ``demo``.)"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memviewer.wire import protocol, trust
from memviewer.wire.syncclient import RpcConnection

if TYPE_CHECKING:
    from memviewer.config import Settings

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
    """The socket of the hub that serves ``home`` (named in ``<home>/hub.owner``), if it
    answers and serves that home. Prefer ``serving_hub(settings)``, which decides."""
    sock = _named_socket(Path(home))
    if sock is None:
        return None
    try:
        trust.check_socket(sock)
    except trust.UntrustedPath:
        return None
    hello = hub_hello(sock, timeout)
    if hello is None or trust.hello_home_problem(hello, home, sock) is not None:
        return None
    return sock


def serving_hub(settings: Settings, timeout: float = 0.5) -> Path | None:
    """The socket of the hub that serves ``settings``' home, or None when none answers.

    The one place that decides which hub a command, the viewer, ``tail``, the MCP server
    or a reader talks to (``memviewer.api.open_reader`` calls it). A socket that was not
    chosen (``sources['socket'] == 'default'``) follows the hub named in the home first,
    then the home's own default socket. Raises ``MemviewerError`` (code ``conflict``) when
    the socket belongs to another user or is writable by others, or when the hub on it
    serves another home: one error naming both, never a silent switch of homes.
    """
    found = serving_hello(settings, timeout)
    return found[0] if found is not None else None


def serving_hello(settings: Settings, timeout: float = 0.5) -> tuple[Path, dict[str, Any]] | None:
    """``serving_hub``'s socket with the ``hello`` its hub answered (same rules, same errors)."""
    home = settings.home_path
    if settings.sources.get("socket") == "default":
        named = _named_socket(home)
        if named is not None and named != Path(settings.socket_path):
            with contextlib.suppress(trust.UntrustedPath):
                trust.check_socket(named)
                hello = hub_hello(named, timeout)
                if hello is not None and trust.hello_home_problem(hello, home, named) is None:
                    return named, hello  # a stale note naming another home's hub is skipped
    sock = settings.socket_path
    hello = checked_hello(sock, home, timeout)
    return (sock, hello) if hello is not None else None


def checked_hello(sock: Path, home: Path, timeout: float = 0.5) -> dict[str, Any] | None:
    """``hello`` of the hub on ``sock`` when it serves ``home``; None when none answers.

    Raises ``MemviewerError`` (``conflict``) for an untrusted socket or another home's hub.
    """
    from memviewer.errors import CONFLICT, MemviewerError

    try:
        trust.check_socket(sock)
    except trust.UntrustedPath as exc:
        raise MemviewerError(
            CONFLICT,
            str(exc),
            data={
                "hint": "another user may be impersonating the hub: remove that folder or socket, "
                "or set XDG_RUNTIME_DIR / --socket to a folder of your own"
            },
        ) from None
    hello = hub_hello(sock, timeout)
    if hello is None:
        return None
    problem = trust.hello_home_problem(hello, home, sock)
    if problem is not None:
        raise MemviewerError(
            CONFLICT,
            problem,
            data={
                "hint": "one home, one hub: each home's hub listens on its own socket",
                "foreign_home": True,
            },
        )
    return hello


def _named_socket(home: Path) -> Path | None:
    """The socket named in ``<home>/hub.owner`` (whether or not it answers)."""
    from memviewer import locks

    lines = locks.read_note(home / HOME_LOCK).splitlines()
    if len(lines) < 2 or not lines[1].strip():
        return None
    return Path(lines[1].strip())
