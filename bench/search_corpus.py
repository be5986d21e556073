"""A deterministic corpus of PraisonAI session files for the keyword-search benchmark.

Sessions look like what ``praisonaiagents`` 1.7 writes: ``SessionData.to_dict``
keys, ``indent=2``, a ``.json.lock`` beside each file, ``agent_name`` /
``user_id`` often null, about a third compacted (``archived_messages`` plus a
``system`` summary whose metadata is ``{"compaction": true, "compacted_count":
N}``), tool calls and tool results, a few cron sessions, lineage keys, and 5 %
of sessions in Chinese or Japanese. Each planted query is a phrase of invented
words that occurs in exactly one session (a third of them in an archived
turn), so every engine has one right answer.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

T0 = 1_760_000_000.0
MESSAGES = 40
WINDOW = 20  # active window of compacted sessions

TOPICS = [
    ("billing migration", "Stripe", "Adyen", "invoices"),
    ("database upgrade", "Postgres 14", "Postgres 16", "replicas"),
    ("deploy pipeline", "Jenkins", "GitHub Actions", "runners"),
    ("refund policy", "annual plans", "monthly plans", "chargebacks"),
    ("onboarding flow", "email signup", "SSO", "trial users"),
    ("search relevance", "BM25", "embeddings", "queries"),
    ("incident review", "the API gateway", "the load balancer", "timeouts"),
    ("pricing page", "the old tiers", "usage pricing", "enterprise leads"),
    ("data retention", "30 days", "90 days", "audit logs"),
    ("mobile release", "iOS 17", "Android 14", "crash reports"),
    ("cache layer", "Redis", "Memcached", "hit rates"),
    ("hiring plan", "two backend roles", "one SRE", "interviews"),
]
OPENERS = [
    "Can you help me with the {t}?",
    "Let's review the {t} today.",
    "Where are we on the {t}?",
    "I need a plan for the {t}.",
    "Quick question about the {t}.",
]
USER = [
    "Should we move from {a} to {b}?",
    "What are the risks for {c}?",
    "How long will the {t} take?",
    "Who owns {c} after the change?",
    "Can we keep {a} running during the cutover?",
    "What did we decide about {c} last week?",
    "Please summarise the {t} so far.",
    "Is there a rollback plan if {b} fails?",
    "How do we measure success for {c}?",
    "Do we need approval from finance for the {t}?",
]
ASSISTANT = [
    "Moving from {a} to {b} is feasible; the main work is migrating {c} and testing the edge cases.",
    "The main risks for {c} are data loss during the cutover and a longer tail of support tickets.",
    "I estimate two to three weeks for the {t}, with a staged rollout and a week of monitoring.",
    "After the change, the platform team owns {c}; support keeps the runbook up to date.",
    "Yes: keep {a} in read-only mode for seven days so late events still reconcile.",
    "Last week we agreed to start with {c} for internal accounts, then widen the rollout.",
    "So far: the {t} is scoped, {b} is chosen, and {c} will move in two batches.",
    "The rollback plan is to switch traffic back to {a} with a feature flag within minutes.",
    "We will track error rates, latency and the number of {c} processed per hour.",
    "Finance needs to sign off because {b} changes the monthly cost of {c}.",
]
CJK = [
    ("数据库迁移", "我们下周讨论数据库迁移计划，预算已经批准了。", "好的，我会准备迁移步骤和回滚方案。"),
    ("予算会議", "来週の予算会議で最終決定します。", "承知しました。資料を準備します。"),
    ("上线计划", "新版本的上线计划需要运维团队确认。", "我已经通知运维团队，明天给出时间表。"),
    ("障害対応", "昨日の障害対応について振り返りたいです。", "原因はキャッシュの設定ミスでした。"),
]
SYLLABLES = [
    "zor",
    "bu",
    "lax",
    "quin",
    "ta",
    "ric",
    "vel",
    "mo",
    "thra",
    "pex",
    "dun",
    "gli",
    "sar",
    "kov",
    "ny",
    "fen",
    "drob",
    "ula",
    "mir",
    "tesk",
]


@dataclass(frozen=True)
class Planted:
    query: str
    session_id: str
    archived: bool


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(3))


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat()


def _msg(role: str, content: str, ts: float, **extra: object) -> dict:
    return {"role": role, "content": content, "timestamp": round(ts, 3), "metadata": {}, **extra}


def _session(rng: random.Random, i: int, plant: str | None, plant_archived: bool) -> dict:
    sid = f"sess-{i:06d}-{rng.randrange(16**6):06x}"
    start = T0 + i * 900.0 + rng.random() * 600
    ts = start
    msgs: list[dict] = []
    if rng.random() < 0.05:
        _, u, a = rng.choice(CJK)
        for k in range(MESSAGES):
            ts += rng.uniform(30, 300)
            msgs.append(_msg("user" if k % 2 == 0 else "assistant", u if k % 2 == 0 else a, ts))
    else:
        t, a_, b_, c_ = rng.choice(TOPICS)
        fill = {"t": t, "a": a_, "b": b_, "c": c_}
        msgs.append(_msg("user", rng.choice(OPENERS).format(**fill), ts))
        while len(msgs) < MESSAGES:
            ts += rng.uniform(30, 300)
            if rng.random() < 0.1:
                args = json.dumps({"ticket": rng.randrange(9999)})
                call = {
                    "id": f"call_{rng.randrange(10**8)}",
                    "type": "function",
                    "function": {"name": "lookup_ticket", "arguments": args},
                }
                msgs.append(_msg("assistant", "", ts, tool_calls=[call]))
                result = json.dumps({"status": rng.choice(["open", "closed"]), "owner": "ops"})
                msgs.append(_msg("tool", result, ts + 1, tool_call_id=call["id"]))
                continue
            k = rng.randrange(len(USER))
            msgs.append(_msg("user", USER[k].format(**fill), ts))
            ts += rng.uniform(20, 200)
            msgs.append(_msg("assistant", ASSISTANT[k].format(**fill), ts))
        msgs = msgs[:MESSAGES]
    compacted = rng.random() < 0.33
    split = len(msgs) - WINDOW if compacted else 0
    if plant:
        lo, hi = (0, split) if (plant_archived and compacted) else (split, len(msgs))
        j = rng.randrange(lo, hi)
        msgs[j]["content"] = f"{msgs[j]['content']} Note: the {plant} is the one to use.".strip()
    archived, active = msgs[:split], msgs[split:]
    if compacted:
        summary = _msg(
            "system",
            f"[Session Summary]\nPrevious conversation: {split} messages compacted.",
            active[0]["timestamp"],
        )
        summary["metadata"] = {"compaction": True, "compacted_count": split}
        active = [summary, *active]
    meta: dict = {}
    doc = {
        "session_id": sid,
        "messages": active,
        "created_at": _iso(start),
        "updated_at": _iso(ts),
        "agent_name": rng.choice([None, None, "Gateway Assistant", "Support Bot"]),
        "user_id": rng.choice([None, None, f"user-{rng.randrange(500)}"]),
        "metadata": meta,
        "gateway_session_id": None,
        "agent_id": None,
        "runtime_state": {},
        "archived_messages": archived,
    }
    if rng.random() < 0.03:
        meta["source"] = "cron"
        doc["source"] = "cron"
    if rng.random() < 0.05:
        meta["lineage_id"] = f"lin-{rng.randrange(max(1, i // 50 + 1))}"
    return doc


def generate(folder: Path, n_sessions: int, n_planted: int, seed: int = 7) -> list[Planted]:
    """Write ``n_sessions`` files (+ locks) into ``folder``; return the planted queries."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    targets = rng.sample(range(n_sessions), n_planted)
    plants: dict[int, tuple[str, bool]] = {}
    used: set[str] = set()
    for k, i in enumerate(targets):
        while True:
            phrase = f"{_word(rng)} {_word(rng)} protocol"
            if phrase not in used:
                used.add(phrase)
                break
        plants[i] = (phrase, k % 3 == 0)
    planted: list[Planted] = []
    for i in range(n_sessions):
        phrase, arch = plants.get(i, (None, False))
        doc = _session(rng, i, phrase, arch)
        name = folder / f"{doc['session_id']}.json"
        name.write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")
        (folder / f"{doc['session_id']}.json.lock").touch()
        if phrase:
            in_archive = any(phrase in m["content"] for m in doc["archived_messages"])
            planted.append(Planted(phrase, doc["session_id"], in_archive))
    # beside the folder, not in it: every *.json in the folder is read as a session
    (folder.parent / f"{folder.name}.planted.json").write_text(json.dumps([p.__dict__ for p in planted]))
    return planted


COMMON_QUERIES = [
    "billing migration",
    "rollback plan",
    "database upgrade replicas",
    "refund policy annual",
    "incident review timeouts",
    "cache hit rates",
    "数据库迁移",
    "予算会議",
]
