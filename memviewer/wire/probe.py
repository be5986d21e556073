"""Is a hub answering on this socket? (``doctor``, the TUI, ``serve``, ``demo``.)"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from memviewer.wire import protocol, trust
from memviewer.wire.syncclient import RpcConnection

# In the home: which hub (pid, socket) serves it (see wire.hub). Not "*.lock": a socket
# lock is "<socket>.lock", and `--socket <home>/hub` must not make the two one file.
HOME_LOCK = "hub.owner"


class HubPlace(Protocol):
    """What deciding the serving hub reads: ``Settings``, or the CLI root's ``RootConfig``
    (home and socket without pydantic-settings)."""

    @property
    def home_path(self) -> Path: ...

    @property
    def socket_path(self) -> Path: ...

    @property
    def sources(self) -> Mapping[str, str]: ...


def hub_hello(socket_path: str | Path, timeout: float = 0.5) -> dict[str, Any] | None:
    """The hub's ``hello`` result, or None when nothing answers in time."""
    opened = open_hello(socket_path, timeout)
    if opened is None:
        return None
    opened[0].close()
    return opened[1]


def open_hello(
    socket_path: str | Path,
    timeout: float = 0.5,
    *,
    client: str = "memviewer.probe",
    decode: Callable[[bytes], Any] = protocol.decode_answer,
) -> tuple[RpcConnection, dict[str, Any]] | None:
    """A connection that has said ``hello`` and the hub's answer, or None when nothing
    answers in time. The caller owns (and closes) the connection: a command that probes
    which hub serves its home goes on over the same connection instead of opening another."""
    try:
        conn = RpcConnection(socket_path, timeout=timeout, decode=decode)
    except (OSError, ValueError):
        return None
    try:
        result = conn.call(
            protocol.HELLO, {"protocol": protocol.PROTOCOL_VERSION, "role": "reader", "client": client}
        )
    except (OSError, protocol.RpcError, ValueError):
        conn.close()
        return None
    if not isinstance(result, dict):
        conn.close()
        return None
    return conn, result


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


def serving_hub(settings: HubPlace, timeout: float = 0.5) -> Path | None:
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


def serving_hello(settings: HubPlace, timeout: float = 0.5) -> tuple[Path, dict[str, Any]] | None:
    """``serving_hub``'s socket with the ``hello`` its hub answered (same rules, same errors)."""
    found = serving_connection(settings, timeout)
    if found is None:
        return None
    sock, hello, conn = found
    conn.close()
    return sock, hello


def serving_connection(
    settings: HubPlace,
    timeout: float = 0.5,
    *,
    client: str = "memviewer.probe",
    decode: Callable[[bytes], Any] = protocol.decode_answer,
) -> tuple[Path, dict[str, Any], RpcConnection] | None:
    """``serving_hello``, keeping the connection that said ``hello`` open for the caller."""
    home = settings.home_path
    if settings.sources.get("socket") == "default":
        named = _named_socket(home)
        if named is not None and named != Path(settings.socket_path):
            with contextlib.suppress(trust.UntrustedPath):
                trust.check_socket(named)
                opened = open_hello(named, timeout, client=client, decode=decode)
                if opened is not None:
                    if trust.hello_home_problem(opened[1], home, named) is None:
                        return named, opened[1], opened[0]
                    opened[0].close()  # a stale note naming another home's hub is skipped
    sock = settings.socket_path
    checked = _checked_connection(sock, home, timeout, client=client, decode=decode)
    return (sock, checked[1], checked[0]) if checked is not None else None


def checked_hello(sock: Path, home: Path, timeout: float = 0.5) -> dict[str, Any] | None:
    """``hello`` of the hub on ``sock`` when it serves ``home``; None when none answers.

    Raises ``MemviewerError`` (``conflict``) for an untrusted socket or another home's hub.
    """
    checked = _checked_connection(sock, home, timeout)
    if checked is None:
        return None
    checked[0].close()
    return checked[1]


def _checked_connection(
    sock: Path,
    home: Path,
    timeout: float,
    *,
    client: str = "memviewer.probe",
    decode: Callable[[bytes], Any] = protocol.decode_answer,
) -> tuple[RpcConnection, dict[str, Any]] | None:
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
    opened = open_hello(sock, timeout, client=client, decode=decode)
    if opened is None:
        return None
    problem = trust.hello_home_problem(opened[1], home, sock)
    if problem is not None:
        opened[0].close()
        raise MemviewerError(
            CONFLICT,
            problem,
            data={
                "hint": "one home, one hub: each home's hub listens on its own socket",
                "foreign_home": True,
            },
        )
    return opened


def _named_socket(home: Path) -> Path | None:
    """The socket named in ``<home>/hub.owner`` (whether or not it answers)."""
    from memviewer import locks

    lines = locks.read_note(home / HOME_LOCK).splitlines()
    if len(lines) < 2 or not lines[1].strip():
        return None
    return Path(lines[1].strip())
