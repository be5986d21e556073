"""The batch fast path for the OTLP receiver's commands (``start_episode``,
``finalize_episode``, ``record_llm_call`` beside ``add_turn``) writes exactly what the
portable path writes: the same rows in every table, byte for byte, the same results and
errors, and the same events on the bus with gap-free seqs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from memviewer.session.intent import IntentClassifier
from memviewer.session.manager import SessionManager
from memviewer.sources.genai_map import GenAIMapper
from memviewer.sources.otlp_decode import SpanRecord
from memviewer.store.db import Store

TABLES = ("sessions", "episodes", "turns", "events", "llm_calls", "llm_messages")


def chat_span(i: int, conv: str, question: str, answer: str) -> SpanRecord:
    start = 1_765_000_000.0 + i
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.conversation.id": conv,
        "gen_ai.request.model": "m-1",
        "gen_ai.usage.input_tokens": 12 + i,
        "gen_ai.input.messages": json.dumps(
            [
                {"role": "system", "parts": [{"type": "text", "content": "be brief"}]},
                {"role": "user", "parts": [{"type": "text", "content": question}]},
            ]
        ),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
        ),
    }
    return SpanRecord(
        trace_id=f"{i:032x}",
        span_id=f"{i:016x}",
        parent_span_id="",
        name="chat m-1",
        start=start,
        end=start + 0.5,
        attrs=attrs,
        resource={"service.name": "billing-agent"},
    )


def commands() -> list[dict[str, Any]]:
    """What the OTLP mapper sends for two conversations, then every way these commands fail."""
    mapper = GenAIMapper()
    spans = [
        chat_span(i, f"c-{i % 2}", f"how do I refund order {i}? " * (1 + i % 3), f"answer {i}")
        for i in range(12)
    ]
    cmds = list(mapper.map_spans(spans).commands)
    cmds += mapper.map_spans(spans[:3]).commands  # the exporter resent a batch: replays
    sid = next(c["session_id"] for c in cmds if c["op"] == "open_session")
    ep = next(c["episode_id"] for c in cmds if c["op"] == "start_episode")
    used_turn = next(c["turn_id"] for c in cmds if c["op"] == "add_turn")
    call = next(c for c in cmds if c["op"] == "record_llm_call")
    cmds += [
        {"op": "open_session", "session_id": "s-small", "agent": "a", "active_window": 4, "ts": 10.0},
        {"op": "open_session", "session_id": "s-other", "agent": "b", "ts": 10.0},
    ]
    for i in range(6):  # start_episode overflows the window: compaction inside the fast path
        cmds.append(
            {
                "op": "start_episode",
                "session_id": "s-small",
                "user_message": f"step {i} please",
                "episode_id": f"es{i}",
                "turn_id": f"us{i}",
                "meta": {"n": i} if i % 2 else None,
                "metadata": {"span": i},
                "ts": 11.0 + i,
            }
        )
        cmds.append(
            {
                "op": "finalize_episode",
                "episode_id": f"es{i}",
                "r_task": 0.5 if i == 2 else None,
                "ts": 11.5 + i,
            }
        )
    cmds += [
        {
            "op": "start_episode",
            "session_id": "s-other",
            "user_message": "x",
            "episode_id": "es0",
            "ts": 30.0,
        },
        {
            "op": "start_episode",
            "session_id": "nope",
            "user_message": "hello",
            "episode_id": "e-x",
            "ts": 30.0,
        },
        {"op": "start_episode", "session_id": "s-other", "user_message": "   ", "ts": 30.0},
        {"op": "start_episode", "session_id": "s-other", "user_message": "hi", "meta": [1], "ts": 30.0},
        {"op": "start_episode", "session_id": "s-other", "user_message": "hi", "colour": "red", "ts": 30.0},
        {"op": "start_episode", "session_id": "s-other", "ts": 30.0},
        {"op": "start_episode", "session_id": "s-other", "user_message": "hi", "ts": "yesterday-ish"},
        # a turn id that is stored already: the episode's rows roll back with the turn's
        {
            "op": "start_episode",
            "session_id": "s-other",
            "user_message": "dup",
            "episode_id": "e-dup",
            "turn_id": used_turn,
            "ts": 31.0,
        },
        {
            "op": "start_episode",
            "session_id": "s-other",
            "user_message": "dup",
            "episode_id": "e-dup",
            "turn_id": "u-dup",
            "ts": 32.0,
        },
        {"op": "finalize_episode", "episode_id": "e-dup", "r_task": True, "ts": 33.0},
        {"op": "finalize_episode", "episode_id": "e-dup", "r_task": 1, "ts": 33.0},
        {"op": "finalize_episode", "episode_id": "e-dup", "ts": 34.0},  # replay of a finalize
        {"op": "finalize_episode", "episode_id": "unknown", "ts": 34.0},
        {"op": "finalize_episode", "episode_id": ["e-dup"], "ts": 34.0},
        {"op": "finalize_episode", "episode_id": "e-dup", "reason": "x", "ts": 34.0},
        {"op": "abandon_episode", "episode_id": ep, "reason": "gone", "ts": 35.0},
        {"op": "finalize_episode", "episode_id": ep, "ts": 36.0},  # abandoned: conflict
        {"op": "close_session", "session_id": "s-other", "ts": 37.0},
        {
            "op": "start_episode",
            "session_id": "s-other",
            "user_message": "late",
            "episode_id": "e-late",
            "ts": 38.0,
        },
        {
            "op": "add_turn",
            "episode_id": "es5",
            "role": "assistant",
            "content": "after the close",
            "ts": 39.0,
        },
        {**call, "ts": 40.0},  # replay of a call
        {"op": "record_llm_call", "call_id": "c-bad", "colour": "red"},
        {
            "op": "record_llm_call",
            "call_id": "c-nosession",
            "input": "not json",
            "output": [{"role": "a"}],
            "ts": 41,
        },
        {
            "op": "record_llm_call",
            "call_id": "c-2",
            "session_id": sid,
            "input": [],
            "usage": {"input_tokens": -1},
        },
        {
            "op": "record_llm_call",
            "call_id": "c-3",
            "session_id": sid,
            "input": [{"role": "user"}],
            "ts": 42.0,
        },
    ]
    return cmds


def run(tmp: Path, name: str, fast: bool) -> tuple[list[Any], list[Any], Path]:
    store = Store.open(tmp / f"{name}.db")
    manager = SessionManager(store, classify=IntentClassifier(None).classify)
    manager.fast_batches = fast
    seen: list[Any] = []
    manager.bus.on_any(seen.append)
    results = manager.apply_batch(commands())
    store.close()
    return results, seen, tmp / f"{name}.db"


def summary_ids(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    ids = [r[0] for r in conn.execute("SELECT id FROM turns WHERE is_compaction_summary ORDER BY num")]
    conn.close()
    return ids


def named(value: Any, path: Path) -> Any:
    """``value`` as JSON with the compaction summaries' random ids named by position."""
    text = json.dumps(value, default=lambda e: e.to_dict())
    for i, sid in enumerate(summary_ids(path)):
        text = text.replace(sid, f"summary-{i}")
    return json.loads(text)


def dump(path: Path) -> dict[str, list[Any]]:
    """Every row of the tables, in storage order."""
    conn = sqlite3.connect(path)
    rows = {t: conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall() for t in TABLES}
    conn.close()
    return named(rows, path)


def test_fast_batch_writes_what_the_portable_path_writes(tmp_path: Path) -> None:
    slow_results, slow_events, slow_db = run(tmp_path, "slow", fast=False)
    fast_results, fast_events, fast_db = run(tmp_path, "fast", fast=True)
    slow, fast = dump(slow_db), dump(fast_db)
    for table in TABLES:
        assert fast[table] == slow[table], table
    assert slow["llm_calls"] and slow["llm_messages"] and summary_ids(slow_db)
    assert named(fast_results, fast_db) == named(slow_results, slow_db)
    codes = [r.get("error", {}).get("code") for r in fast_results]
    assert "conflict" in codes and "session_not_found" in codes and "invalid_argument" in codes
    assert "internal" in codes  # the stored turn id: the whole start_episode rolled back
    # the bus saw the same events, in order, and their seqs have no gap
    assert named(fast_events, fast_db) == named(slow_events, slow_db)
    seqs = [e.seq for e in fast_events]
    assert seqs == list(range(1, len(seqs) + 1))
    kinds = {e.kind for e in fast_events}
    assert {"episode.started", "episode.finalized", "llm_call.recorded", "session.compacted"} <= kinds


def test_the_fast_path_is_taken_on_sqlite(tmp_path: Path, monkeypatch: Any) -> None:
    """The equivalence above would hold trivially if both runs went the portable way."""
    store = Store.open(tmp_path / "a.db")
    manager = SessionManager(store)
    portable: list[str] = []
    real = manager.apply

    def counting(cmd: dict[str, Any]) -> dict[str, Any]:
        portable.append(cmd["op"])
        return real(cmd)

    monkeypatch.setattr(manager, "apply", counting)
    results = manager.apply_batch(commands()[:40])
    assert all("ok" in r for r in results)
    assert set(portable) == {"open_session"}
    store.close()
