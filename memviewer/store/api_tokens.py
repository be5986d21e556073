"""The hub's bearer tokens (``tables.ApiToken``, migration 10): create, list, revoke, look up.

Only hashes are stored; ``memviewer.wire.auth`` makes secrets and checks them.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, insert, select, update

from memviewer.store.tables import ApiToken

TABLE = ApiToken.__table__


def create(conn: Connection) -> None:
    """Migration 10: the table."""
    TABLE.create(conn, checkfirst=True)


def add(conn: Connection, name: str, scope: str, secret_sha256: str, now: float) -> bool:
    """Store a new token; False when the name is taken (revoked names stay taken: the list
    keeps their history)."""
    if conn.execute(select(TABLE.c.name).where(TABLE.c.name == name)).first() is not None:
        return False
    conn.execute(insert(TABLE).values(name=name, scope=scope, secret_sha256=secret_sha256, created_at=now))
    return True


def get(conn: Connection, name: str) -> dict[str, Any] | None:
    """One token's row by its name (a primary-key read: the hub does it on every request)."""
    row = conn.execute(select(TABLE).where(TABLE.c.name == name)).mappings().first()
    return dict(row) if row is not None else None


def listing(conn: Connection) -> list[dict[str, Any]]:
    """Every token, oldest first, without its hash."""
    cols = [c for c in TABLE.c if c.name != "secret_sha256"]
    return [dict(r) for r in conn.execute(select(*cols).order_by(TABLE.c.created_at)).mappings()]


def revoke(conn: Connection, name: str, now: float) -> bool | None:
    """Mark the token revoked: True now, False already revoked, None no such token."""
    row = get(conn, name)
    if row is None:
        return None
    if row["revoked_at"] is not None:
        return False
    conn.execute(update(TABLE).where(TABLE.c.name == name).values(revoked_at=now))
    return True


def touch(conn: Connection, name: str, now: float) -> None:
    """Record a use (at ``hello``; not per request, which would make every read a write)."""
    conn.execute(update(TABLE).where(TABLE.c.name == name).values(last_used_at=now))
