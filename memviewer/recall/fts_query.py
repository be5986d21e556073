"""Turn what a user types into FTS5 MATCH expressions that cannot fail.

Accepted syntax (also in ``memviewer search --help`` and ``docs/benchmarks.md``):

* plain words — each is optional; a session ranks higher the more of them it
  contains and the rarer they are (BM25). ``billing migration`` finds turns with
  either word, best first those with both; when the words are all meaningful
  (no stop words) the exact phrase is added as one more unit, so the turn that
  says "billing migration" verbatim ranks above one that has both words apart;
* ``"quoted phrase"`` (also “…”, 「…」) — the words in this order;
* Chinese / Japanese / Thai … text — a run without spaces is matched as an exact
  substring (case-insensitive); separate words with spaces to make each one
  optional (``数据 迁移``). One- and two-character runs work too.

Nothing else is syntax: FTS5 operators (``AND``, ``OR``, ``NOT``, ``NEAR``),
``*``, ``-``, ``^``, parentheses and stray quotes are treated as plain text or
ignored, because every unit is handed to FTS5 as a quoted string. The only
error is a query with nothing searchable in it (``***``), or one too long.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from memviewer import params
from memviewer.errors import INVALID_ARGUMENT, MemviewerError
from memviewer.store.fts import NO_SPACE_CLASS

MAX_QUERY_CHARS = params.MAX_QUERY_CHARS
MAX_UNITS = 32
MAX_PHRASE_WORDS = 6

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves""".split()
)
OPERATORS = frozenset({"AND", "OR", "NOT", "NEAR"})

_NO_SPACE_RUN = re.compile(f"[{NO_SPACE_CLASS}]+")
_QUOTED = re.compile(r'"([^"]*)"?|“([^”]*)”?|「([^」]*)」?')
_SPLIT = re.compile(r"[\s()\[\]{}<>,;|]+")
_LEAD = "+-*^~!?.:;'`#@$%&=/\\"
_TRAIL = "*.,:;!?'`)"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(frozen=True)
class Unit:
    """One thing to match: a word or phrase (word index) or a no-space-script run (trigram index)."""

    text: str
    kind: str  # "word" | "cjk"
    quoted: bool = False


def flatten(low: str) -> str:
    """Lowered text with punctuation as single spaces: what a probe made of words is matched in."""
    return " ".join(_NON_WORD.sub(" ", low).split())


def probe_hits(probes: Iterable[tuple[str, bool]], low: str, flat: str | None = None) -> int:
    """How many ``(probe, needs_flat)`` pairs occur in the lowered text ``low`` (``flat``: its
    ``flatten``, computed here once if a probe needs it and not given)."""
    hits = 0
    for probe, needs_flat in probes:
        if needs_flat:
            if flat is None:
                flat = flatten(low)
            hits += probe in flat
        else:
            hits += probe in low
    return hits


@dataclass
class ParsedQuery:
    text: str
    units: list[Unit]
    phrase: str | None = None  # whole-query phrase bonus for the word index
    needles: list[str] = field(default_factory=list)  # snippet centres, best first
    _probes: list[tuple[str, bool]] | None = field(default=None, repr=False)

    def coverage(self, content: str) -> float:
        """Share of the units a turn contains (Lucene's "coord" factor), checked on text.

        BM25 alone lets one rare word outweigh a turn holding every word of the
        query; scaling each turn's BM25 by this share keeps "all words, in full"
        on top (the reference store's +1 per word, +2 for the whole query, says
        the same). Word units are matched by a stem-like prefix, as the index
        stems ("migration" covers "migrated"); punctuation is ignored.
        """
        if len(self.units) < 2:
            return 1.0
        return max(probe_hits(self.probes, content.lower()), 1) / len(self.units)

    @property
    def probes(self) -> list[tuple[str, bool]]:
        if self._probes is None:
            self._probes = [_probe(u) for u in self.units]
        return self._probes

    @property
    def word_units(self) -> list[Unit]:
        return [u for u in self.units if u.kind == "word"]

    @property
    def cjk_units(self) -> list[Unit]:
        return [u for u in self.units if u.kind == "cjk"]


_NON_WORD = re.compile(r"[^\w]+")


def _probe(u: Unit) -> tuple[str, bool]:
    """(lower-case needle, compare on punctuation-free text?) for ``ParsedQuery.coverage``."""
    low = u.text.lower()
    if u.kind == "cjk":
        return low, False
    if _NON_WORD.search(low):
        return " ".join(_NON_WORD.sub(" ", low).split()), True
    return (low[: max(4, len(low) - 3)] if len(low) >= 6 else low), False


def fts_string(text: str) -> str:
    """An FTS5 string literal: the tokenizer sees plain text, never syntax."""
    return '"' + text.replace('"', '""') + '"'


def _has_no_space_script(text: str) -> bool:
    return _NO_SPACE_RUN.search(text) is not None


def _words(text: str) -> list[str]:
    out = []
    for piece in _SPLIT.split(text):
        piece = piece.lstrip(_LEAD).rstrip(_TRAIL)
        if piece in OPERATORS or not any(c.isalnum() for c in piece):
            continue
        out.append(piece)
    return out


def parse(query: str) -> ParsedQuery:
    """Split a query into units; ``MemviewerError(invalid_argument)`` when nothing is searchable."""
    params.check_query_length(query)
    text = " ".join(_CONTROL.sub(" ", query).split())
    units: list[Unit] = []
    plain_words: list[str] = []

    def add_plain(segment: str) -> None:
        pos = 0
        for m in _NO_SPACE_RUN.finditer(segment):
            for w in _words(segment[pos : m.start()]):
                plain_words.append(w)
                units.append(Unit(w, "word"))
            units.append(Unit(m.group(), "cjk"))
            pos = m.end()
        for w in _words(segment[pos:]):
            plain_words.append(w)
            units.append(Unit(w, "word"))

    pos = 0
    for m in _QUOTED.finditer(text):
        add_plain(text[pos : m.start()])
        inner = " ".join((m.group(1) or m.group(2) or m.group(3) or "").split())
        if inner and _has_no_space_script(inner):
            units.append(Unit(inner, "cjk", quoted=True))
        elif inner and any(c.isalnum() for c in inner):
            units.append(Unit(inner, "word", quoted=True))
        pos = m.end()
    add_plain(text[pos:])

    if not units:
        raise MemviewerError(
            INVALID_ARGUMENT,
            f"nothing to search for in {query!r}",
            hint='type words or a "quoted phrase"; operators and punctuation alone match nothing',
        )
    # Stop words cost a lot (they are in most turns) and rank nothing; keep them
    # only when the query has nothing else.
    meaningful = [u for u in units if u.quoted or u.kind != "word" or u.text.lower() not in STOPWORDS]
    pruned = len(meaningful) != len(units)
    if meaningful:
        units = meaningful
    seen: set[tuple[str, str]] = set()
    unique: list[Unit] = []
    for u in units:
        key = (u.kind, u.text.lower())
        if key not in seen:
            seen.add(key)
            unique.append(u)
    units = unique[:MAX_UNITS]

    plain = [u.text for u in units if u.kind == "word" and not u.quoted]
    phrase = None
    if not pruned and 2 <= len(plain) <= MAX_PHRASE_WORDS and len(plain) == len(plain_words):
        phrase = " ".join(plain)
    return ParsedQuery(text=text, units=units, phrase=phrase, needles=_needles(text, units, phrase))


def _needles(text: str, units: list[Unit], phrase: str | None) -> list[str]:
    """What to centre a snippet on: the whole query, phrases, words, then word stems."""
    out: list[str] = []
    if len(units) > 1:
        out.append(text.strip('"“”「」'))
    if phrase:
        out.append(phrase)
    out += [u.text for u in units if u.quoted or u.kind == "cjk"]
    words = sorted((u.text for u in units if u.kind == "word" and not u.quoted), key=len, reverse=True)
    out += words
    # Porter stemming matches "migrate" for "migration": fall back to a stem-ish prefix.
    out += [w[: max(4, len(w) - 3)] for w in words if len(w) >= 6]
    seen: set[str] = set()
    unique: list[str] = []
    for n in out:
        if n and n.lower() not in seen:
            seen.add(n.lower())
            unique.append(n)
    return unique


def word_match(pq: ParsedQuery) -> str | None:
    """The MATCH expression for the word index: every unit OR-ed, plus the phrase bonus."""
    parts = [fts_string(u.text) for u in pq.word_units]
    if pq.phrase:
        parts.append(fts_string(pq.phrase))
    return " OR ".join(parts) if parts else None
