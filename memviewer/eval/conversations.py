"""Retrieval evaluation on long two-person conversations with questions (REALTALK, LoCoMo).

``memviewer eval realtalk FILE`` (alias ``eval conversations``) reads one of three shapes,
gzip or plain JSON, and turns it into the *conversation+QA format* below:

* **the conversation+QA format** (documented in docs/benchmarks.md)::

      [{"id": "conv-1",
        "speakers": ["Alice", "Bob"],              # the first is role "user", the second "assistant"
        "sessions": [{"id": "1", "date": "2024-01-05T10:00:00Z" | epoch s | null,
                      "turns": [{"id": "D1:1", "speaker": "Alice", "text": "...",
                                 "ts": epoch s | ISO 8601 | null}]}],
        "questions": [{"question": "...", "evidence": ["D1:1"], "category": "fact",
                       "as_of": epoch s | ISO 8601 | null}]}]

* **REALTALK** as published: a list of chats with ``name`` (``speaker_1``, ``speaker_2``),
  ``session_N`` lists of messages (``clean_text``, ``speaker``, ``date_time``
  ``"29.12.2023, 00:51:12"``, ``dia_id``, optional ``blip_caption``) and ``qa``
  (``question``, ``evidence``, ``category`` 1 fact / 2 date / 3 inference);
* **LoCoMo** as published: a list of samples with ``conversation`` (``speaker_a``,
  ``speaker_b``, ``session_N``, ``session_N_date_time``) and ``qa`` (categories 1 multi-hop,
  2 temporal, 3 open-domain, 4 single-hop; category 5, adversarial, has no answer in the
  conversation and is left out).

Each conversation is its own scope (``scope="conv"``, ``scope_id=<conversation id>``), each of
its sessions a memviewer session, each message a turn. Both speakers are people, so the role
only says which of the two wrote it (first speaker ``user``, second ``assistant``); the name is
kept as the turn's author in ``metadata.speaker`` (the turn text is the message itself, plus
``" [shares <caption>]"`` for a shared image, as LoCoMo's own retrieval baselines read it).
Recall reads ``metadata.speaker`` to favour the turns of a person the question names
(``memviewer.recall.names``).

Systems: ``hierarchical`` (recall's defaults), ``flat`` (``mode="flat"``), ``keyword``
(flat with ``w_dense=0``), ``dense`` (flat with ``w_keyword=0``), and two baselines computed
here from the same index, independent of recall's scoring: ``bm25`` (plain LanceDB BM25 over
the turns) and ``blend`` (0.5 · BM25 / max BM25 + 0.5 · MiniLM cosine over the union of the top
100 of each).

Metrics per system, per category and per split half (the first ``split`` conversations tune,
the rest hold out): ``turn_r@5`` / ``turn_r@10`` (share of a question's evidence turns in the
first 5 / 10 results), ``session_r@5`` (share of its evidence sessions among the first 5
sessions: the Stage-1 sessions for hierarchical, the first 5 distinct sessions of the top 50
turns otherwise), ``session_any@5`` and ``mrr`` (reciprocal rank of the first evidence turn in
the first 10 results, 0 when none). Questions whose evidence names no turn of the conversation
are counted in ``meta.skipped_questions`` and left out.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from memviewer.timeutil import EARLIEST, LATEST

if TYPE_CHECKING:
    from memviewer.service import MemoryService

SCOPE = "conv"
SYSTEMS = ("hierarchical", "flat", "keyword", "dense", "bm25", "blend")
FLAT_VARIANTS = {"flat": {}, "keyword": {"dense": 0.0}, "dense": {"keyword": 0.0}}  # Weights fields
SESSION_K = 5
TURN_KS = (5, 10)
DEPTH = 50
BLEND_DEPTH = 100
REALTALK_CATEGORIES = {1: "fact", 2: "date", 3: "inference"}
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


@dataclass
class Turn:
    id: str
    speaker: str
    text: str
    ts: float


@dataclass
class Session:
    id: str
    date: float
    turns: list[Turn]


@dataclass
class Question:
    question: str
    evidence: list[str]
    category: str
    as_of: float | None = None


@dataclass
class Conversation:
    id: str
    speakers: list[str]
    sessions: list[Session]
    questions: list[Question]


# ---------------------------------------------------------------- reading


def _read_json(path: Path) -> Any:
    import zlib

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as exc:
            raise ValueError(f"{path}: damaged gzip file ({exc or type(exc).__name__})") from None
    try:
        return json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not JSON: not valid UTF-8 (at byte {exc.start})") from None
    except (RecursionError, ValueError) as exc:
        raise ValueError(f"{path} is not JSON: {str(exc).split(';')[0] or 'nested too deeply'}") from None


_SESSION_KEY = re.compile(r"^session_(\d+)$")


def _parse_time(value: Any, where: str) -> float | None:
    """Epoch seconds from a number, ISO 8601, REALTALK's ``29.12.2023, 00:51:12`` or LoCoMo's
    ``1:56 pm on 8 May, 2023``; None when absent."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"{where}: a time must be a number or a string, not true/false")
    if isinstance(value, int | float):
        ts = float(value)
    elif isinstance(value, str):
        ts = _parse_time_text(value, where)
    else:
        raise ValueError(f"{where}: a time must be a number or a string, not {type(value).__name__}")
    if not EARLIEST <= ts <= LATEST:
        raise ValueError(f"{where}: the time {value!r} is outside 1970-9999")
    return ts


def _parse_time_text(value: str, where: str) -> float:
    text = " ".join(value.split())
    for fmt in (
        "%d.%m.%Y, %H:%M:%S",
        "%d.%m.%Y, %H:%M",
        "%I:%M %p on %d %B, %Y",
        "%I:%M %p on %d %b, %Y",
    ):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{where}: cannot read the time {value!r}") from None
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def _clean_id(value: Any) -> str:
    # REALTALK/LoCoMo evidence holds slips such as "D5:3." or " D2:7"
    return str(value).strip().rstrip(".,;").strip()


_DIA = re.compile(r"D(\d+):(\d+)")


def evidence_ids(values: Sequence[Any]) -> list[str]:
    """Evidence turn ids, with REALTALK's compound entries read as what they mean:
    ``"D5:12;D5:16"`` (a list), ``"D12:3-D12:5"`` (a range inside one session) and
    ``"D13:45:D20:19"`` (two ids run together)."""
    out: list[str] = []
    for value in values:
        for piece in re.split(r"[;,]", str(value)):
            piece = _clean_id(piece)
            if not piece:
                continue
            found = _DIA.findall(piece)
            if "-" in piece and len(found) == 2 and found[0][0] == found[1][0]:
                lo, hi = sorted((int(found[0][1]), int(found[1][1])))
                out.extend(f"D{found[0][0]}:{k}" for k in range(lo, min(hi, lo + 50) + 1))
            elif len(found) > 1:
                out.extend(f"D{a}:{b}" for a, b in found)
            else:
                out.append(piece)
    return list(dict.fromkeys(out))


def _message_text(m: dict[str, Any], key: str) -> str:
    text = m.get(key)
    text = "" if text is None else str(text)
    caption = m.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        text = f"{text} [shares {caption.strip()}]".strip()
    return text


def _from_raw(item: dict[str, Any], i: int, path: Path) -> Conversation:
    """One REALTALK chat or LoCoMo sample in the common shape."""
    locomo = isinstance(item.get("conversation"), dict)
    conv = item["conversation"] if locomo else item
    if locomo:
        speakers = [str(conv.get("speaker_a") or "A"), str(conv.get("speaker_b") or "B")]
        cid = str(item.get("sample_id") or f"conv-{i + 1}")
        cats, text_key = LOCOMO_CATEGORIES, "text"
    else:
        names = conv.get("name") or {}
        if not isinstance(names, dict):
            raise ValueError(f"{path}: conversation #{i}: name must be an object of speakers")
        speakers = [str(names.get("speaker_1") or "A"), str(names.get("speaker_2") or "B")]
        cid = str(item.get("chat_id") or f"conv-{i + 1}")
        cats, text_key = REALTALK_CATEGORIES, "clean_text"
    keys = sorted((int(m.group(1)), k) for k in conv if (m := _SESSION_KEY.match(k)))
    sessions = []
    for n, key in keys:
        msgs = conv[key]
        where = f"{path}: conversation {cid}, {key}"
        if not isinstance(msgs, list):
            raise ValueError(f"{where} must be a list of messages")
        date = _parse_time(conv.get(f"{key}_date_time"), where)
        turns = []
        for j, m in enumerate(msgs):
            if not isinstance(m, dict):
                raise ValueError(f"{where}, message {j} must be an object")
            ts = _parse_time(m.get("date_time"), f"{where}, message {j}")
            turns.append(
                Turn(
                    _clean_id(m.get("dia_id") or f"D{n}:{j + 1}"),
                    str(m.get("speaker") or ""),
                    _message_text(m, text_key),
                    ts if ts is not None else -1.0,
                )
            )
        sessions.append(Session(str(n), date if date is not None else -1.0, turns))
    questions = []
    for j, q in enumerate(item.get("qa") or []):
        if not isinstance(q, dict) or not isinstance(q.get("question"), str):
            raise ValueError(f"{path}: conversation {cid}, question #{j} has no question text")
        cat = q.get("category")
        if locomo and cat == 5:
            continue
        ev = q.get("evidence") or []
        if not isinstance(ev, list):
            raise ValueError(f"{path}: conversation {cid}, question #{j}: evidence must be a list")
        name = cats.get(cat, str(cat)) if isinstance(cat, int) else str(cat or "unknown")
        questions.append(Question(q["question"], evidence_ids(ev), name))
    return Conversation(cid, speakers, sessions, questions)


def _from_common(item: dict[str, Any], i: int, path: Path) -> Conversation:
    cid = str(item.get("id") or f"conv-{i + 1}")
    where = f"{path}: conversation {cid}"
    speakers = item.get("speakers")
    if not (isinstance(speakers, list) and speakers and all(isinstance(s, str) for s in speakers)):
        raise ValueError(f"{where}: speakers must be a list of names")
    sessions = []
    for j, s in enumerate(item.get("sessions") or []):
        if not isinstance(s, dict) or not isinstance(s.get("turns"), list):
            raise ValueError(f"{where}, session #{j} must be an object with a list of turns")
        sid = str(s.get("id") or j + 1)
        date = _parse_time(s.get("date"), f"{where}, session {sid}")
        turns = []
        for k, t in enumerate(s["turns"]):
            at = f"{where}, session {sid}, turn {k}"
            if not isinstance(t, dict) or not isinstance(t.get("text"), str):
                raise ValueError(f"{at} must be an object with a text")
            speaker = t.get("speaker")
            if not isinstance(speaker, str) or speaker not in speakers:
                raise ValueError(f"{at}: speaker {speaker!r} is not one of {speakers}")
            ts = _parse_time(t.get("ts"), at)
            turns.append(
                Turn(
                    _clean_id(t.get("id") or f"{sid}:{k + 1}"), speaker, t["text"], -1.0 if ts is None else ts
                )
            )
        sessions.append(Session(sid, -1.0 if date is None else date, turns))
    questions = []
    for j, q in enumerate(item.get("questions") or []):
        at = f"{where}, question #{j}"
        if not isinstance(q, dict) or not isinstance(q.get("question"), str):
            raise ValueError(f"{at} must be an object with a question")
        ev = q.get("evidence") or []
        if not isinstance(ev, list):
            raise ValueError(f"{at}: evidence must be a list of turn ids")
        questions.append(
            Question(
                q["question"],
                evidence_ids(ev),
                str(q.get("category") or "unknown"),
                _parse_time(q.get("as_of"), at),
            )
        )
    return Conversation(cid, list(speakers), sessions, questions)


def _fill_times(conv: Conversation) -> None:
    """Turns without a time follow their session's date a minute apart; sessions without a
    date a day after the previous one (from 2023-01-01)."""
    prev = datetime(2023, 1, 1, tzinfo=UTC).timestamp() - 86_400
    for s in conv.sessions:
        if s.date < 0:
            first = next((t.ts for t in s.turns if t.ts >= 0), None)
            s.date = first if first is not None else prev + 86_400
        last = s.date
        for t in s.turns:
            if t.ts < 0:
                t.ts = last + 60
            last = t.ts
        prev = max(s.date, last)


def load_conversations(path: str | Path) -> list[Conversation]:
    """Read a conversation+QA file (common, REALTALK or LoCoMo shape), checked.

    Every problem is a ValueError naming the file and the place, before any home is made.
    """
    p = Path(path)
    data = _read_json(p)
    if not isinstance(data, list) or not data or not all(isinstance(c, dict) for c in data):
        raise ValueError(f"{p}: expected a JSON list of conversation objects")
    out = []
    seen: set[str] = set()
    for i, item in enumerate(data):
        if "sessions" in item and "speakers" in item:
            conv = _from_common(item, i, p)
        elif isinstance(item.get("conversation"), dict) or any(_SESSION_KEY.match(k) for k in item):
            conv = _from_raw(item, i, p)
        else:
            raise ValueError(
                f"{p}: conversation #{i} is neither the conversation+QA format (speakers, sessions, "
                "questions) nor REALTALK/LoCoMo (session_N lists)"
            )
        if conv.id in seen:
            raise ValueError(f"{p}: conversation id {conv.id!r} is used twice")
        seen.add(conv.id)
        ids = [t.id for s in conv.sessions for t in s.turns]
        if len(set(ids)) != len(ids):
            dup = next(x for x in ids if ids.count(x) > 1)
            raise ValueError(f"{p}: conversation {conv.id}: turn id {dup!r} is used twice")
        _fill_times(conv)
        out.append(conv)
    return out


# ---------------------------------------------------------------- ingest


def session_id_of(cid: str, sid: str) -> str:
    return f"{cid}/s{sid}"


def turn_id_of(cid: str, tid: str) -> str:
    return f"{cid}/{tid}"


def role_of(conv: Conversation, speaker: str) -> str:
    return "user" if speaker == conv.speakers[0] else "assistant"


def ingest(
    service: MemoryService,
    convs: Sequence[Conversation],
    progress: Callable[[int, int, str], None] | None = None,
) -> None:
    total = sum(len(c.sessions) for c in convs)
    n = 0
    for conv in convs:
        for s in conv.sessions:
            rows = [
                {
                    "id": turn_id_of(conv.id, t.id),
                    "role": role_of(conv, t.speaker),
                    "content": t.text,
                    "timestamp": t.ts,
                    "archived": False,
                    "meta": {"speaker": t.speaker, "dia_id": t.id},
                }
                for t in s.turns
            ]
            last = max((t.ts for t in s.turns), default=s.date)
            service.import_session(
                {
                    "id": session_id_of(conv.id, s.id),
                    "agent": "conversation-eval",
                    "scope": SCOPE,
                    "scope_id": conv.id,
                    "title": f"{conv.id} session {s.id}",
                    "started_at": min(s.date, last),
                    "last_seen_at": last,
                    "status": "closed",
                    "source": "conversation-eval",
                    "meta": {"speakers": conv.speakers},
                },
                rows,
            )
            n += 1
            if progress:
                progress(n, total, conv.id)


# ---------------------------------------------------------------- evaluate


@dataclass
class Gold:
    turns: set[str]
    sessions: set[str]


def gold_of(conv: Conversation, q: Question) -> Gold:
    session_of = {t.id: s.id for s in conv.sessions for t in s.turns}
    turns = {e for e in q.evidence if e in session_of}
    return Gold(
        {turn_id_of(conv.id, e) for e in turns}, {session_id_of(conv.id, session_of[e]) for e in turns}
    )


@dataclass
class Ranked:
    sessions: list[str]
    turns: list[str]
    ms: float


def _distinct(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _baseline(
    service: MemoryService, index: Any, system: str, query: str, where: str | None
) -> list[dict[str, Any]]:
    """Plain BM25, or the linear 0.5 BM25/max + 0.5 cosine blend, best first (turn rows)."""
    import numpy as np

    from memviewer.index.lance import TURNS

    cols = ["turn_id", "session_id"]
    bm = index.fulltext(TURNS, query, where, BLEND_DEPTH if system == "blend" else DEPTH, cols)
    if system == "bm25":
        return cast("list[dict[str, Any]]", bm)
    qvec = np.asarray(service.embedder.embed([query])[0], dtype=np.float32)
    dense = index.dense(TURNS, qvec, where, BLEND_DEPTH, cols)
    top = max((float(r["_score"]) for r in bm), default=0.0)
    score: dict[str, float] = defaultdict(float)
    rows: dict[str, dict[str, Any]] = {}
    for r in dense:
        rows[r["turn_id"]] = r
        score[r["turn_id"]] += 0.5 * max(0.0, 1.0 - float(r["_distance"]))
    missing = [r["turn_id"] for r in bm if r["turn_id"] not in rows]
    vecs = index.vectors(TURNS, "turn_id", missing) if missing else {}
    for r in bm:
        tid = r["turn_id"]
        rows.setdefault(tid, r)
        score[tid] += 0.5 * (float(r["_score"]) / top if top > 0 else 0.0)
        if tid in vecs:
            score[tid] += 0.5 * max(0.0, float(vecs[tid] @ qvec))
    return [rows[t] for t in sorted(score, key=lambda t: (-score[t], t))][:DEPTH]


def run_system(
    service: MemoryService, system: str, conv: Conversation, q: Question, **recall_kw: Any
) -> Ranked:
    from memviewer.index.lance import scope_filter

    t0 = time.perf_counter()
    as_of = q.as_of if q.as_of is not None else max(t.ts for s in conv.sessions for t in s.turns) + 3600
    if system == "hierarchical":
        out = service.recall(
            q.question, scope=SCOPE, scope_id=conv.id, as_of=as_of, hide_later=False, **recall_kw
        )
        sessions = [s["session_id"] for s in out["diagnostics"]["stage1"]]
        turns = [r["turn_id"] for r in out["results"]]
        if not sessions:  # a Stage-1 fallback: the sessions of the results
            sessions = _distinct([r["session_id"] for r in out["results"]])
    elif system in FLAT_VARIANTS:
        weights = {**(recall_kw.get("weights") or {}), **FLAT_VARIANTS[system]}
        out = service.recall(
            q.question,
            scope=SCOPE,
            scope_id=conv.id,
            mode="flat",
            top_k=DEPTH,
            as_of=as_of,
            hide_later=False,
            weights=weights,
            tuning=recall_kw.get("tuning"),
        )
        turns = [r["turn_id"] for r in out["results"]]
        sessions = _distinct([r["session_id"] for r in out["results"]])
    elif system in ("bm25", "blend"):
        rows = _baseline(service, service.parts.lance, system, q.question, scope_filter(SCOPE, conv.id))
        turns = [r["turn_id"] for r in rows]
        sessions = _distinct([r["session_id"] for r in rows])
    else:
        raise ValueError(f"unknown system {system!r}; one of {', '.join(SYSTEMS)}")
    return Ranked(sessions[:SESSION_K], turns[: max(TURN_KS)], (time.perf_counter() - t0) * 1000)


@dataclass
class Scores:
    turn_r: dict[int, list[float]] = field(default_factory=lambda: {k: [] for k in TURN_KS})
    session_r: list[float] = field(default_factory=list)
    session_any: list[float] = field(default_factory=list)
    rr: list[float] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)

    def add(self, gold: Gold, ranked: Ranked) -> None:
        for k in TURN_KS:
            self.turn_r[k].append(len(set(ranked.turns[:k]) & gold.turns) / len(gold.turns))
        got = set(ranked.sessions[:SESSION_K]) & gold.sessions
        self.session_r.append(len(got) / len(gold.sessions))
        self.session_any.append(1.0 if got else 0.0)
        first = next((i for i, t in enumerate(ranked.turns[: max(TURN_KS)]) if t in gold.turns), None)
        self.rr.append(0.0 if first is None else 1.0 / (first + 1))
        self.ms.append(ranked.ms)

    def summary(self) -> dict[str, Any]:
        def mean(xs: list[float]) -> float | None:
            return round(statistics.fmean(xs), 4) if xs else None

        return {
            "n": len(self.rr),
            **{f"turn_r@{k}": mean(v) for k, v in self.turn_r.items()},
            "session_r@5": mean(self.session_r),
            "session_any@5": mean(self.session_any),
            "mrr": mean(self.rr),
            "p50_ms": round(statistics.median(self.ms), 2) if self.ms else None,
        }


def evaluate(
    service: MemoryService,
    convs: Sequence[Conversation],
    *,
    systems: Sequence[str] = SYSTEMS,
    split: int | None = None,
    **recall_kw: Any,
) -> dict[str, Any]:
    """Scores per system for ``all``, each category and (with ``split``) ``tune``/``holdout``."""
    table: dict[str, dict[str, Scores]] = {s: defaultdict(Scores) for s in systems}
    per_question: list[dict[str, Any]] = []
    skipped = 0
    for ci, conv in enumerate(convs):
        for qi, q in enumerate(conv.questions):
            gold = gold_of(conv, q)
            if not gold.turns:
                skipped += 1
                continue
            groups = ["all", q.category]
            if split is not None:
                groups.append("tune" if ci < split else "holdout")
            row: dict[str, Any] = {"conversation": conv.id, "question": qi, "category": q.category}
            for system in systems:
                ranked = run_system(service, system, conv, q, **recall_kw)
                for g in groups:
                    table[system][g].add(gold, ranked)
                row[system] = round(len(set(ranked.turns[:10]) & gold.turns) / len(gold.turns), 4)
            per_question.append(row)
    return {
        "systems": {s: {g: sc.summary() for g, sc in sorted(gs.items())} for s, gs in table.items()},
        "questions": per_question,
        "skipped_questions": skipped,
    }


def run(
    path: str | Path,
    *,
    home: str | Path | None = None,
    cache_dir: str | Path | None = None,
    embedder: Any = None,
    split: int | None = None,
    systems: Sequence[str] = SYSTEMS,
    limit: int | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    **recall_kw: Any,
) -> dict[str, Any]:
    """Load, ingest into ``home`` (temporary by default), index, evaluate.

    ``split`` defaults to half the conversations (rounded up): the first half tunes, the rest
    holds out. ``limit`` keeps only the first N conversations.
    """
    from memviewer.eval.longmemeval import check_eval_home
    from memviewer.eval.workspace import eval_workspace

    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise ValueError(f"unknown system {unknown[0]!r}; one of {', '.join(SYSTEMS)}")
    convs = load_conversations(path)
    if limit is not None:
        convs = convs[:limit]
    if split is None:
        split = (len(convs) + 1) // 2
    with eval_workspace(
        home, cache_dir, embedder, check_home=lambda h: check_eval_home(h, scopes=("eval", SCOPE))
    ) as ws:
        ws.ingest(
            SCOPE,
            lambda have: [c for c in convs if c.id not in have],
            lambda todo: ingest(ws.service, todo, progress),
        )
        report = evaluate(
            ws.service, convs, systems=systems, split=split if 0 < split < len(convs) else None, **recall_kw
        )
    report["meta"] = {
        "file": str(path),
        "conversations": len(convs),
        "questions": sum(len(c.questions) for c in convs),
        "turns": sum(len(s.turns) for c in convs for s in c.sessions),
        "sessions": sum(len(c.sessions) for c in convs),
        **ws.meta(),
        "split": split,
        "skipped_questions": report.pop("skipped_questions"),
    }
    return report


COLUMNS = ("turn_r@5", "turn_r@10", "session_r@5", "session_any@5", "mrr")


def markdown_table(report: dict[str, Any], groups: Sequence[str] | None = None) -> str:
    systems = report["systems"]
    first = next(iter(systems.values()))
    fixed = ("all", "tune", "holdout")
    groups = list(groups or [g for g in fixed if g in first] + sorted(g for g in first if g not in fixed))
    lines = [
        "| group | n | system | turn R@5 | turn R@10 | session R@5 | session any@5 | MRR | p50 ms |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for g in groups:
        for s, table in systems.items():
            row = table.get(g)
            if row is None:
                continue
            vals = " | ".join("–" if row[c] is None else f"{row[c]:.3f}" for c in COLUMNS)
            lines.append(f"| {g} | {row['n']} | {s} | {vals} | {row['p50_ms']} |")
    return "\n".join(lines)
