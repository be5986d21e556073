"""A hub over TCP: its address, its bearer token and a verified TLS connection to it.

Standard library only (``ssl``, ``socket``): the publisher uses it. ``MEMVIEWER_HUB`` names
the hub (``tls://host:port``; ``tcp://host:port`` is plaintext, for a loopback hub started
with ``--plaintext``), ``MEMVIEWER_TOKEN`` or ``MEMVIEWER_TOKEN_FILE`` the token and
``MEMVIEWER_TLS_CA`` a private CA's certificate. The certificate and the host name are
always verified; each way that fails gets its own ``HubAccessError`` code, so a caller
prints one clear line instead of an OpenSSL trace.
"""

from __future__ import annotations

import os
import socket
import ssl
from dataclasses import dataclass

SCHEMES = ("tls://", "tcp://")

# X509 verify results (OpenSSL's X509_V_ERR_*) that get a code of their own.
_EXPIRED = 10
_HOSTNAME = (62, 64)  # host name, IP address mismatch
_UNKNOWN_CA = (2, 18, 19, 20, 21)


class HubAccessError(OSError):
    """The hub at a TCP address cannot be used as given (TLS, certificate, token): not a
    hub that is down, so nobody retries it blindly. ``code``: the docs/cli.md error code."""

    def __init__(self, code: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint


@dataclass(frozen=True)
class HubAddress:
    """Where a remote hub listens and how to reach it (``url``: as the user wrote it)."""

    url: str
    host: str
    port: int
    tls: bool
    token: str | None = None
    ca_file: str | None = None

    def __str__(self) -> str:
        return self.url


def is_hub_url(value: object) -> bool:
    return isinstance(value, str) and value.startswith(SCHEMES)


def parse_hub(
    url: str, *, token: str | None = None, token_file: str | None = None, ca_file: str | None = None
) -> HubAddress:
    """``tls://host:port`` (or ``tcp://``) with the token and CA given, else from the
    environment. Raises ``HubAccessError`` (``invalid_argument``) for a malformed address
    or an unreadable token file."""
    if not is_hub_url(url):
        raise HubAccessError(
            "invalid_argument", f"hub address {url!r} is not tls://HOST:PORT or tcp://HOST:PORT"
        )
    rest = url.split("://", 1)[1].rstrip("/")
    host, sep, port_text = rest.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise HubAccessError(
            "invalid_argument", f"hub address {url!r} needs a host and a port (tls://HOST:PORT)"
        )
    token = token or os.environ.get("MEMVIEWER_TOKEN") or None
    token_file = token_file or os.environ.get("MEMVIEWER_TOKEN_FILE") or None
    if token is None and token_file:
        try:
            with open(os.path.expanduser(token_file), encoding="utf-8") as fh:
                token = fh.read().strip() or None
        except OSError as exc:
            raise HubAccessError(
                "invalid_argument", f"cannot read the token file {token_file}: {exc.strerror or exc}"
            ) from None
    ca_file = ca_file or os.environ.get("MEMVIEWER_TLS_CA") or None
    return HubAddress(url, host, int(port_text), url.startswith("tls://"), token, ca_file)


def hub_from_env() -> HubAddress | None:
    """``MEMVIEWER_HUB`` as an address, or None when it is not set."""
    url = os.environ.get("MEMVIEWER_HUB")
    return parse_hub(url) if url else None


def client_context(ca_file: str | None) -> ssl.SSLContext:
    """Verify the hub's certificate (system CAs, or ``ca_file``) and its host name."""
    try:
        ctx = ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()
    except (OSError, ssl.SSLError) as exc:
        raise HubAccessError("invalid_argument", f"cannot read the CA certificate {ca_file}: {exc}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def connect(addr: HubAddress, timeout: float | None) -> socket.socket:
    """A connected socket to the hub (TLS handshake done). Raises ``HubAccessError`` for a
    certificate or TLS problem, ``OSError`` when nothing listens."""
    raw = socket.create_connection((addr.host, addr.port), timeout=timeout)
    if not addr.tls:
        return raw
    try:
        return client_context(addr.ca_file).wrap_socket(raw, server_hostname=addr.host)
    except ssl.SSLError as exc:
        raw.close()
        raise handshake_error(addr, exc) from None
    except BaseException:
        raw.close()
        raise


def handshake_error(addr: HubAddress, exc: ssl.SSLError) -> HubAccessError:
    """What a failed TLS handshake with ``addr`` means, as one ``HubAccessError`` (the
    blocking ``connect`` and the subscriber's asyncio connection both ask)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return verify_error(addr, exc)
    return HubAccessError(
        "tls_failed",
        f"TLS with the hub at {addr.url} failed: {exc.reason or exc}",
        "is it a TLS port? a hub started with --plaintext is reached as tcp://",
    )


def verify_error(addr: HubAddress, exc: ssl.SSLCertVerificationError) -> HubAccessError:
    code = exc.verify_code
    where = f"the hub at {addr.url}"
    if code == _EXPIRED:
        return HubAccessError(
            "tls_expired", f"{where} presented an expired certificate", "renew the hub's certificate"
        )
    if code in _HOSTNAME:
        return HubAccessError(
            "tls_hostname",
            f"{where} presented a certificate that is not for {addr.host}",
            "use the host name the certificate names, or a certificate for this one",
        )
    if code in _UNKNOWN_CA:
        return HubAccessError(
            "tls_unknown_ca",
            f"{where} presented a certificate from an unknown CA",
            "point --tls-ca / MEMVIEWER_TLS_CA at the CA certificate that signed it",
        )
    return HubAccessError("tls_failed", f"{where}: certificate not accepted ({exc.verify_message})")


def plaintext_problem(addr: HubAddress, first: bytes) -> HubAccessError | None:
    """A plaintext client's first bytes from a TLS port are a TLS alert (or nothing)."""
    if addr.tls or (first and not first.startswith(b"\x15\x03")):
        return None
    return HubAccessError(
        "tls_required",
        f"the hub at {addr.url} did not answer plaintext: it speaks TLS",
        f"use tls://{addr.host}:{addr.port}",
    )
