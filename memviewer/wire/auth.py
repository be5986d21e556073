"""Bearer tokens of the hub's TCP listener: made here, stored hashed (``store.api_tokens``).

A token reads ``mvt.<name>.<secret>``: the name is the row's primary key, the secret 32
random bytes; the store keeps ``sha256(token)`` only and a presented token is compared with
``hmac.compare_digest``. The hub checks the token at ``hello`` and again at every request
(``TokenGate.recheck``: a primary-key read, no cache), so a token revoked by any process
sharing the store is refused at the next request, on every hub.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from typing import Any

from memviewer.store import api_tokens
from memviewer.store.db import Store
from memviewer.wire import protocol
from memviewer.wire.protocol import RpcError

PREFIX = "mvt"
NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
READ_METHODS = frozenset(
    {
        protocol.HELLO,
        protocol.SESSIONS,
        protocol.SESSION,
        protocol.SEARCH,
        protocol.RECALL,
        protocol.EVENTS,
        protocol.STATS,
        protocol.SUBSCRIBE,
        protocol.UNSUBSCRIBE,
    }
)
SCOPES: dict[str, frozenset[str] | None] = {  # None: every method
    "publish": frozenset({protocol.HELLO, protocol.PUBLISH}),
    "read": READ_METHODS,
    "admin": None,
}


def check_name(name: str) -> None:
    """Names are keys and part of the token: letters, digits, ``_`` and ``-``, up to 64."""
    if not NAME_RE.fullmatch(name):
        raise ValueError(f"token name {name!r} must be 1-64 letters, digits, '_' or '-'")


def new_token(name: str) -> tuple[str, str]:
    """A fresh token for ``name`` and the hash to store."""
    check_name(name)
    token = f"{PREFIX}.{name}.{secrets.token_urlsafe(32)}"
    return token, digest(token)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def name_of(token: str) -> str | None:
    parts = token.split(".", 2)
    if len(parts) != 3 or parts[0] != PREFIX or not NAME_RE.fullmatch(parts[1]):
        return None
    return parts[1]


def allowed(scope: str, method: str) -> bool:
    methods = SCOPES.get(scope, frozenset())
    return methods is None or method in methods


def _refuse(code: str, message: str, hint: str) -> RpcError:
    return protocol.app_error(code, message, {"hint": hint})


def _revoked(name: str) -> RpcError:
    return _refuse(
        "token_revoked", f"the token {name!r} was revoked", "ask for a new token (memviewer token create)"
    )


class TokenGate:
    """The hub's checks of a TCP connection's token (loop thread; reads are primary-key reads)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _row(self, name: str) -> dict[str, Any] | None:
        with self.store.read() as conn:
            return api_tokens.get(conn, name)

    def check(self, token: Any) -> tuple[str, str]:
        """``(name, scope)`` of a valid token presented at ``hello``; raises ``RpcError``."""
        if not isinstance(token, str) or not token:
            raise _refuse(
                "token_missing",
                "this hub requires a token on TCP connections",
                "set MEMVIEWER_TOKEN or MEMVIEWER_TOKEN_FILE (memviewer token create NAME)",
            )
        name = name_of(token)
        row = self._row(name) if name is not None else None
        if row is None or not hmac.compare_digest(row["secret_sha256"], digest(token)):
            raise _refuse(
                "token_invalid",
                "the hub does not know this token",
                "check MEMVIEWER_TOKEN; tokens are shown once at `memviewer token create`",
            )
        if row["revoked_at"] is not None:
            raise _revoked(str(name))
        return str(row["name"]), str(row["scope"])

    def revoked(self, name: str) -> bool:
        """Whether ``name`` no longer stands (revoked, or removed from the store)."""
        row = self._row(name)
        return row is None or row["revoked_at"] is not None

    def recheck(self, name: str, method: str) -> None:
        """Before each request after ``hello``: the token still stands and covers ``method``."""
        row = self._row(name)
        if row is None or row["revoked_at"] is not None:
            raise _revoked(name)
        scope = str(row["scope"])
        if not allowed(scope, method):
            raise _refuse(
                "token_scope",
                f"the token {name!r} (scope {scope}) does not allow {method!r}",
                "use a token with a wider scope (publish, read or admin)",
            )


def create_token(store: Store, name: str, scope: str) -> dict[str, Any]:
    """Make and store a token; the answer holds its secret (shown once). Raises ValueError."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    token, hashed = new_token(name)
    now = time.time()
    with store.write() as tx:
        if not api_tokens.add(tx.conn, name, scope, hashed, now):
            raise ValueError(f"a token named {name!r} exists already (revoked names stay taken)")
    return {"name": name, "scope": scope, "created_at": now, "token": token}


def list_tokens(store: Store) -> list[dict[str, Any]]:
    """Every token's name, scope and times (never its secret or hash)."""
    with store.read() as conn:
        return api_tokens.listing(conn)


def revoke_token(store: Store, name: str) -> bool | None:
    """Revoke ``name``: True if revoked now, False if it was already, None if there is none."""
    with store.write() as tx:
        return api_tokens.revoke(tx.conn, name, time.time())
