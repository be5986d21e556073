"""Recalls screen: the recall log in the viewer, one entry as the agent got it, a re-run
today on the Recall screen with the same parameters, and the Live line of the event."""

from __future__ import annotations

import asyncio
import time

import pytest
from tui_helpers import cell_texts, screen_text, wait_for_workers, wait_until

from memviewer.events import EventRecord
from memviewer.tui.live_feed import event_text
from memviewer.tui.screens.recall import RecallScreen
from memviewer.tui.screens.recalls import RecallEntryScreen, RecallsScreen
from memviewer.tui.screens.session import SessionScreen


@pytest.fixture
def logged(filled):
    [res] = filled.apply_batch(
        [
            {
                "op": "record_recall",
                "recall_id": "r-agent",
                "ts": time.time(),
                "query": "most cited retrieval papers",
                "results": [
                    {
                        "turn_id": "t-r4",
                        "session_id": "s-research",
                        "index": 3,
                        "score": 0.91,
                        "text": "RAG, REALM",
                    },
                    {"text": "a note from the agent's own vector store", "score": 0.2},
                ],
                "session_id": "s-research",
                "params": {"top_k": 2, "mode": "flat", "k": 7},
                "source": "agent",
            }
        ]
    )
    assert res == {"ok": {"recall_id": "r-agent"}}
    return filled


def test_recalls_list_entry_and_rerun(logged, make_app) -> None:
    logged.sync_index()  # the re-run needs the vector index

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("4")
            screen = app.screen
            assert isinstance(screen, RecallsScreen)
            table = screen.query_one("#recalls")
            await wait_until(pilot, lambda: table.row_count == 1, what="the recorded recall listed")
            assert cell_texts(table, 0)[1:3] == ["agent", "recall"]
            await pilot.press("enter")
            await wait_until(
                pilot,
                lambda: isinstance(app.screen, RecallEntryScreen) and app.screen.entry,
                what="the entry opened",
            )
            entry = app.screen
            text = screen_text(app)
            assert "most cited retrieval papers" in text and "from agent" in text
            assert "a note from the agent's own vector store" in text  # what it got, as it got it
            results = entry.query_one("#entry-results")
            assert results.row_count == 2 and cell_texts(results, 0)[1] == "0.910"

            await pilot.press("enter")  # the first result opens at its turn
            await wait_until(
                pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.data, what="turn opened"
            )
            assert app.screen.session_id == "s-research" and app.screen.current_turn["index"] == 3
            await pilot.press("escape")
            assert app.screen is entry

            await pilot.press("o")  # the caller's session, at the last turn before the recall
            await wait_until(
                pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.data, what="caller opened"
            )
            last = max(t["index"] for t in logged.session("s-research")["turns"])
            assert app.screen.session_id == "s-research" and app.screen.current_turn["index"] == last
            await pilot.press("escape")
            assert app.screen is entry

            await pilot.press("ctrl+r")  # today, on the Recall screen, with the recorded parameters
            await wait_until(
                pilot,
                lambda: isinstance(app.screen, RecallScreen) and app.screen.result is not None,
                what="re-run on the Recall screen",
            )
            await wait_for_workers(pilot)
            recall = app.screen
            assert recall.query_one("#query").value == "most cited retrieval papers"
            diag = recall.result["diagnostics"]
            assert diag["mode"] == "flat" and diag["params"]["top_k"] == 2
            assert len(recall.result["results"]) <= 2

            await pilot.press("4")  # a mode key shows its own screen: the list, not an old entry
            assert app.screen is screen
            # the re-run itself is in the log, once, from the viewer
            await wait_until(pilot, lambda: table.row_count == 2, what="the re-run listed")
            assert cell_texts(table, 0)[1] == "tui"
            assert logged.recalls(source="tui")["total"] == 1

    asyncio.run(scenario())


def test_source_filter_and_missing_entry(logged, make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("4")
            screen = app.screen
            table = screen.query_one("#recalls")
            await wait_until(pilot, lambda: table.row_count == 1, what="listed")
            screen.query_one("#recalls-source").value = "mcp"
            await wait_until(pilot, lambda: table.row_count == 0, what="filtered out")
            app.push_screen(RecallEntryScreen("r-missing"))
            await wait_until(pilot, lambda: "unknown recall" in screen_text(app), what="the error shown")

    asyncio.run(scenario())


def test_live_line_of_a_recall_event() -> None:
    ev = EventRecord(
        7,
        "recall.performed",
        time.time(),
        "s-research",
        None,
        {"source": "mcp", "kind": "search", "query": "billing", "result_count": 3},
    )
    line = event_text(ev).plain
    assert "recall.performed" in line and "mcp search “billing” → 3 results" in line
