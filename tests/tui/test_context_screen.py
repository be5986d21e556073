"""Context screen: one LLM call's window by part, from a Session's turn and from the recall
log, stepping between calls, and from a recalled item to its turn and to recall --why."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from tui_helpers import cell_texts, screen_text, wait_until

from memviewer.tui.expected import expected_turns
from memviewer.tui.screens.context import ContextScreen, bar
from memviewer.tui.screens.recall import RecallScreen
from memviewer.tui.screens.recalls import RecallEntryScreen
from memviewer.tui.screens.session import SessionScreen

SUMMARY_START = "[compaction summary]"


def _m(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": text}


@pytest.fixture
def called(filled: Any) -> Any:
    turns = {t["turn_id"]: t for t in filled.session("s-research")["turns"]}
    summary = next(t["content"] for t in turns.values() if t["is_compaction_summary"])
    now = time.time()
    prompt = [
        _m("system", "You are a research assistant."),
        _m("system", summary),
        _m("user", turns["t-r5"]["content"]),
        _m("assistant", turns["t-r6"]["content"]),
        _m("user", turns["t-r7"]["content"]),
    ]
    results = filled.apply_batch(
        [
            {
                "op": "record_recall",
                "recall_id": "r-ctx",
                "ts": now,
                "query": "which papers are most cited",
                "session_id": "s-research",
                "results": [
                    {"turn_id": "t-r3", "score": 0.9},  # archived, and not in the summary
                    {"turn_id": "t-r4", "score": 0.8},  # archived, but the summary quotes it
                    {"turn_id": "t-r6", "score": 0.5},
                    {"text": "a vector-store note about FiD readers", "score": 0.2},
                ],
            },
            {
                "op": "record_llm_call",
                "call_id": "c-1",
                "session_id": "s-research",
                "input": prompt,
                "recall_ids": ["r-ctx"],
                "ts": now + 1,
                "context_window": 4096,
            },
            {
                "op": "record_llm_call",
                "call_id": "c-2",
                "session_id": "s-research",
                "input": [*prompt, _m("assistant", turns["t-r8"]["content"]), _m("user", "shorter please")],
                "ts": now + 2,
            },
        ]
    )
    assert all("ok" in r for r in results), results
    return filled


def test_context_from_a_turn_steps_and_jumps(called, make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(140, 50)) as pilot:
            app.open_session("s-research", anchor=8)
            await wait_until(
                pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.data, what="session"
            )
            await pilot.press("L")
            await wait_until(
                pilot, lambda: isinstance(app.screen, ContextScreen) and app.screen.data, what="the context"
            )
            ctx = app.screen
            assert ctx.call_id == "c-1"
            text = screen_text(app)
            assert "call 1 of 2" in text and "compaction removed never reached the prompt" in text
            parts = ctx.query_one("#context-parts")
            assert [cell_texts(parts, i)[0].split()[-1] for i in range(parts.row_count)][:2] == [
                "system_prompt",
                "compaction_summary",
            ]
            recalled = ctx.query_one("#context-recalled")
            assert [cell_texts(recalled, i)[1] for i in range(4)] == ["NO", "yes", "yes", "NO"]
            assert "the first call of its session" in text

            await pilot.press("right_square_bracket")
            await wait_until(pilot, lambda: ctx.call_id == "c-2", what="the next call")
            assert "2 entered" in screen_text(app) and "shorter please" in screen_text(app)
            await pilot.press("left_square_bracket")
            await wait_until(pilot, lambda: ctx.call_id == "c-1", what="back to the first call")

            recalled.focus()
            recalled.move_cursor(row=0)
            await pilot.press("enter")  # the compacted-away turn, in its session
            await wait_until(
                pilot,
                lambda: (
                    isinstance(app.screen, SessionScreen)
                    and app.screen.current_turn is not None
                    and app.screen.current_turn["index"] == 2
                ),
                what="the recalled turn",
            )
            await pilot.press("escape")
            assert app.screen is ctx
            await pilot.press("w")  # why it ranked where it did: recall --why on the Recall screen
            await wait_until(pilot, lambda: isinstance(app.screen, RecallScreen), what="the Recall screen")
            assert app.screen.query_one("#query").value == "which papers are most cited"
            assert [m["turn_id"] for m in expected_turns(app)] == ["t-r3"]

    asyncio.run(scenario())


def test_context_from_the_recall_log(called, make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(140, 50)) as pilot:
            app.push_screen(RecallEntryScreen("r-ctx"))
            await wait_until(
                pilot,
                lambda: isinstance(app.screen, RecallEntryScreen) and app.screen.entry,
                what="the entry",
            )
            await pilot.press("L")
            await wait_until(
                pilot, lambda: isinstance(app.screen, ContextScreen) and app.screen.data, what="the context"
            )
            assert app.screen.call_id == "c-1"  # the call that named this recall

    asyncio.run(scenario())


def test_bar_cells_follow_the_tokens() -> None:
    parts = [{"kind": "system_prompt", "tokens": 30}, {"kind": "active_turns", "tokens": 10}]
    line = bar(parts, 40)
    assert line.plain == "█" * 40
    assert [(s.end - s.start, str(s.style)) for s in line.spans] == [(30, "blue"), (10, "green")]
    assert bar([], 10).plain == "(no input)"
