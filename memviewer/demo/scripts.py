"""What the demo agents say: episode scripts shared by the static scenario and the live agent.

Each script is one user request and the agent's whole response arc, with
tool calls in the OpenAI shape (assistant ``tool_calls`` followed by a
``tool`` turn carrying ``tool_call_id`` and ``metadata.tool``), so the viewer
shows what real agent traffic looks like. A few facts are planted on purpose
("deploy token XZ99", "billing migration to Adyen", the webhook backoff
numbers) so that search and recall have something unique to find.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TurnSpec:
    role: str
    content: str
    metadata: dict[str, Any] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


@dataclass(frozen=True)
class EpisodeScript:
    key: str
    user: str
    turns: tuple[TurnSpec, ...]
    outcome: str = "finalize"  # finalize | abandon | open
    r_task: float | None = None
    abandon_reason: str | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)


def say(text: str, **meta: Any) -> TurnSpec:
    return TurnSpec("assistant", text, metadata=meta or None)


def tool(
    call_id: str,
    name: str,
    args: dict[str, Any],
    output: str,
    *,
    lead: str = "",
    ok: bool = True,
    duration_ms: int = 120,
) -> tuple[TurnSpec, TurnSpec]:
    """An assistant tool call and the tool's answer."""
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
    }
    return (
        TurnSpec("assistant", lead, tool_calls=[call]),
        TurnSpec(
            "tool",
            output,
            tool_call_id=call_id,
            metadata={"tool": name, "ok": ok, "duration_ms": duration_ms},
        ),
    )


def _flat(*parts: TurnSpec | tuple[TurnSpec, ...]) -> tuple[TurnSpec, ...]:
    out: list[TurnSpec] = []
    for p in parts:
        out.extend(p if isinstance(p, tuple) else (p,))
    return tuple(out)


# -- coding tasks ------------------------------------------------------------------------------
FLAKY_TEST = EpisodeScript(
    "flaky-test",
    "Fix the flaky test in tests/test_scheduler.py — it fails about one run in ten on CI.",
    _flat(
        tool(
            "call_fl1",
            "read_file",
            {"path": "tests/test_scheduler.py"},
            "def test_next_fire_time():\n    job = Job(cron='0 9 * * *')\n"
            "    assert job.next_fire_time(datetime.now()) == today_at(9)\n",
            lead="Reading the test and the scheduler first.",
        ),
        tool(
            "call_fl2",
            "run_tests",
            {"args": "-k scheduler --count 20"},
            "18 passed, 2 failed\nFAILED test_next_fire_time - AssertionError: expected 09:00:00, "
            "got 09:00:01",
            duration_ms=8400,
        ),
        say(
            "The test reads the wall clock twice; when a second ticks between the two reads the "
            "scheduler rounds up. I'll inject a FakeClock instead of calling datetime.now()."
        ),
        tool(
            "call_fl3",
            "edit_file",
            {"path": "scheduler/core.py", "patch": "+clock: Clock = SystemClock()"},
            "patched 2 files (+14 −5)",
        ),
        tool(
            "call_fl4",
            "run_tests",
            {"args": "-k scheduler --count 200"},
            "200 passed in 41.2s",
            duration_ms=41200,
        ),
        say(
            "Done. `next_fire_time` now takes the injected clock and the test freezes it with "
            "FakeClock; 200 consecutive runs pass."
        ),
    ),
    r_task=1.0,
    tags=("task", "tools"),
)

WEBHOOK_BACKOFF = EpisodeScript(
    "webhook-backoff",
    "Add retry with exponential backoff to the webhook sender: at most 5 attempts, with jitter.",
    _flat(
        tool(
            "call_wb1",
            "grep",
            {"pattern": "def send_webhook", "path": "src/"},
            "src/notify/webhooks.py:42:def send_webhook(url, payload, timeout=5):",
            lead="Looking for the sender.",
        ),
        tool(
            "call_wb2",
            "read_file",
            {"path": "src/notify/webhooks.py", "lines": "30-80"},
            "def send_webhook(url, payload, timeout=5):\n    resp = session.post(url, json=payload, "
            "timeout=timeout)\n    resp.raise_for_status()\n",
        ),
        say(
            "Plan: retry on connection errors, 429 and 5xx only; base delay 0.5 s doubling up to a "
            "30 s cap, full jitter, 5 attempts in total; give up with a dead-letter entry."
        ),
        tool("call_wb3", "edit_file", {"path": "src/notify/webhooks.py"}, "patched 1 file (+38 −3)"),
        tool("call_wb4", "run_tests", {"args": "tests/notify"}, "27 passed in 3.1s", duration_ms=3100),
        say(
            "Webhook retries are in: backoff base 0.5 s, cap 30 s, full jitter, 5 attempts, then the "
            "payload goes to the webhook_dead_letters table."
        ),
    ),
    r_task=0.9,
    tags=("task", "tools", "fact"),
)

ORDERS_SLOW = EpisodeScript(
    "orders-slow",
    "Why is the /orders endpoint so slow for big customers? Please optimize it.",
    _flat(
        tool(
            "call_or1",
            "run_sql",
            {
                "query": "EXPLAIN QUERY PLAN SELECT * FROM orders WHERE "
                "customer_id = ? ORDER BY created_at DESC LIMIT 50"
            },
            "SCAN orders\nUSE TEMP B-TREE FOR ORDER BY",
            lead="Checking the query plan.",
        ),
        say(
            "It scans the whole orders table and sorts in memory. A composite index on "
            "(customer_id, created_at) turns this into an index range scan."
        ),
        tool(
            "call_or2", "write_file", {"path": "migrations/0042_orders_customer_created.sql"}, "wrote 3 lines"
        ),
        tool(
            "call_or3",
            "run_sql",
            {"query": "EXPLAIN QUERY PLAN …"},
            "SEARCH orders USING INDEX ix_orders_customer_created (customer_id=?)",
        ),
        say(
            "Added migration 0042 with ix_orders_customer_created; p95 for the largest customer "
            "drops from 2.4 s to 38 ms on the staging snapshot."
        ),
    ),
    r_task=1.0,
    tags=("task", "tools"),
)

DEPLOY_TOKEN = EpisodeScript(
    "deploy-token",
    "The staging deploy keeps failing with 401 Unauthorized since this morning. Can you debug it?",
    _flat(
        tool(
            "call_dt1",
            "read_file",
            {"path": ".ci/deploy-staging.log", "tail": 20},
            "POST https://deploy.internal/api/releases -> 401\nerror: token expired "
            "(issued 2024-01-03, ttl 90d)",
            lead="Checking the CI log.",
        ),
        say(
            "The deploy token XZ99 used by the staging pipeline expired; the deploy API rejects it "
            "with 401. Rotate deploy token XZ99 in the vault at ci/staging/deploy-token and re-run "
            "the pipeline."
        ),
        tool(
            "call_dt2",
            "vault_rotate",
            {"path": "ci/staging/deploy-token"},
            "rotated: new version 7 (old version revoked)",
        ),
        tool(
            "call_dt3",
            "run_pipeline",
            {"name": "deploy-staging"},
            "pipeline #4812 succeeded in 3m12s",
            duration_ms=192000,
        ),
        say(
            "Rotated the staging deploy token (the old one, XZ99, is revoked) and the staging deploy "
            "is green again: pipeline #4812."
        ),
    ),
    r_task=1.0,
    tags=("task", "tools", "fact"),
)

ADYEN_PLAN = EpisodeScript(
    "adyen-plan",
    "Plan the billing migration to Adyen: we need to move card payments off Stripe by the end of March.",
    _flat(
        say(
            "Billing migration to Adyen, first cut:\n1. Dual-write customers and payment methods "
            "(Adyen tokenisation via the Checkout API)\n2. New card payments on Adyen behind the "
            "flag billing.adyen_cards\n3. Webhooks: AUTHORISATION, CAPTURE, REFUND\n4. Backfill "
            "historical invoices\n5. Switch off Stripe for cards on March 31."
        ),
        tool(
            "call_ad1",
            "create_ticket",
            {"title": "Billing migration to Adyen", "epic": True},
            "created BILL-311",
        ),
        say("Created epic BILL-311 for the billing migration to Adyen and split it into the five steps."),
    ),
    r_task=0.8,
    tags=("task", "fact", "lineage"),
)

ADYEN_WEBHOOKS = EpisodeScript(
    "adyen-webhooks",
    "Continue the billing migration to Adyen: write the webhook handler for AUTHORISATION events.",
    _flat(
        tool(
            "call_aw1",
            "read_file",
            {"path": "billing/providers/stripe_webhooks.py"},
            "def handle(event):\n    if event.type == 'payment_intent.succeeded': ...",
        ),
        say(
            "Adyen sends notification items in batches and expects '[accepted]' within 10 s, so the "
            "handler only verifies the HMAC signature and enqueues; a worker does the rest."
        ),
        tool("call_aw2", "write_file", {"path": "billing/providers/adyen_webhooks.py"}, "wrote 96 lines"),
        tool("call_aw3", "run_tests", {"args": "billing/tests/test_adyen_webhooks.py"}, "12 passed in 0.9s"),
        say("AUTHORISATION handler done (HMAC check, idempotent on pspReference, queued processing)."),
    ),
    r_task=1.0,
    tags=("task", "tools", "lineage"),
)

ADYEN_BACKFILL = EpisodeScript(
    "adyen-backfill",
    "Billing migration to Adyen, part 3: write the backfill job for historical invoices.",
    _flat(
        tool(
            "call_ab1",
            "run_sql",
            {"query": "SELECT count(*) FROM invoices WHERE provider='stripe'"},
            "count\n182340",
        ),
        say(
            "182k invoices. The backfill runs in chunks of 5,000 ordered by id, records the last id in "
            "backfill_state so it can resume, and never touches invoices created after the cutover."
        ),
        tool("call_ab2", "write_file", {"path": "billing/jobs/backfill_adyen.py"}, "wrote 140 lines"),
        say("Backfill job ready; dry run on staging migrated 182,340 invoices in 11 minutes."),
    ),
    r_task=0.9,
    tags=("task", "lineage"),
)

CHANGELOG = EpisodeScript(
    "changelog",
    "Write the changelog entry for the scheduler fix.",
    (
        say(
            "### Fixed\n- Scheduler: `next_fire_time` no longer drifts by one second when the clock "
            "ticks between reads (injected clock; flaky test_scheduler fixed)."
        ),
    ),
    r_task=1.0,
    tags=("task", "sibling"),
)

DOCS_FAKECLOCK = EpisodeScript(
    "docs-fakeclock",
    "Update docs/testing.md to explain how to use FakeClock in tests.",
    _flat(
        tool("call_dc1", "edit_file", {"path": "docs/testing.md"}, "patched 1 file (+22 −0)"),
        say(
            "Added a 'Time in tests' section: inject `clock=FakeClock(start=...)`, advance it with "
            "`clock.tick(seconds)`, never call datetime.now() in code under test."
        ),
    ),
    r_task=1.0,
    tags=("task", "sibling"),
)

STRUCTLOG = EpisodeScript(
    "structlog",
    "Migrate the logging config to structlog.",
    (say("Sure — first I'll list every logging.getLogger call site so we can migrate module by module."),),
    outcome="abandon",
    abandon_reason="user switched topic",
    tags=("task", "abandoned"),
)


def csv_exporter_rounds(n_rounds: int) -> list[EpisodeScript]:
    """A long refactor (many tool turns) for the session that compacts."""
    parts = ["orders", "invoices", "customers", "refunds", "payouts", "disputes"]
    out: list[EpisodeScript] = []
    for r in range(n_rounds):
        table = parts[r % len(parts)]
        turns: list[TurnSpec] = []
        for step in range(4):
            cid = f"call_csv{r}_{step}"
            turns.extend(
                tool(
                    cid,
                    ("read_file", "edit_file", "run_tests", "run_benchmark")[step],
                    {"path": f"export/{table}.py", "step": step},
                    (
                        f"export/{table}.py: class {table.title()}Exporter(BaseExporter) …",
                        f"patched export/{table}.py (+{18 + step} −{9 + r})",
                        f"{40 + r} passed in {1.5 + r / 10:.1f}s",
                        f"{table}: 1,000,000 rows in {9.5 - r * 0.7:.1f}s, peak RSS {64 + r} MiB",
                    )[step],
                    lead=f"Step {step + 1} for {table}.",
                )
            )
        turns.append(
            say(
                f"The {table} exporter now streams rows with csv.writer over a server-side "
                f"cursor instead of building a list; memory stays flat."
            )
        )
        out.append(
            EpisodeScript(
                f"csv-{table}",
                f"Port the {table} CSV exporter to streaming writes (it runs out of memory on big exports).",
                tuple(turns),
                r_task=1.0,
                tags=("task", "tools", "compaction"),
            )
        )
    return out


# -- memory probes, chit-chat, meta --------------------------------------------------------------
BACKOFF_PROBE = EpisodeScript(
    "backoff-probe",
    "What did we decide about the retry backoff for the webhook sender last time?",
    (
        say(
            "We settled on exponential backoff with base 0.5 s, a 30 s cap, full jitter and 5 attempts; "
            "after that the payload goes to webhook_dead_letters."
        ),
    ),
    tags=("memory_probe",),
)

ADYEN_PROBE = EpisodeScript(
    "adyen-probe",
    "Do you remember which payment provider we are migrating billing to, and the deadline?",
    (
        say(
            "Adyen — the billing migration to Adyen moves card payments off Stripe by March 31 "
            "(epic BILL-311)."
        ),
    ),
    tags=("memory_probe",),
)

THANKS = EpisodeScript(
    "thanks",
    "thanks, that's all for today!",
    (say("You're welcome — see you tomorrow."),),
    tags=("chitchat",),
)
MORNING = EpisodeScript(
    "morning", "good morning", (say("Good morning! What are we working on today?"),), tags=("chitchat",)
)
EXPORT_META = EpisodeScript(
    "export-meta",
    "/memory export --format md",
    (
        TurnSpec(
            "system", "memory export started: 14 sessions → memory-export.md", metadata={"command": True}
        ),
    ),
    tags=("meta",),
)

# -- Chinese -----------------------------------------------------------------------------------------
ZH_SUMMARY = EpisodeScript(
    "zh-summary",
    "帮我总结一下这篇关于向量数据库索引的论文，重点是 IVF-PQ 和 HNSW 的区别。",
    _flat(
        tool(
            "call_zh1",
            "fetch_url",
            {"url": "https://example.org/papers/ann-index-survey.pdf"},
            "Approximate nearest neighbour search: a survey of IVF-PQ, HNSW and DiskANN …",
            lead="我先读一下论文。",
        ),
        say(
            "总结：HNSW 是基于图的索引，召回率高、查询快，但内存占用大、构建慢；"
            "IVF-PQ 先聚类再做乘积量化，内存小、适合上亿向量，但召回率依赖 nprobe 参数。"
            "论文建议：千万级以下用 HNSW，更大规模用 IVF-PQ 并加一次精排。"
        ),
    ),
    r_task=0.9,
    tags=("task", "zh"),
)

ZH_BATCH = EpisodeScript(
    "zh-batch",
    "帮我改一下这个函数，让它支持批量插入，每批 500 条。",
    _flat(
        tool(
            "call_zh2",
            "read_file",
            {"path": "store/writer.py"},
            "def insert(row):\n    conn.execute(INSERT, row)\n    conn.commit()\n",
        ),
        say("现在每插入一行就提交一次事务，很慢。我改成 executemany，每 500 条提交一次。"),
        tool("call_zh3", "edit_file", {"path": "store/writer.py"}, "patched 1 file (+17 −4)"),
        say("改好了：insert_many(rows, batch=500)，在测试数据上从 12 秒降到 0.8 秒。"),
    ),
    r_task=1.0,
    tags=("task", "zh", "tools"),
)

ZH_CACHE_PROBE = EpisodeScript(
    "zh-cache-probe",
    "你还记得上次我们讨论的缓存策略吗？",
    (say("记得：热点会话用 LRU 缓存，容量 512 条，过期时间 10 分钟；写入时主动失效，避免读到旧数据。"),),
    tags=("memory_probe", "zh"),
)

ZH_THANKS = EpisodeScript("zh-thanks", "谢谢！", (say("不客气，有问题随时找我。"),), tags=("chitchat", "zh"))


# -- the automated (cron) agent --------------------------------------------------------------------
def nightly_audit(night: int) -> EpisodeScript:
    """An automated dependency audit: many quick tool turns (automated-session demotion)."""
    pkgs = ["requests", "urllib3", "cryptography", "jinja2", "pyyaml", "pillow", "lxml", "sqlalchemy"]
    turns: list[TurnSpec] = []
    for i, pkg in enumerate(pkgs):
        turns.extend(
            tool(
                f"call_na{night}_{i}",
                "pip_audit",
                {"package": pkg},
                f"{pkg}: no known vulnerabilities"
                if (i + night) % 5
                else f"{pkg}: 1 advisory (GHSA-{night:02d}{i:02d}-demo), fixed in a newer release",
                duration_ms=300 + 40 * i,
            )
        )
    turns.append(
        say(
            f"Nightly audit #{night}: {len(pkgs)} packages checked; advisories filed as "
            f"tickets SEC-{400 + night}.",
            automated=True,
        )
    )
    return EpisodeScript(
        f"nightly-{night}",
        f"Run the nightly dependency audit (night {night}).",
        tuple(turns),
        r_task=None,
        tags=("automated",),
    )


LIVE_LIBRARY: tuple[EpisodeScript, ...] = (
    FLAKY_TEST,
    WEBHOOK_BACKOFF,
    ORDERS_SLOW,
    DEPLOY_TOKEN,
    BACKOFF_PROBE,
    THANKS,
    MORNING,
    ZH_SUMMARY,
    ZH_BATCH,
    ZH_CACHE_PROBE,
    ZH_THANKS,
    ADYEN_PROBE,
    EXPORT_META,
    STRUCTLOG,
)
