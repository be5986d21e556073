"""A deterministic two-week demo history, as protocol commands.

``build_scenario(now)`` returns the commands ``SessionManager.apply`` takes
(``{"op": ..., ...}``), in time order within each session. Ids are derived
from stable names (not from the clock), so applying the scenario twice
creates nothing new; only the timestamps follow ``now`` (spread over the
last ~14 days). What it contains, on purpose:

* several agents and users: a coding agent (alice, bob), a support bot, a
  research agent speaking Chinese (chen) and a cron-driven audit agent;
* coding tasks with tool turns (assistant ``tool_calls`` + ``tool`` turns with
  ``metadata.tool``), memory probes, chit-chat, a slash command, an abandoned
  episode and a session left open;
* a long session with ``active_window=30`` that compacts (archived turns and
  a compaction summary);
* automated sessions (``source="cron"``, many messages per hour);
* a lineage of three sessions sharing ``lineage_id`` and ``root_session_id``,
  and two sibling sessions that share only ``parent_session_id``;
* unique facts to search for: "deploy token XZ99", "billing migration to Adyen".
"""

from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass, field
from typing import Any

from memviewer.demo import scripts as S
from memviewer.demo.scripts import EpisodeScript

DAY = 86_400.0
SEED = 20_240_601


def stable_id(prefix: str, name: str) -> str:
    """A readable id that depends only on ``name`` (so replays are no-ops)."""
    return f"{prefix}demo-{hashlib.sha1(name.encode()).hexdigest()[:20]}"


@dataclass
class _SessionPlan:
    key: str
    agent: str
    scope_id: str
    days_ago: float
    episodes: list[EpisodeScript]
    scope: str = "user"
    title: str = ""
    source: str | None = None
    active_window: int | None = None
    lineage_of: str | None = None  # key of the lineage root
    parent_of: str | None = None  # key of the parent session
    close: bool = True
    turn_gap: tuple[float, float] = (4.0, 40.0)
    episode_gap: tuple[float, float] = (120.0, 1800.0)
    meta: dict[str, Any] = field(default_factory=dict)


def _plans() -> list[_SessionPlan]:
    return [
        _SessionPlan(
            "alice-scheduler",
            "coder",
            "u-alice",
            13.2,
            [S.MORNING, S.FLAKY_TEST, S.THANKS],
            meta={"repo": "acme/scheduler"},
        ),
        _SessionPlan(
            "alice-scheduler-changelog",
            "coder",
            "u-alice",
            13.1,
            [S.CHANGELOG],
            parent_of="alice-scheduler",
            meta={"subagent": "changelog-writer"},
        ),
        _SessionPlan(
            "alice-scheduler-docs",
            "coder",
            "u-alice",
            13.1,
            [S.DOCS_FAKECLOCK],
            parent_of="alice-scheduler",
            meta={"subagent": "docs-writer"},
        ),
        _SessionPlan(
            "nightly-1",
            "nightly-audit",
            "ops",
            12.6,
            [S.nightly_audit(1)],
            scope="agent",
            source="cron",
            turn_gap=(2.0, 9.0),
        ),
        _SessionPlan(
            "alice-webhooks",
            "coder",
            "u-alice",
            11.4,
            [S.WEBHOOK_BACKOFF, S.STRUCTLOG],
            meta={"repo": "acme/notify"},
        ),
        _SessionPlan(
            "bob-billing-1",
            "coder",
            "u-bob",
            10.3,
            [S.ADYEN_PLAN],
            lineage_of="bob-billing-1",
            title="Billing migration to Adyen",
        ),
        _SessionPlan("chen-research-1", "research-agent", "u-chen", 9.5, [S.ZH_SUMMARY, S.ZH_THANKS]),
        _SessionPlan(
            "nightly-2",
            "nightly-audit",
            "ops",
            9.6,
            [S.nightly_audit(2)],
            scope="agent",
            source="cron",
            turn_gap=(2.0, 9.0),
        ),
        _SessionPlan(
            "bob-billing-2",
            "coder",
            "u-bob",
            8.2,
            [S.ADYEN_WEBHOOKS],
            lineage_of="bob-billing-1",
            title="Billing migration to Adyen (webhooks)",
        ),
        _SessionPlan("support-staging", "support-bot", "u-bob", 6.9, [S.DEPLOY_TOKEN, S.THANKS]),
        _SessionPlan(
            "bob-exporters",
            "coder",
            "u-bob",
            5.4,
            S.csv_exporter_rounds(5),
            active_window=30,
            title="Streaming CSV exporters",
            meta={"repo": "acme/exports"},
        ),
        _SessionPlan(
            "alice-orders", "coder", "u-alice", 4.1, [S.ORDERS_SLOW, S.BACKOFF_PROBE, S.EXPORT_META]
        ),
        _SessionPlan(
            "bob-billing-3",
            "coder",
            "u-bob",
            3.0,
            [S.ADYEN_BACKFILL, S.ADYEN_PROBE],
            lineage_of="bob-billing-1",
            title="Billing migration to Adyen (backfill)",
        ),
        _SessionPlan(
            "nightly-3",
            "nightly-audit",
            "ops",
            1.6,
            [S.nightly_audit(3)],
            scope="agent",
            source="cron",
            turn_gap=(2.0, 9.0),
        ),
        _SessionPlan(
            "chen-research-2", "research-agent", "u-chen", 0.7, [S.ZH_BATCH, S.ZH_CACHE_PROBE], close=False
        ),
    ]


def _episode_commands(
    sid: str, ep_key: str, script: EpisodeScript, t: float, rng: random.Random, turn_gap: tuple[float, float]
) -> tuple[list[dict[str, Any]], float]:
    eid = stable_id("e-", ep_key)
    cmds: list[dict[str, Any]] = [
        {
            "op": "start_episode",
            "session_id": sid,
            "user_message": script.user,
            "episode_id": eid,
            "turn_id": stable_id("t-", f"{ep_key}/0"),
            "ts": round(t, 3),
        }
    ]
    for i, turn in enumerate(script.turns, start=1):
        gap = rng.uniform(*turn_gap) if turn.role != "tool" else rng.uniform(0.3, 4.0)
        t += gap
        cmd: dict[str, Any] = {
            "op": "add_turn",
            "episode_id": eid,
            "role": turn.role,
            "content": turn.content,
            "turn_id": stable_id("t-", f"{ep_key}/{i}"),
            "ts": round(t, 3),
        }
        if turn.metadata is not None:
            cmd["metadata"] = turn.metadata
        if turn.tool_calls is not None:
            cmd["tool_calls"] = turn.tool_calls
        if turn.tool_call_id is not None:
            cmd["tool_call_id"] = turn.tool_call_id
        cmds.append(cmd)
    t += 1.0
    if script.outcome == "finalize":
        cmds.append({"op": "finalize_episode", "episode_id": eid, "r_task": script.r_task, "ts": round(t, 3)})
    elif script.outcome == "abandon":
        cmds.append(
            {"op": "abandon_episode", "episode_id": eid, "reason": script.abandon_reason, "ts": round(t, 3)}
        )
    return cmds, t


def build_scenario(now: float | None = None, seed: int = SEED) -> list[dict[str, Any]]:
    """Every command of the demo history, sessions in time order."""
    now = time.time() if now is None else now
    rng = random.Random(seed)
    commands: list[dict[str, Any]] = []
    plans = sorted(_plans(), key=lambda p: -p.days_ago)
    for plan in plans:
        sid = stable_id("s-", plan.key)
        t = now - plan.days_ago * DAY + rng.uniform(0, 600)
        open_cmd: dict[str, Any] = {
            "op": "open_session",
            "session_id": sid,
            "agent": plan.agent,
            "scope": plan.scope,
            "scope_id": plan.scope_id,
            "ts": round(t, 3),
            "meta": {"demo": True, **plan.meta},
        }
        if plan.title:
            open_cmd["title"] = plan.title
        if plan.source:
            open_cmd["source"] = plan.source
        if plan.active_window:
            open_cmd["active_window"] = plan.active_window
            open_cmd["retention"] = "compact"
        if plan.lineage_of:
            open_cmd["lineage_id"] = stable_id("lin-", plan.lineage_of)
            open_cmd["root_session_id"] = stable_id("s-", plan.lineage_of)
        if plan.parent_of:
            open_cmd["parent_session_id"] = stable_id("s-", plan.parent_of)
        commands.append(open_cmd)
        for n, script in enumerate(plan.episodes):
            if n:
                t += rng.uniform(*plan.episode_gap)
            t += rng.uniform(1.0, 5.0)
            cmds, t = _episode_commands(sid, f"{plan.key}/{n}/{script.key}", script, t, rng, plan.turn_gap)
            commands.extend(cmds)
        if plan.close:
            commands.append({"op": "close_session", "session_id": sid, "ts": round(t + 30.0, 3)})
    return commands


def session_ids() -> list[str]:
    """The scenario's session ids (they depend only on the plans' names, never the clock)."""
    return [stable_id("s-", plan.key) for plan in _plans()]


def describe(commands: list[dict[str, Any]]) -> dict[str, int]:
    """How many sessions, episodes and turns a command list creates."""
    ops: dict[str, int] = {}
    for c in commands:
        ops[c["op"]] = ops.get(c["op"], 0) + 1
    return {
        "sessions": ops.get("open_session", 0),
        "episodes": ops.get("start_episode", 0),
        "turns": ops.get("start_episode", 0) + ops.get("add_turn", 0),
        "commands": len(commands),
    }


# Things worth trying once the demo is loaded (printed by `memviewer demo`).
TRY = (
    'memviewer search "deploy token XZ99"',
    'memviewer search "billing migration to Adyen"',
    'memviewer recall "what backoff did we pick for webhooks?" --scope user --scope-id u-alice',
    'memviewer search "缓存策略"',
    "memviewer sessions",
    "memviewer demo --remove    # takes the demo out again: its sessions and --live's, nothing else",
)
