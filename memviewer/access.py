"""The credential of memviewer's HTTP listeners (MCP over HTTP, the OTLP receiver).

A loopback port is open to every local user, so each such listener requires a bearer
token: ``<home>/token`` (0600, in the 0700 home), made on first use and shown where the
server starts, as a notebook server shows its token. A client on the same account reads the
file; another user cannot. The Unix socket needs none: its 0600 mode and owner check are
the credential. Standard library only.

``host_names`` are the ``Host`` headers the address actually bound answers to (the MCP
server's DNS-rebinding check): a page served from ``evil.example`` that resolves to
127.0.0.1 is refused.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

TOKEN_FILE = "token"
#: The header a client sends: ``Authorization: Bearer <token>``.
SCHEME = "Bearer"


def token_path(home: Path) -> Path:
    return Path(home) / TOKEN_FILE


def home_token(home: Path) -> tuple[str, bool]:
    """``(token, created)``: the home's token, made now (0600) when there is none.

    Created with ``O_EXCL`` so two servers starting at once agree on one token; a file that
    is not a regular file of this user, or is readable by others, is refused (a planted
    token would let its author in)."""
    path = token_path(home)
    Path(home).mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return _read(path), False
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(token + "\n")
    return token, True


def _read(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, encoding="ascii", errors="replace") as fh:
        st = os.fstat(fh.fileno())
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise PermissionError(
                f"{path} must belong to you and be readable by you alone (chmod 600); "
                "delete it to make a new token"
            )
        token = fh.read().strip()
    if len(token) < 16:
        raise PermissionError(f"{path} holds no usable token; delete it to make a new one")
    return token


def bearer_ok(header: str | bytes | None, token: str) -> bool:
    """True when an ``Authorization`` header carries ``token`` (constant-time compare)."""
    if header is None:
        return False
    text = header.decode("latin-1") if isinstance(header, bytes) else header
    scheme, _, value = text.strip().partition(" ")
    if scheme.lower() != SCHEME.lower():
        return False
    return hmac.compare_digest(value.strip().encode(), token.encode())


def host_names(host: str, port: int) -> frozenset[str]:
    """The ``Host`` header values that name the listener on ``host:port``."""
    names = {f"{host}:{port}"}
    if ":" in host:  # IPv6 literal
        names = {f"[{host}]:{port}"}
    if host in ("127.0.0.1", "localhost"):
        names |= {f"127.0.0.1:{port}", f"localhost:{port}"}
    if host in ("::1", "localhost"):
        names.add(f"[::1]:{port}")
    return frozenset(names)
