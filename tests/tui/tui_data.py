"""Deterministic fixture memory for the viewer tests and snapshots.

Written through the real ``SessionManager`` (so intent, compaction and events
are the product's own), with fixed ids and timestamps so SVG snapshots do not
drift. Covers: a compacted session with tool calls and markup-looking text,
an automated (cron) session, Chinese text, two sessions sharing a lineage,
and an imported history without episodes.
"""

from __future__ import annotations

from typing import Any

T0 = 1740819600.0  # 2025-03-01T09:00:00Z

TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "search_papers", "arguments": '{"q": "retrieval augmented generation", "k": 3}'},
}
LONG_ANSWER = "\n".join(
    [
        "The second paper proposes a retriever-reader pipeline:",
        "1. dense passage retrieval over a Wikipedia index;",
        "2. a seq2seq reader that conditions on the top passages;",
        "3. end-to-end training of the query encoder;",
        "4. marginalisation over retrieved documents;",
        "5. evaluation on open-domain QA;",
        "6. ablations on the number of passages;",
        "7. a note on index refresh;",
        "[bold]this is not markup[/bold] and **this is not markdown**",
    ]
)


def fixture_intent(message: str) -> Any:
    """A fixed classifier, so snapshots do not follow changes to the real intent rules."""
    from memviewer.session.intent import IntentResult

    if message.startswith("Remember"):
        return IntentResult("memory_probe", 0.9, "fixture.memory_probe.remember", "heuristic")
    if message.startswith("请"):
        return IntentResult("task", 0.9, "fixture.zh.task.please", "heuristic")
    return IntentResult("task", 0.88, "fixture.task.imperative", "heuristic")


def populate(service: Any) -> dict[str, Any]:
    """Fill ``service`` with the fixture sessions; returns handy ids."""
    m = service.manager
    m.classifier = fixture_intent
    t = T0

    def tick(seconds: float = 30.0) -> float:
        nonlocal t
        t += seconds
        return t

    # 1. compacted research session (window 6) with a tool call
    m.open_session(
        session_id="s-research",
        agent="researcher",
        scope="user",
        scope_id="alice",
        active_window=6,
        ts=tick(),
    )
    m.start_episode(
        "s-research",
        "Find the three most cited papers on retrieval augmented generation",
        episode_id="e-r1",
        turn_id="t-r1",
        ts=tick(),
    )
    m.add_turn(
        "e-r1", "assistant", "Searching the paper index.", turn_id="t-r2", tool_calls=[TOOL_CALL], ts=tick()
    )
    m.add_turn(
        "e-r1",
        "tool",
        '[{"title": "RAG", "citations": 4100}, {"title": "REALM", "citations": 1900}]',
        turn_id="t-r3",
        tool_call_id="call_1",
        ts=tick(),
    )
    m.add_turn("e-r1", "assistant", "The most cited are RAG, REALM and FiD.", turn_id="t-r4", ts=tick())
    m.finalize_episode("e-r1", r_task=0.9, ts=tick())
    m.start_episode(
        "s-research",
        "Remember that I prefer summaries under 100 words",
        episode_id="e-r2",
        turn_id="t-r5",
        ts=tick(),
    )
    m.add_turn("e-r2", "assistant", "Noted: summaries under 100 words.", turn_id="t-r6", ts=tick())
    m.finalize_episode("e-r2", r_task=1.0, ts=tick())
    m.start_episode("s-research", "Summarize the second paper", episode_id="e-r3", turn_id="t-r7", ts=tick())
    m.add_turn("e-r3", "assistant", LONG_ANSWER, turn_id="t-r8", metadata={"model": "fixture-1"}, ts=tick())
    m.finalize_episode("e-r3", r_task=0.7, ts=tick())

    # 2. automated nightly job
    tick(3600)
    m.open_session(
        session_id="s-nightly", agent="reporter", source="cron", title="Nightly metrics digest", ts=tick()
    )
    m.start_episode(
        "s-nightly", "Generate the nightly metrics digest", episode_id="e-n1", turn_id="t-n1", ts=tick()
    )
    m.add_turn(
        "e-n1", "assistant", "Digest: 3 deploys, 0 incidents, p95 latency 180 ms.", turn_id="t-n2", ts=tick()
    )
    m.finalize_episode("e-n1", ts=tick())

    # 3. Chinese conversation
    tick(3600)
    m.open_session(session_id="s-zh", agent="助手", scope="user", scope_id="bob", ts=tick())
    m.start_episode("s-zh", "请帮我总结一下昨天的会议记录", episode_id="e-z1", turn_id="t-z1", ts=tick())
    m.add_turn(
        "e-z1",
        "assistant",
        "好的，会议主要讨论了三个议题：预算、招聘和发布时间表。",
        turn_id="t-z2",
        ts=tick(),
    )
    m.finalize_episode("e-z1", r_task=0.8, ts=tick())

    # 4. two sessions of one lineage
    tick(3600)
    for n, sid in enumerate(("s-launch-1", "s-launch-2"), 1):
        m.open_session(session_id=sid, agent="planner", lineage_id="lin-42", thread_id="launch", ts=tick())
        m.start_episode(
            sid, f"Plan the product launch, part {n}", episode_id=f"e-l{n}", turn_id=f"t-l{n}a", ts=tick()
        )
        m.add_turn(
            f"e-l{n}",
            "assistant",
            f"Launch plan part {n}: pick a date, brief press, ship.",
            turn_id=f"t-l{n}b",
            ts=tick(),
        )
        m.finalize_episode(f"e-l{n}", ts=tick())

    # 5. imported history (archived turns + summary, no episodes), still open
    tick(3600)
    turns = [
        {
            "id": "t-i1",
            "role": "user",
            "content": "What is our refund policy?",
            "timestamp": tick(),
            "archived": True,
        },
        {
            "id": "t-i2",
            "role": "assistant",
            "content": "Refunds within 30 days.",
            "timestamp": tick(),
            "archived": True,
        },
        {
            "id": "t-i3",
            "role": "system",
            "content": "[compaction summary] 2 earlier turns were archived.",
            "timestamp": tick(),
            "is_compaction_summary": True,
            "replaced_count": 2,
            "meta": {"compaction": True, "compacted_count": 2},
        },
        {"id": "t-i4", "role": "user", "content": "And for digital goods?", "timestamp": tick()},
        {
            "id": "t-i5",
            "role": "assistant",
            "content": "Digital goods are refundable within 14 days.",
            "timestamp": tick(),
        },
    ]
    service.import_session(
        {
            "id": "s-imported",
            "agent": "support",
            "scope": "user",
            "scope_id": "carol",
            "title": "Refund policy questions",
            "started_at": turns[0]["timestamp"],
            "last_seen_at": turns[-1]["timestamp"],
            "status": "closed",
            "source": "praisonai",
        },
        turns,
    )
    return {
        "compacted": "s-research",
        "automated": "s-nightly",
        "chinese": "s-zh",
        "lineage": ("s-launch-1", "s-launch-2"),
        "imported": "s-imported",
    }


def bulk_sessions(service: Any, n: int, *, start: float = T0, turns_per_session: int = 2) -> None:
    """``n`` small imported sessions, fast (one transaction per 500), for paging tests and benches."""
    store = service.store
    from memviewer.store import repos

    for base in range(0, n, 500):
        with store.write() as tx:
            for i in range(base, min(n, base + 500)):
                ts = start + i
                sid = f"bulk-{i:06d}"
                repos.insert_session(
                    tx.conn,
                    repos.new_session_row(
                        sid,
                        ts,
                        agent=f"agent-{i % 7}",
                        scope_id=f"agent-{i % 7}",
                        title=f"bulk session {i:06d}",
                        source="cron" if i % 10 == 0 else None,
                    ),
                )
                repos.insert_turns(
                    tx.conn,
                    [
                        repos.new_turn_row(
                            f"{sid}-t{j}",
                            sid,
                            None,
                            j,
                            ("user", "assistant")[j % 2],
                            f"message {j} of {sid}",
                            ts + j,
                        )
                        for j in range(turns_per_session)
                    ],
                )
