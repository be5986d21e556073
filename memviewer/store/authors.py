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

The same pass learns the names the authors are *called* in a chat between two people
(``aliases``): the display name a chat stores (``metadata.speaker``) is often not the name the
other person writes ("Hey Kate!" to the author "Emi"), and a question about that person uses
the name from the text. A capitalised word the other author writes right after a greeting at
the start of a turn ("Hey Kate!", "Morning, Kate.") or after a comma at its end ("That's
great, Kate!"), at least ``ALIAS_MIN`` times and never in that position themselves, is a
name for the author addressed. Only scopes with exactly two authors get aliases: with more,
who is addressed is not known.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from typing import TYPE_CHECKING

from sqlalchemy import Connection, func, select

from memviewer.store.tables import Session, Turn

if TYPE_CHECKING:
    from memviewer.store.db import Store

S = Session.__table__
T = Turn.__table__

#: How many scopes the cache remembers (least recently used beyond this are forgotten).
MAX_SCOPES = 256
#: How often a word must address the other author before it names them.
ALIAS_MIN = 3
#: Characters of a turn's start and end the alias pass reads.
EDGE = 48
_GREETED = re.compile(
    r"^\W*(?i:hi|hey|hello|hiya|heya|yo|morning|good\s+(?:morning|afternoon|evening|night)"
    r"|thanks|thank\s+you|night|bye|congrats|congratulations|dear)"
    r"[\s,!.]+([A-Z][a-z]{2,})(?=\s*(?:[,!.?…]|$))"
)
_CALLED = re.compile(r",\s*([A-Z][a-z]{2,})\s*[!?.…]*\s*$")


def called(head: str, tail: str) -> list[str]:
    """The names a turn addresses someone by: after a greeting at its start (``head``, its
    first ``EDGE`` characters) or after a comma at its end (``tail``, its last ones)."""
    out = [m.group(1) for m in (_GREETED.search(head), _CALLED.search(tail)) if m]
    return list(dict.fromkeys(out))


def newest_turn(conn: Connection) -> int:
    """The highest turn number in the store (0 without turns)."""
    return int(conn.execute(select(func.max(T.c.num))).scalar() or 0)


def read_after(
    conn: Connection, scope: str | None, scope_id: str | None, after: int
) -> tuple[set[str], Counter[tuple[str, str]]]:
    """The distinct non-empty ``metadata.speaker`` strings of the scope's turns numbered above
    ``after`` (``scope`` / ``scope_id`` None: no filter on that column), and how often each of
    those authors wrote each name (``called``): ``(author, name)`` counts. One pass, reading only
    a turn's two ends."""
    speaker = func.json_extract(T.c.meta, "$.speaker")
    q = select(speaker, func.substr(T.c.content, 1, EDGE), func.substr(T.c.content, -EDGE)).where(
        T.c.num > after, T.c.meta.is_not(None), speaker.is_not(None)
    )
    if scope or scope_id:
        q = q.join(S, S.c.id == T.c.session_id)
        if scope:
            q = q.where(S.c.scope == scope)
        if scope_id:
            q = q.where(S.c.scope_id == scope_id)
    authors: set[str] = set()
    calls: Counter[tuple[str, str]] = Counter()
    for who, head, tail in conn.execute(q):
        if not isinstance(who, str) or not who.strip():
            continue
        authors.add(who.strip())
        for name in called(head or "", tail or ""):
            calls[(who.strip(), name)] += 1
    return authors, calls


def aliases_of(authors: frozenset[str], calls: Counter[tuple[str, str]]) -> dict[str, str]:
    """Lower-case name → the author it calls, for a scope of exactly two authors (see the
    module's docstring); a word of an author's own name is left out."""
    if len(authors) != 2:
        return {}
    own = {w.lower() for a in authors for w in re.findall(r"[^\W_\d]+", a)}
    a, b = sorted(authors)
    out: dict[str, str] = {}
    for writer, other in ((a, b), (b, a)):
        for (who, name), n in calls.items():
            key = name.lower()
            if who == writer and n >= ALIAS_MIN and key not in own and not calls.get((other, name)):
                out[key] = other
    return out


class _Known:
    """What the cache holds for one scope: the turn number read up to, its authors, the names
    they wrote (counts) and the aliases those make."""

    __slots__ = ("aliases", "calls", "names", "seen")

    def __init__(self) -> None:
        self.seen = 0
        self.names: frozenset[str] = frozenset()
        self.calls: Counter[tuple[str, str]] = Counter()
        self.aliases: dict[str, str] = {}  # aliases_of(names, calls), kept with them


class ScopeAuthors:
    """``of(scope, scope_id)``: the scope's authors; ``names(...)``: the authors and the names
    they are called by; both read incrementally (thread-safe)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._known: dict[tuple[str | None, str | None], _Known] = {}

    def of(self, scope: str | None, scope_id: str | None) -> frozenset[str]:
        return self._read(scope, scope_id).names

    def names(self, scope: str | None, scope_id: str | None) -> tuple[frozenset[str], dict[str, str]]:
        """The scope's authors and their aliases (lower-case name → author), in one read."""
        known = self._read(scope, scope_id)
        return known.names, dict(known.aliases)

    def _read(self, scope: str | None, scope_id: str | None) -> _Known:
        key = (scope or None, scope_id or None)
        with self._store.read() as conn:
            newest = newest_turn(conn)
            with self._lock:
                known = self._known.pop(key, None) or _Known()
            if newest > known.seen:  # a new object: a reader holding the old one sees no change
                fresh = _Known()
                authors, calls = read_after(conn, key[0], key[1], known.seen)
                fresh.names, fresh.calls = known.names | authors, known.calls + calls
                fresh.aliases = aliases_of(fresh.names, fresh.calls)
                fresh.seen = newest
                known = fresh
        with self._lock:
            self._known[key] = known
            while len(self._known) > MAX_SCOPES:
                self._known.pop(next(iter(self._known)))
        return known
