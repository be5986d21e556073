"""LongMemEval retrieval evaluation of recall (hierarchical, flat, BM25, dense).

Each question's haystack becomes its own scope (``scope="eval"``,
``scope_id=<question id>``): one memviewer session per haystack session,
ingested with ``MemoryService.import_session`` into a throw-away home and
indexed by the real ``Indexer`` (summaries included). Each question is asked as of its
``question_date`` (``recall(as_of=...)``), so "a week ago" counts from then. Embeddings are cached
on disk by ``sha256(model, text)`` (``memviewer.eval.embed_cache``), so only the
first run pays for the model.

Metrics (per question type and overall; a question counts in a metric only if
it has gold for it):

* ``session_any@5`` / ``session_all@5`` — whether any / all of the question's
  ``answer_session_ids`` are among the first 5 sessions. For hierarchical
  recall those are the Stage-1 sessions; for the flat baselines, the first 5
  distinct sessions in the turn ranking (top 50 turns).
* ``turn_recall@10`` — the fraction of the question's gold turns (turns with
  ``has_answer: true``) found in the top 10 results, averaged over questions
  that have gold turns.
"""

from __future__ import annotations

import gzip
import json
import logging
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memviewer.eval import metrics
from memviewer.timeutil import EARLIEST, LATEST
from memviewer.words import plural

if TYPE_CHECKING:
    from memviewer.service import MemoryService

log = logging.getLogger("memviewer.eval")

SCOPE = "eval"
SYSTEMS = ("hierarchical", "flat", "bm25", "dense")
SESSION_K = 5
TURN_K = 10
SESSION_DEPTH = 50


ROLES = ("user", "assistant", "system", "tool")


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, int | float) else type(value).__name__
    )


def _is_id(value: Any) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _check_question(p: Path, i: int, q: dict[str, Any], seen: dict[str, int]) -> None:
    """Every field ``ingest`` and ``evaluate`` read, with the question and field named."""
    qid = q["question_id"]
    if not _is_id(qid) or qid == "":
        raise ValueError(f"{p}: question #{i}: question_id must be a string, not {_kind(qid)}")
    where = f"{p}: question #{i} ({qid})"
    if str(qid) in seen:
        raise ValueError(f"{where}: question_id also used by question #{seen[str(qid)]}")
    seen[str(qid)] = i
    if not isinstance(q["question"], str):
        raise ValueError(f"{where}: question must be a string, not {_kind(q['question'])}")
    ids, sessions = q["haystack_session_ids"], q["haystack_sessions"]
    for key, value in (("haystack_session_ids", ids), ("haystack_sessions", sessions)):
        if not isinstance(value, list):
            raise ValueError(f"{where}: {key} must be a list, not {_kind(value)}")
    if len(ids) != len(sessions):
        raise ValueError(f"{where}: {len(ids)} haystack_session_ids but {len(sessions)} haystack_sessions")
    answers, dates = q.get("answer_session_ids"), q.get("haystack_dates")
    if answers is not None and not (isinstance(answers, list) and all(_is_id(a) for a in answers)):
        raise ValueError(f"{where}: answer_session_ids must be a list of session ids")
    if dates is not None and not (
        isinstance(dates, list) and all(d is None or isinstance(d, str) for d in dates)
    ):
        raise ValueError(f"{where}: haystack_dates must be a list of date strings")
    if q.get("question_date") is not None and not isinstance(q["question_date"], str):
        raise ValueError(f"{where}: question_date must be a string, not {_kind(q['question_date'])}")
    for j, (hsid, turns) in enumerate(zip(ids, sessions, strict=True)):
        if not _is_id(hsid):
            raise ValueError(f"{where}: haystack_session_ids[{j}] must be a string, not {_kind(hsid)}")
        if not isinstance(turns, list):
            raise ValueError(f"{where}: haystack session {hsid} must be a list of turns, not {_kind(turns)}")
        for k, t in enumerate(turns):
            at = f"{where}: haystack session {hsid}, turn {k}"
            if not isinstance(t, dict):
                raise ValueError(f"{at} must be an object, not {_kind(t)}")
            if not isinstance(t.get("content"), str):
                raise ValueError(f"{at}: content must be a string, not {_kind(t.get('content'))}")
            role = t.get("role")
            if role is not None and role not in ROLES:
                raise ValueError(
                    f"{at}: role must be one of {', '.join(ROLES)}, not {_kind(role)}"
                    if not isinstance(role, str)
                    else f"{at}: role must be one of {', '.join(ROLES)}, not {role!r}"
                )


def load_questions(path: str | Path) -> list[dict[str, Any]]:
    """Read the LongMemEval JSON (a list of questions), gzip or plain, and check its shape.

    Every problem is a ValueError naming the file (and the question and field), so
    the CLI prints one ``error:`` line before any home is created.
    """
    import zlib

    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ValueError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as exc:  # EOFError: a truncated download
            raise ValueError(f"{p}: damaged gzip file ({exc or type(exc).__name__})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{p} is not LongMemEval JSON: not valid UTF-8 (at byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p} is not LongMemEval JSON: {exc}") from None
    except (RecursionError, ValueError) as exc:
        raise ValueError(
            f"{p} is not LongMemEval JSON: {str(exc).split(';')[0] or 'nested too deeply'}"
        ) from None
    if not isinstance(data, list) or not all(isinstance(q, dict) for q in data):
        raise ValueError(f"{p}: expected a JSON list of question objects")
    required = ("question_id", "question", "haystack_sessions", "haystack_session_ids")
    seen: dict[str, int] = {}
    for i, q in enumerate(data):
        missing = [k for k in required if k not in q]
        if missing:
            raise ValueError(f"{p}: question #{i} lacks {', '.join(missing)}")
        _check_question(p, i, q, seen)
    return data


def _parse_date(value: str | None, fallback: float) -> float:
    if not value:
        return fallback
    head = value.split("(")[0].strip()
    tail = value.split(")")[-1].strip() if ")" in value else ""
    for fmt in ("%Y/%m/%d %H:%M", "%Y/%m/%d"):
        try:
            text = f"{head} {tail}".strip() if fmt.endswith("%M") else head
            ts = datetime.strptime(text, fmt).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
        return ts if EARLIEST <= ts <= LATEST else fallback  # the store keeps 1970..9999
    return fallback


def session_id_of(qid: str, hsid: str) -> str:
    return f"{qid}/{hsid}"


def turn_id_of(qid: str, hsid: str, i: int) -> str:
    return f"{qid}/{hsid}/{i}"


@dataclass
class Gold:
    sessions: set[str]
    turns: set[str]


def ingest(
    service: MemoryService,
    questions: Sequence[dict[str, Any]],
    progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, Gold]:
    """Import every haystack into its question's scope; return gold ids per question."""
    gold: dict[str, Gold] = {}
    base = datetime(2023, 1, 1, tzinfo=UTC).timestamp()
    for n, q in enumerate(questions, 1):
        qid = str(q["question_id"])
        dates = q.get("haystack_dates") or []
        g = Gold({session_id_of(qid, s) for s in q.get("answer_session_ids") or []}, set())
        for j, (hsid, turns) in enumerate(
            zip(q["haystack_session_ids"], q["haystack_sessions"], strict=True)
        ):
            sid = session_id_of(qid, str(hsid))
            t0 = _parse_date(dates[j] if j < len(dates) else None, base + j * 86_400)
            rows = []
            for i, t in enumerate(turns):
                tid = turn_id_of(qid, str(hsid), i)
                if t.get("has_answer"):
                    g.turns.add(tid)
                rows.append(
                    {
                        "id": tid,
                        "role": t.get("role") or "user",
                        "content": str(t["content"]),
                        "timestamp": t0 + i,
                        "archived": False,
                    }
                )
            service.import_session(
                {
                    "id": sid,
                    "agent": "longmemeval",
                    "scope": SCOPE,
                    "scope_id": qid,
                    "title": str(hsid),
                    "started_at": t0,
                    "last_seen_at": t0 + len(turns),
                    "status": "closed",
                    "source": "longmemeval",
                },
                rows,
            )
        gold[qid] = g
        if progress:
            progress(n, len(questions), qid)
    return gold


def gold_of(questions: Iterable[dict[str, Any]]) -> dict[str, Gold]:
    out = {}
    for q in questions:
        qid = str(q["question_id"])
        turns = {
            turn_id_of(qid, str(h), i)
            for h, s in zip(q["haystack_session_ids"], q["haystack_sessions"], strict=True)
            for i, t in enumerate(s)
            if t.get("has_answer")
        }
        out[qid] = Gold({session_id_of(qid, s) for s in q.get("answer_session_ids") or []}, turns)
    return out


@dataclass
class Ranked:
    sessions: list[str]
    turns: list[str]
    ms: float


def _distinct_sessions(turn_ids: Iterable[str], session_of: Callable[[str], str]) -> list[str]:
    seen: dict[str, None] = {}
    for t in turn_ids:
        seen.setdefault(session_of(t), None)
    return list(seen)


def _session_from_turn(turn_id: str) -> str:
    return turn_id.rsplit("/", 1)[0]


def run_system(service: MemoryService, system: str, q: dict[str, Any], **recall_kw: Any) -> Ranked:
    from memviewer.index.lance import TURNS, scope_filter

    qid, query = str(q["question_id"]), str(q["question"])
    as_of = _parse_date(q.get("question_date"), 0.0) or None  # relative dates count from it
    t0 = time.perf_counter()
    if system == "hierarchical":
        out = service.recall(query, scope=SCOPE, scope_id=qid, as_of=as_of, hide_later=False, **recall_kw)
        sessions = [s["session_id"] for s in out["diagnostics"]["stage1"]]
        turns = [r["turn_id"] for r in out["results"]]
    elif system == "flat":
        out = service.recall(
            query,
            scope=SCOPE,
            scope_id=qid,
            mode="flat",
            top_k=SESSION_DEPTH,
            as_of=as_of,
            hide_later=False,
            **{k: v for k, v in recall_kw.items() if k in ("weights", "tuning")},
        )
        turns = [r["turn_id"] for r in out["results"]]
        sessions = _distinct_sessions(turns, _session_from_turn)
    else:
        index = service.parts.lance
        where = scope_filter(SCOPE, qid)
        if system == "bm25":
            rows = index.fulltext(TURNS, query, where, SESSION_DEPTH, ["turn_id"])
        else:
            vec = service.embedder.embed([query])[0]
            rows = index.dense(TURNS, vec, where, SESSION_DEPTH, ["turn_id"])
        turns = [r["turn_id"] for r in rows]
        sessions = _distinct_sessions(turns, _session_from_turn)
    return Ranked(sessions[:SESSION_K], turns[:TURN_K], (time.perf_counter() - t0) * 1000)


@dataclass
class Scores:
    n: int = 0
    session_any: list[float] = field(default_factory=list)
    session_all: list[float] = field(default_factory=list)
    turn_recall: list[float] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)

    def add(self, gold: Gold, ranked: Ranked) -> None:
        self.n += 1
        self.ms.append(ranked.ms)
        if gold.sessions:
            self.session_any.append(metrics.hit_any_at(ranked.sessions, gold.sessions, SESSION_K))
            self.session_all.append(metrics.hit_all_at(ranked.sessions, gold.sessions, SESSION_K))
        if gold.turns:
            self.turn_recall.append(metrics.recall_at(ranked.turns, gold.turns, TURN_K))

    def summary(self) -> dict[str, Any]:
        mean = metrics.mean
        return {
            "n": self.n,
            "session_any@5": mean(self.session_any),
            "session_all@5": mean(self.session_all),
            "turn_recall@10": mean(self.turn_recall),
            "n_turn_gold": len(self.turn_recall),
            "p50_ms": round(statistics.median(self.ms), 2) if self.ms else None,
        }


def evaluate(
    service: MemoryService,
    questions: Sequence[dict[str, Any]],
    gold: dict[str, Gold],
    *,
    systems: Sequence[str] = SYSTEMS,
    split: int | None = None,
    **recall_kw: Any,
) -> dict[str, Any]:
    """Scores per system, per question type, overall (and per split half when ``split``)."""
    table: dict[str, dict[str, Scores]] = {s: defaultdict(Scores) for s in systems}
    per_question: list[dict[str, Any]] = []
    for i, q in enumerate(questions):
        qid = str(q["question_id"])
        groups = ["all", str(q.get("question_type", "unknown"))]
        if split is not None:
            groups.append("tune" if i < split else "holdout")
        row: dict[str, Any] = {"question_id": qid}
        for system in systems:
            ranked = run_system(service, system, q, **recall_kw)
            for g in groups:
                table[system][g].add(gold[qid], ranked)
            if gold[qid].turns:
                row[system] = metrics.recall_at(ranked.turns, gold[qid].turns, TURN_K)
        per_question.append(row)
    return {
        "systems": {s: {g: sc.summary() for g, sc in sorted(groups.items())} for s, groups in table.items()},
        "questions": per_question,
    }


def check_eval_home(home: Path, scopes: Sequence[str] = (SCOPE,)) -> None:
    """Refuse a ``--keep-home`` folder that holds anything but earlier evaluations.

    The evaluation writes ``scope=eval`` sessions into it; mixed into someone's real
    memory home they would show up in every listing and recall. The store is only
    read (read-only SQLite), never migrated or changed, when it is refused.
    """
    from memviewer import paths
    from memviewer.store.home_probe import UnreadableStore, sessions_outside_scopes

    if not home.exists():
        return
    if not home.is_dir():
        raise ValueError(f"--keep-home {home} is not a folder")
    db = paths.db_path(home)
    if not db.is_file():
        if any(home.iterdir()):
            raise ValueError(
                f"--keep-home {home} is not empty and holds no memviewer store; "
                "use a new folder (or one an earlier --keep-home run made)"
            )
        return
    try:
        others = sessions_outside_scopes(db, scopes)
    except UnreadableStore as exc:
        raise ValueError(f"--keep-home {home}: {db} is not a readable memviewer store ({exc})") from None
    if others:
        raise ValueError(
            f"--keep-home {home} is a memviewer home holding {plural(others, 'session')} not "
            "from an evaluation; use a separate folder for evaluations"
        )


def run(
    path: str | Path,
    *,
    limit: int | None = None,
    home: str | Path | None = None,
    cache_dir: str | Path | None = None,
    embedder: Any = None,
    split: int | None = 50,
    systems: Sequence[str] = SYSTEMS,
    progress: Callable[[int, int, str], None] | None = None,
    **recall_kw: Any,
) -> dict[str, Any]:
    """Load, ingest into ``home`` (a temporary folder by default), index and evaluate."""
    from memviewer.eval.workspace import eval_workspace

    questions = load_questions(path)
    if limit is not None:
        questions = questions[:limit]
    with eval_workspace(home, cache_dir, embedder, check_home=check_eval_home) as ws:
        ws.ingest(
            SCOPE,
            lambda have: [q for q in questions if str(q["question_id"]) not in have],
            lambda todo: ingest(ws.service, todo, progress),
        )
        report = evaluate(
            ws.service,
            questions,
            gold_of(questions),
            systems=systems,
            split=split if limit is None or (split or 0) < len(questions) else None,
            **recall_kw,
        )
    report["meta"] = {
        "file": str(path),
        "questions": len(questions),
        "turns": sum(len(s) for q in questions for s in q["haystack_sessions"]),
        **ws.meta(),
        "split": split,
    }
    return report


def markdown_table(report: dict[str, Any], groups: Sequence[str] | None = None) -> str:
    systems = report["systems"]
    first = next(iter(systems.values()))
    groups = list(
        groups
        or [g for g in ("all", "tune", "holdout") if g in first]
        + sorted(g for g in first if g not in ("all", "tune", "holdout"))
    )
    lines = [
        "| group | n | system | session any@5 | session all@5 | turn recall@10 | p50 ms |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for g in groups:
        for s, table in systems.items():
            row = table.get(g)
            if row is None:
                continue

            def f(v: float | None) -> str:
                return "–" if v is None else f"{v:.3f}"

            lines.append(
                f"| {g} | {row['n']} | {s} | {f(row['session_any@5'])} | "
                f"{f(row['session_all@5'])} | {f(row['turn_recall@10'])} | {row['p50_ms']} |"
            )
    return "\n".join(lines)
