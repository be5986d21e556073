"""The authors (``metadata.speaker``) of a scope's turns, kept per scope and brought up to date
from the newest turns only.

Recall takes a chat's own names out of the text its retrievers search
(``memviewer.recall.names.without_names``) and must know those names before it searches.
Reading them from every turn of the scope on each recall would cost a scan of the scope
(tens of milliseconds at 100k turns); turns are append-mostly, so this cache remembers the
highest turn number it has read per scope and on the next call reads only turns numbered
above it (one ``max(num)`` lookup when nothing was added). A deleted turn's author stays
known until the process restarts: the cost is a name taken out of a query that no longer
needed it, never a name missed.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from sqlalchemy import Connection, func, select

from memviewer.store.tables import Session, Turn

if TYPE_CHECKING:
    from memviewer.store.db import Store

S = Session.__table__
T = Turn.__table__

#: How many scopes the cache remembers (least recently used beyond this are forgotten).
MAX_SCOPES = 256


def newest_turn(conn: Connection) -> int:
    """The highest turn number in the store (0 without turns)."""
    return int(conn.execute(select(func.max(T.c.num))).scalar() or 0)


def authors_after(conn: Connection, scope: str | None, scope_id: str | None, after: int) -> set[str]:
    """The distinct non-empty ``metadata.speaker`` strings of the scope's turns numbered above
    ``after`` (``scope`` / ``scope_id`` None: no filter on that column)."""
    speaker = func.json_extract(T.c.meta, "$.speaker")
    q = select(speaker).distinct().where(T.c.num > after, T.c.meta.is_not(None), speaker.is_not(None))
    if scope or scope_id:
        q = q.join(S, S.c.id == T.c.session_id)
        if scope:
            q = q.where(S.c.scope == scope)
        if scope_id:
            q = q.where(S.c.scope_id == scope_id)
    return {v.strip() for (v,) in conn.execute(q) if isinstance(v, str) and v.strip()}


class ScopeAuthors:
    """``of(scope, scope_id)``: the scope's authors, read incrementally (thread-safe)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._known: dict[tuple[str | None, str | None], tuple[int, frozenset[str]]] = {}

    def of(self, scope: str | None, scope_id: str | None) -> frozenset[str]:
        key = (scope or None, scope_id or None)
        with self._store.read() as conn:
            newest = newest_turn(conn)
            with self._lock:
                seen, names = self._known.pop(key, (0, frozenset()))
            if newest > seen:
                names = names | authors_after(conn, key[0], key[1], seen)
        with self._lock:
            self._known[key] = (max(seen, newest), names)
            while len(self._known) > MAX_SCOPES:
                self._known.pop(next(iter(self._known)))
        return names
