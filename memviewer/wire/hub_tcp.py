"""The hub's TCP listener (``serve --listen HOST:PORT``): where it listens and its TLS.

The same ``RpcServer`` serves it as the Unix socket, with the same bounds (connections,
bytes in flight); what differs is that every TCP connection must say ``hello`` with a
bearer token first (``wire.auth``) and is served on the loop only (no connection threads:
they read the raw socket, which under TLS holds ciphertext). TLS is required on every
address that is not loopback; on loopback plaintext needs ``--plaintext``.
"""

from __future__ import annotations

import ipaddress
import ssl
from dataclasses import dataclass

from memviewer.wire.hub_socket import HubError

TLS_HANDSHAKE_TIMEOUT_S = 10.0  # a client that opens a connection and never shakes hands is let go


@dataclass(frozen=True)
class Listen:
    """``HOST:PORT`` and the certificate it serves (``plaintext``: loopback only, no TLS)."""

    host: str
    port: int
    cert: str | None = None
    key: str | None = None
    plaintext: bool = False

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_listen(
    text: str, *, cert: str | None = None, key: str | None = None, plaintext: bool = False
) -> Listen:
    """Check ``HOST:PORT`` and its TLS files; raises ``HubError`` naming the problem."""
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise HubError(f"--listen {text!r} is not HOST:PORT (e.g. 0.0.0.0:7600)")
    spec = Listen(host, int(port_text), cert, key, plaintext)
    if plaintext:
        if not spec.loopback:
            raise HubError(
                f"--plaintext on {host}, which is not a loopback address: TLS is required there "
                "(give --tls-cert and --tls-key)"
            )
        if cert or key:
            raise HubError("--plaintext and --tls-cert/--tls-key exclude each other")
        return spec
    if not cert or not key:
        raise HubError(
            f"--listen {text} needs --tls-cert and --tls-key (TLS on every TCP listener; "
            "on loopback, --plaintext allows a test without TLS)"
        )
    return spec


def server_context(spec: Listen) -> ssl.SSLContext | None:
    """The listener's TLS context (None: plaintext on loopback). Raises ``HubError``."""
    if spec.plaintext:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(str(spec.cert), str(spec.key))
    except (OSError, ssl.SSLError) as exc:
        raise HubError(f"cannot load the TLS certificate {spec.cert} and key {spec.key}: {exc}") from None
    return ctx
