"""How recall scores a turn and a session, in one place so the explain trace and
the docs can say exactly what each number means.

Turn score (Stage 2), every part in [0, 1]::

    score = w_dense   * dense      # cosine(query, turn), clipped at 0
          + w_keyword * keyword    # lexical evidence, see below
          + w_recency * recency    # 0.5 ** (age / RECENCY_HALF_LIFE_S), age vs the newest candidate

    keyword = (1 - coverage_share) * bm25 / max_bm25   # BM25 over the scope, normalised per query
            + coverage_share * coverage                 # share of the query's content words present

Two priors take a fixed share of the score, each only when the query asks for
it (``with_priors``)::

    final = (1 - w_speaker - w_time) * score
          + w_speaker * speaker    # 1 if the turn's role is the speaker the query asks about
          + w_time    * time       # closeness of the turn's time to a date the query names

``time`` comes from ``memviewer.contract.timeref``: "a week ago", "10 days ago",
"last Saturday", "in the past few months" become a window before ``as_of`` (the
moment of asking). Stage 1 gives a session the same share for the closeness of
its turn nearest the window (not of its span: a long-lived session overlaps every
window), and sessions with a turn in the window join Stage 1's candidates even
when their summary shares no word with the query. On the 8 dev questions that name
such a date, hierarchical turn recall@10 went 0.56 → 0.69 (``w_time`` 0.1 and
0.2 alike; no other question changes); LongMemEval haystacks hold many sessions
per day, so the date narrows the field but the topic still has to decide.

``addressed_speaker`` reads it from the query: "you told me / you recommended /
your suggestion" asks about the assistant's words; otherwise a first-person
question ("what did I buy", "my sister") asks about the user's own. A query that
says neither leaves the score alone. This is the largest single gain measured on
the LongMemEval dev set (hierarchical turn recall@10 0.836 → 0.901 on the tuning
half, 0.806 → 0.875 on the hold-out half, ``w_speaker`` 0.2): assistant replies
are long and repeat the topic's vocabulary, so without it they crowd the user's
short statement of the fact out of a session's M slots. Set ``w_speaker = 0``
for stores where that is not how memory is asked about.

``coverage_share`` defaults to 0 (``COVERAGE_SHARE``): on the LongMemEval dev
set every positive share lowered turn recall@10, so the feature is kept only as
an option and is reported in the breakdown.

Session score (Stage 1) uses the same weights over the session summary: its
cosine with the query and BM25 over the summary's search text (user turns,
names, dates and salient terms). ``w_*`` come from the settings
(``w_dense``, ``w_keyword``, ``w_recency``) and are normalised to sum to 1, so
scores stay comparable between configurations.

BM25 is normalised by the best BM25 among the query's candidates rather than
squashed by a fixed constant because raw BM25 depends on the corpus size and
on query length; the max-normalisation keeps the strongest keyword hit at 1
whatever the scope. Cosine is used raw (clipped at 0): min-max normalising it
over the candidates, or replacing the blend by reciprocal-rank fusion, both
measured worse (docs/benchmarks.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from memviewer.index.summarizer import STOP_WORDS

if TYPE_CHECKING:
    from memviewer.config import Settings

RECENCY_HALF_LIFE_S = 14 * 86_400.0
COVERAGE_SHARE = 0.0  # measured: any share > 0 lowered turn recall@10
SPEAKER_SHARE = 0.2  # chosen on LongMemEval dev q1–50, checked on q51–100 (docs/benchmarks.md)
TIME_SHARE = 0.1  # share of a named relative date ("a week ago"); see recall.timeref
RERANK_BLEND = 0.7  # final = 0.7 * score + 0.3 * neural (docs/cli.md, recall step 4)

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_QUESTION_WORDS = frozenset(
    "what which who whom whose when where why how did does do was were is are tell remember "
    "said say mentioned mention recommend recommended previous previously earlier last time "
    "conversation chat talked talk".split()
)


def stem(word: str) -> str:
    """A tiny suffix stripper: enough to match plural/tense variants of content words."""
    w = word.lower()
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if len(w) > len(suffix) + 2 and w.endswith(suffix) and not w.endswith("ss"):
            return w[: -len(suffix)] + keep
    return w


def content_terms(text: str) -> set[str]:
    """Stemmed words of ``text`` that carry meaning (no stop or question words)."""
    out = set()
    for w in _WORD.findall(text.lower()):
        if w in STOP_WORDS or w in _QUESTION_WORDS or (len(w) < 3 and not w.isdigit()):
            continue
        out.add(stem(w))
    return out


def coverage(query_terms: set[str], text: str) -> float:
    return covered(query_terms, content_terms(text))


def covered(query_terms: set[str], terms: set[str]) -> float:
    """The share of ``query_terms`` among a text's ``content_terms``."""
    if not query_terms:
        return 0.0
    return len(query_terms & terms) / len(query_terms)


@dataclass(frozen=True)
class Weights:
    dense: float = 0.5
    keyword: float = 0.5
    recency: float = 0.0
    coverage_share: float = COVERAGE_SHARE
    speaker: float = SPEAKER_SHARE
    time: float = TIME_SHARE
    half_life_s: float = RECENCY_HALF_LIFE_S
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> Weights:
        w = cls(
            dense=settings.w_dense,
            keyword=settings.w_keyword,
            recency=settings.w_recency,
            speaker=settings.w_speaker,
            time=settings.w_time,
        )
        known = {k: v for k, v in overrides.items() if k in cls.__dataclass_fields__ and v is not None}
        w = replace(w, **known)
        for name in ("speaker", "time"):
            if not 0.0 <= getattr(w, name) <= 1.0:
                raise ValueError(f"w_{name} must be between 0 and 1, not {getattr(w, name)}")
        if w.speaker + w.time > 1.0:
            raise ValueError(f"w_speaker + w_time must not exceed 1, not {w.speaker + w.time}")
        return w.normalised()

    def normalised(self) -> Weights:
        total = self.dense + self.keyword + self.recency
        if total <= 0:
            return replace(self, dense=1.0, keyword=0.0, recency=0.0)
        return replace(
            self, dense=self.dense / total, keyword=self.keyword / total, recency=self.recency / total
        )

    def public(self) -> dict[str, float]:
        return {
            "w_dense": round(self.dense, 4),
            "w_keyword": round(self.keyword, 4),
            "w_recency": round(self.recency, 4),
            "w_speaker": round(self.speaker, 4),
            "w_time": round(self.time, 4),
            "coverage_share": self.coverage_share,
        }


def recency(ts: float | None, newest: float | None, half_life_s: float) -> float:
    if ts is None or newest is None or half_life_s <= 0:
        return 0.0
    age = max(0.0, newest - ts)
    return math.pow(0.5, age / half_life_s)


def keyword_part(bm25: float, max_bm25: float, cov: float, share: float) -> float:
    norm = bm25 / max_bm25 if max_bm25 > 0 else 0.0
    return (1.0 - share) * norm + share * cov


def blend(parts: Mapping[str, float], w: Weights) -> float:
    return w.dense * parts["dense"] + w.keyword * parts["keyword"] + w.recency * parts["recency"]


def with_priors(score: float, priors: Iterable[tuple[float, float]]) -> float:
    """``(1 - Σ share) * score + Σ share * value`` over the priors that apply.

    Priors (speaker, time) take a fixed share of the score only when the query
    asks for them, so a query that names no speaker and no date keeps its blend.
    """
    total = sum(share for share, _ in priors)
    return (1.0 - total) * score + sum(share * value for share, value in priors)


ECHO_COVERAGE = 0.5  # share of the query's content words a question turn must repeat to echo it


def echoes_query(text: str, query_terms: set[str]) -> bool:
    """A turn that is itself a question repeating most of the query's content words.

    Such a turn ("did you ever finish the Pachinko saga?") ranks high for the query that
    asks about it, yet the answer is in another turn; ``tuning={"echo_penalty": p}`` takes
    the share ``p`` off its score.
    """
    stripped = text.rstrip()
    if not stripped.endswith("?") or not query_terms:
        return False
    last = re.split(r"(?<=[.!])\s+", stripped)[-1]  # the question sentence, not a statement before it
    return coverage(query_terms, last) >= ECHO_COVERAGE


_SENTENCE = re.compile(r"[^.!?。！？]+[.!?。！？]*")


def only_questions(text: str) -> bool:
    """A turn whose every sentence is a question ("Where are you going skiing?").

    In a chat such a turn asks for a fact and states none; the answer is in another
    turn. A sentence is a question when its closing marks hold "?" or "？" ("Really?!");
    a sentence without a letter or digit (an emoji, "...") does not count.
    """
    sentences = [m.strip() for m in _SENTENCE.findall(text) if _WORD.search(m)]
    return bool(sentences) and all(_asks(m) for m in sentences)


#: What a request to recall says: the speaker points back at what was said or decided before.
_RECALL_CUE = re.compile(
    r"\b(?:remember|remind|recall|last time|earlier|did (?:we|i|you)|have (?:we|i|you)|"
    r"we (?:decided|decide|agreed|agree|chose|choose|picked|pick|settled|said)|"
    r"you (?:told|said|mentioned|suggested|recommended)|i (?:told|said|mentioned|asked))\b"
    r"|记得|上次|之前|提醒我",
    re.IGNORECASE,
)


def asks_to_recall(text: str) -> bool:
    """A turn that only asks (``only_questions``) and points back at the conversation
    ("What did we decide about the webhook backoff last time?", "Do you remember which
    provider we chose?").

    It states nothing itself: the answer is the turn that said or decided it, yet the request
    repeats the very words a later recall of the same thing uses, so it outranks the answer.
    In an agent session a user's other questions often carry the fact asked about later ("I
    used to play tennis competitively, can you recommend exercises?"), so only this kind is
    demoted there (``tuning.question_penalty``)."""
    return only_questions(text) and _RECALL_CUE.search(text) is not None


def _asks(sentence: str) -> bool:
    body = sentence.rstrip(".!?。！？")
    return "?" in sentence[len(body) :] or "？" in sentence[len(body) :]


def max_of(values: Iterable[float]) -> float:
    return max(values, default=0.0)
