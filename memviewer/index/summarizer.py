"""One summary per session: what Stage 1 of hierarchical recall ranks sessions by.

The default is extractive and needs no LLM: the most informative sentence of
each of the first user turns (``informative_sentence``: first person, content
words, no filler opener), its salient terms (words that are frequent in this
session but not stop words), names and dates. Picking that sentence instead of
each turn's first one raised Stage 1 on the LongMemEval dev set (any@5 0.97 →
0.98, all@5 0.88 → 0.89, turn recall@10 0.898 → 0.907, gains on both halves;
docs/benchmarks.md). It is cheap enough to recompute whenever a
session grows. Two texts come out of it:

* ``summary`` — the readable summary shown in the explain trace and embedded
  for Stage 1's dense similarity (the embedder only reads its first ~256
  tokens, so it leads with the user's requests);
* ``search_text`` — what Stage 1's BM25 index covers: the summary plus every
  user turn and the salient terms of the other turns, so a rare name or date
  mentioned once still finds its session.

Optionally (``summary_llm``), an OpenAI-compatible endpoint writes the readable
summary. Replies are cached on disk under ``cache_dir(home)/summaries`` keyed
by ``sha256(model, template version, text)``: a cached summary costs no call,
and an empty session makes no call at all. Any LLM failure falls back to the
extractive summary (the error is logged and recorded in ``method``).

Refresh rule (used by the indexer): a session is re-summarised when it has no
summary yet, when it was closed or re-imported, or when its turn count moved by
at least ``REFRESH_MIN_TURNS`` or ``REFRESH_FRACTION`` of the count it was
summarised at, whichever is larger. An unchanged input (same ``source_hash``)
is never re-embedded, so re-indexing a session is idempotent. When
``EXTRACTIVE_VERSION`` changes, the indexer refreshes every session once (the
version is part of the source hash and is recorded in the index state).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memviewer.store import speakers

log = logging.getLogger("memviewer.index")

TEMPLATE_VERSION = "session-summary-v1"
EXTRACTIVE_VERSION = "extractive-v3"  # v2: the informative sentence of each user turn; v3: chat windows
REFRESH_MIN_TURNS = 8
REFRESH_FRACTION = 0.25
SUMMARY_CHARS = 900
SEARCH_TEXT_CHARS = 60_000
LLM_INPUT_CHARS = 12_000
REQUEST_CHARS = 160
MAX_REQUESTS = 6
MAX_TERMS = 24

SYSTEM_PROMPT = (
    "You summarise one conversation between a user and an AI assistant so that it can be found "
    "again later. Write at most 120 words of plain text. Keep every name, place, product, number "
    "and date that the user mentioned, the user's requests, facts the user stated about "
    "themselves, and decisions or answers given. No preamble."
)

STOP_WORDS = frozenset(
    """a about above after again against all also am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does doesn't
    doing don't down during each few for from further get got had hadn't has hasn't have haven't having
    he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if
    in into is isn't it it's its itself just let's like me more most mustn't my myself no nor not of
    off on once only or other ought our ours ourselves out over own same shan't she she'd she'll
    she's should shouldn't so some such than that that's the their theirs them themselves then there
    there's these they they'd they'll they're they've this those through to too under until up
    very was wasn't we we'd we'll we're we've were weren't what what's when when's where where's which
    while who who's whom why why's will with won't would wouldn't you you'd you'll you're you've your
    yours yourself yourselves also one two may might must shall would really much many well
    thing things something anything way make made want know think sure yes okay ok thanks thank please
    help need use using used can could etc e.g i.e new good great lot lots kind sort""".split()
)

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
_CAPITALISED = re.compile(r"\b([A-Z][a-zA-Z0-9&'’-]+(?:\s+[A-Z][a-zA-Z0-9&'’-]+)*)")
_DATE = re.compile(
    r"\b(?:\d{4}[-/]\d{1,2}[-/]\d{1,2}|\d{1,2}[-/]\d{1,2}[-/]\d{2,4}|"
    r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?"
    r"(?:,?\s+\d{4})?|\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|"
    r"oct|nov|dec)[a-z]*(?:\s+\d{4})?)\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")
# "Dr. Patel", "e.g. this": a full stop after these is not a sentence end.
_ABBREVIATIONS = frozenset("dr mr mrs ms prof st jr sr vs etc e.g i.e approx fig mt ft".split())
# wider than scoring's first person: "we" sentences state facts about the user too
_PERSONAL = frozenset("i i'm i've i'd i'll my me mine myself we we're we've our us".split())
_FILLER_START = re.compile(
    r"^(?:thanks|thank you|that's|that is|great|ok|okay|sounds|awesome|perfect|wow|cool|got it|"
    r"yes|no|sure|hi|hello|hey|alright)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class SessionSummary:
    summary: str
    search_text: str
    method: str  # "extractive" | "llm:<model>" | "extractive (llm failed: …)"
    source_hash: str
    turn_count: int
    #: A chat's windows of consecutive turns (``chat_windows``), embedded for Stage 1; none
    #: for an agent session.
    windows: tuple[str, ...] = ()


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def sentences(text: str) -> list[str]:
    """Sentences of ``text``; a full stop after a known abbreviation does not end one."""
    flat = " ".join(text.split())
    out: list[str] = []
    for piece in _SENTENCE_END.split(flat):
        prev = out[-1] if out else ""
        last = prev.rsplit(" ", 1)[-1].rstrip(".").lower() if prev.endswith(".") else ""
        if prev and last in _ABBREVIATIONS:
            out[-1] = f"{prev} {piece}"
        else:
            out.append(piece)
    return [x for x in out if x]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def informative_sentence(text: str, limit: int = REQUEST_CHARS) -> str:
    """The sentence of a user turn that says most about the user.

    A user turn often opens with filler ("That's really helpful, thanks!") and
    states its fact later ("I just got diagnosed by Dr. Patel"): sentences in
    the first person with more content words win; filler openers lose.
    """
    best, best_score = "", float("-inf")
    for i, sent in enumerate(sentences(text)[:12]):
        ws = words(sent)
        content = sum(1 for w in ws if len(w) > 2 and w not in STOP_WORDS)
        score: float = min(content, 12) + (4 if any(w in _PERSONAL for w in ws) else 0)
        if _FILLER_START.match(sent) and content < 6:
            score -= 8
        score -= 0.5 * i  # earlier wins ties: the opening usually states the request
        if score > best_score:
            best, best_score = sent, score
    return _clip(best, limit)


def salient_terms(texts: Sequence[str], k: int = MAX_TERMS) -> list[str]:
    """Frequent content words of the session, longest-first on ties (rarer words are longer)."""
    counts: Counter[str] = Counter()
    for text in texts:
        for w in words(text):
            if len(w) > 2 and w not in STOP_WORDS and not w.isdigit():
                counts[w] += 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], -len(kv[0]), kv[0]))
    return [w for w, _ in ranked[:k]]


def entities(texts: Sequence[str], k: int = 16) -> list[str]:
    """Capitalised phrases that do not just start a sentence, plus dates."""
    seen: dict[str, None] = {}
    for text in texts:
        for m in _DATE.finditer(text):
            seen.setdefault(m.group(0), None)
        for m in _CAPITALISED.finditer(text):
            phrase = m.group(1)
            start = m.start(1)
            before = text[max(0, start - 2) : start]
            at_sentence_start = start == 0 or before.strip() in ("", ".", "!", "?") or before.endswith("\n")
            if at_sentence_start and " " not in phrase:
                continue
            if phrase.lower() in STOP_WORDS:
                continue
            seen.setdefault(phrase, None)
        if len(seen) >= k * 3:
            break
    return list(seen)[:k]


def _source_hash(turns: Sequence[dict[str, Any]], salt: str = "") -> str:
    h = hashlib.sha256(f"{EXTRACTIVE_VERSION}\x00{salt}\x02".encode())
    for t in turns:
        h.update(f"{t['role']}\x00{t['content']}\x01".encode())
        if (who := _author(t)) is not None:  # only turns naming their author: old hashes hold
            h.update(f"@{who}\x03".encode())
    return h.hexdigest()


def _day(ts: float | None) -> str | None:
    if ts is None:
        return None
    from memviewer.timeutil import to_datetime

    return None if (dt := to_datetime(ts)) is None else dt.strftime("%Y-%m-%d")  # a bad stored time


def _author(t: dict[str, Any]) -> str | None:
    return speakers.author_of(t.get("meta"))


def _names_authors(authors: Sequence[str | None]) -> bool:
    """A chat between named people (``speakers.is_chat``) by the session's turns' authors."""
    return speakers.is_chat(sum(1 for a in authors if a), len(authors))


MAX_PEOPLE_SENTENCES = 10


def conversation_extractive(real: Sequence[dict[str, Any]], authors: Sequence[str | None]) -> tuple[str, str]:
    """``(summary, search_text)`` of a chat between named people (turns carrying
    ``metadata.speaker``): both sides say things worth finding, and a day-long chat opens with
    greetings, so the summary takes the most informative sentences of the whole session, each
    under its author's name, and the search text covers every turn."""
    scored: list[tuple[float, int, str]] = []
    for i, (t, who) in enumerate(zip(real, authors, strict=True)):
        text = str(t["content"])
        if not text.strip():
            continue
        sent = informative_sentence(text)
        ws = words(sent)
        content = sum(1 for w in ws if len(w) > 2 and w not in STOP_WORDS)
        if content < 3 or (_FILLER_START.match(sent) and content < 6):
            continue
        scored.append((min(content, 12) + (3 if any(w in _PERSONAL for w in ws) else 0), i, f"{who}: {sent}"))
    top = sorted(sorted(scored, key=lambda x: (-x[0], x[1]))[:MAX_PEOPLE_SENTENCES], key=lambda x: x[1])
    texts = [str(t["content"]) for t in real if str(t["content"]).strip()]
    people = sorted({a for a in authors if a})
    terms = salient_terms(texts)
    names = entities(texts)
    days = sorted({d for t in real if (d := _day(t.get("timestamp")))})
    parts = []
    if people:
        parts.append("Between " + " and ".join(people))
    if top:
        parts.append(" | ".join(x[2] for x in top))
    if names:
        parts.append("Mentions: " + ", ".join(names))
    if terms:
        parts.append("Topics: " + ", ".join(terms))
    if days:
        parts.append("Dates: " + (days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"))
    summary = " ".join(p if p.endswith((".", "!", "?", "…")) else p + "." for p in parts)
    if len(summary) > SUMMARY_CHARS:
        summary = summary[: SUMMARY_CHARS - 1].rstrip() + "…"
    search = "\n".join(x for x in (summary, *texts) if x)
    return summary, search[:SEARCH_TEXT_CHARS]


#: A chat's windows: this many consecutive turns each, a new one every ``WINDOW_STEP`` turns
#: (windows overlap, so an exchange is never cut in two). Five short messages fit the
#: embedder's 256 tokens; 5 / 3 ranked REALTALK's tune-half sessions best of 3 / 1, 5 / 3,
#: 8 / 4 and 12 / 6 (docs/benchmarks.md).
WINDOW_TURNS = 5
WINDOW_STEP = 3
WINDOW_TURN_CHARS = 600  # of one turn in a window: the embedder reads ~256 tokens of the whole


def chat_windows(turns: Sequence[dict[str, Any]]) -> list[str]:
    """The texts of a chat's overlapping windows of consecutive turns, each line "author:
    text"; empty for an agent session. A day of chat covers many topics, which one summary
    vector cannot hold and one short message rarely states whole; a few turns together
    usually do (Stage 1 of hierarchical recall scores a session by its best window too)."""
    real = [t for t in turns if not t.get("is_compaction_summary")]
    authors = [_author(t) for t in real]
    if not _names_authors(authors):
        return []
    lines = [
        f"{who or t['role']}: {str(t['content'])[:WINDOW_TURN_CHARS]}"
        for t, who in zip(real, authors, strict=True)
        if str(t["content"]).strip()
    ]
    starts = range(0, max(1, len(lines) - WINDOW_TURNS + WINDOW_STEP), WINDOW_STEP)
    return ["\n".join(lines[a : a + WINDOW_TURNS]) for a in starts if lines[a : a + WINDOW_TURNS]]


def window_hash(text: str) -> str:
    """The key of what a window's vector was embedded from: an unchanged window (same text)
    keeps its vector when its session is summarised again."""
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def extractive(turns: Sequence[dict[str, Any]], title: str = "") -> tuple[str, str]:
    """``(summary, search_text)`` from the session's turns, no model needed.

    Sessions whose turns name their authors (``metadata.speaker``, a chat between people) are
    summarised by ``conversation_extractive``; agent sessions (user and assistant) as below.
    """
    real = [t for t in turns if not t.get("is_compaction_summary")]
    authors = [_author(t) for t in real]
    if _names_authors(authors):
        return conversation_extractive(real, authors)
    user = [str(t["content"]) for t in real if t["role"] == "user" and str(t["content"]).strip()]
    other = [str(t["content"]) for t in real if t["role"] != "user" and str(t["content"]).strip()]
    requests: list[str] = []
    for text in user:
        s = informative_sentence(text)
        if s and s not in requests:
            requests.append(s)
        if len(requests) >= MAX_REQUESTS:
            break
    terms = salient_terms(user + other)
    names = entities(user + other)
    days = sorted({d for t in real if (d := _day(t.get("timestamp")))})
    parts = []
    if requests:
        parts.append("User: " + " | ".join(requests))
    if names:
        parts.append("Mentions: " + ", ".join(names))
    if terms:
        parts.append("Topics: " + ", ".join(terms))
    if days:
        parts.append("Dates: " + (days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"))
    if not parts:
        return title, title
    summary = " ".join(p if p.endswith((".", "!", "?", "…")) else p + "." for p in parts)
    if len(summary) > SUMMARY_CHARS:
        summary = summary[: SUMMARY_CHARS - 1].rstrip() + "…"
    other_terms = salient_terms(other, k=MAX_TERMS * 2)
    search = "\n".join(x for x in (summary, *user, " ".join(other_terms)) if x)
    return summary, search[:SEARCH_TEXT_CHARS]


def transcript(turns: Sequence[dict[str, Any]], limit: int = LLM_INPUT_CHARS) -> str:
    lines = [
        f"{t['role']}: {' '.join(str(t['content']).split())}"
        for t in turns
        if str(t["content"]).strip() and not t.get("is_compaction_summary")
    ]
    text = "\n".join(lines)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class SummaryCache:
    """LLM summaries on disk, one small JSON file per key (safe to share between processes)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    @staticmethod
    def key(model: str, text: str, template: str = TEMPLATE_VERSION) -> str:
        return hashlib.sha256(json.dumps([model, template, text]).encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> str | None:
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError, OSError):
            return None
        value = data.get("summary")
        return value if isinstance(value, str) else None

    def put(self, key: str, summary: str, model: str) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps({"summary": summary, "model": model, "template": TEMPLATE_VERSION}), encoding="utf-8"
        )
        tmp.replace(path)


class Summarizer:
    """Extractive by default; an LLM endpoint (with the disk cache) when configured."""

    def __init__(self, endpoint: Any = None, cache_dir: str | Path | None = None) -> None:
        self.endpoint = endpoint
        self.cache = SummaryCache(cache_dir) if cache_dir is not None else None
        self.llm_calls = 0
        self.cache_hits = 0

    def llm_summary(self, text: str) -> str | None:
        """The endpoint's summary of ``text``: from the cache when present; None for empty text."""
        if self.endpoint is None or not text.strip():
            return None
        from memviewer.llm import chat_text

        key = SummaryCache.key(self.endpoint.model, text)
        if self.cache is not None:
            cached = self.cache.get(key)
            if cached is not None:
                self.cache_hits += 1
                return cached
        self.llm_calls += 1
        summary = " ".join(chat_text(self.endpoint, SYSTEM_PROMPT, text).split())
        if self.cache is not None and summary:
            self.cache.put(key, summary, self.endpoint.model)
        return summary

    def summarize(self, turns: Sequence[dict[str, Any]], title: str = "") -> SessionSummary:
        summary, search = extractive(turns, title)
        method = "extractive"
        if self.endpoint is not None:
            try:
                llm = self.llm_summary(transcript(turns))
            except Exception as exc:  # an LLM outage must not stop indexing
                log.warning("LLM summary failed, using the extractive one: %s", exc)
                method = f"extractive (llm failed: {getattr(exc, 'code', type(exc).__name__)})"
            else:
                if llm:
                    search = llm + "\n" + search
                    summary, method = llm[: SUMMARY_CHARS * 2], f"llm:{self.endpoint.model}"
        salt = f"llm:{self.endpoint.model}" if self.endpoint is not None else ""
        return SessionSummary(
            summary,
            search[:SEARCH_TEXT_CHARS],
            method,
            _source_hash(turns, salt),
            len(turns),
            tuple(chat_windows(turns)),
        )

    def source_hash(self, turns: Sequence[dict[str, Any]]) -> str:
        """What ``summarize`` would record, without doing the work (idempotent re-index)."""
        salt = f"llm:{self.endpoint.model}" if self.endpoint is not None else ""
        return _source_hash(turns, salt)


def needs_refresh(previous_count: int | None, count: int, *, force: bool = False) -> bool:
    """The documented refresh rule (see the module docstring)."""
    if force or previous_count is None:
        return True
    return abs(count - previous_count) >= max(REFRESH_MIN_TURNS, int(previous_count * REFRESH_FRACTION))
