"""Recall screen over a real LanceDB index built with HashEmbedder (no model):
run, read the trace, re-run on parameter change, compare, open a result."""

from __future__ import annotations

import asyncio

import pytest
from tui_helpers import screen_text, wait_for_workers, wait_until

from memviewer.tui.screens.recall import RecallScreen
from memviewer.tui.screens.recall_view import breakdown_text, trace_text
from memviewer.tui.screens.session import SessionScreen


@pytest.fixture
def indexed(filled):
    filled.sync_index()
    return filled


async def _run_query(app, pilot, query: str) -> RecallScreen:
    await pilot.press("3")
    screen = app.screen
    assert isinstance(screen, RecallScreen)
    await pilot.press(*query, "enter")
    await wait_until(pilot, lambda: screen.result is not None, what="recall result")
    await wait_for_workers(pilot)
    return screen


def test_recall_results_trace_and_open_turn(indexed, make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _run_query(app, pilot, "cited papers retrieval")
            rows = screen.result["results"]
            assert rows and rows[0]["session_id"] == "s-research"
            assert screen.query_one("#results").row_count == len(rows)
            stage1 = screen.result["diagnostics"]["stage1"]
            assert screen.query_one("#stage1").row_count == len(stage1) > 0
            text = screen_text(app)
            assert f"{len(rows)} results" in text and "score  dense" in text  # breakdown of row 1
            trace = str(screen.query_one("#trace").render())
            assert "escalations  none" in trace and "stage 1:" in trace and "timings ms" in trace
            assert app.service.last_seq == indexed.last_seq  # recall wrote nothing

            screen.query_one("#results").focus()
            await pilot.press("enter")
            await wait_until(
                pilot,
                lambda: isinstance(app.screen, SessionScreen) and app.screen.data,
                what="result opened in its session",
            )
            assert app.screen.session_id == rows[0]["session_id"]
            assert app.screen.current_turn["index"] == rows[0]["index"]
            await pilot.press("escape")
            assert app.screen is screen

    asyncio.run(scenario())


def test_parameter_change_reruns_and_compare_mode(indexed, make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _run_query(app, pilot, "product launch plan")
            first = screen.result
            assert len(first["diagnostics"]["stage1"]) > 1
            k = screen.query_one("#k")
            k.value = "1"  # Changed -> debounced re-run, no Enter needed
            await wait_until(pilot, lambda: screen.result is not first, what="re-run after K changed")
            await wait_for_workers(pilot)
            assert len(screen.result["diagnostics"]["stage1"]) == 1
            assert screen.result["diagnostics"]["params"]["top_sessions"] == 1

            k.value = "0"
            await wait_until(
                pilot,
                lambda: (
                    "bad parameter: top_sessions must be at least 1"
                    in str(screen.query_one("#recall-status").render())
                ),
                what="the parameter error",
            )
            k.value = "5"
            await wait_for_workers(pilot)

            before = screen.result
            screen.show_tab("tab-compare")  # opening the comparison runs flat as well
            await wait_until(
                pilot, lambda: screen.flat is not None and screen.result is not before, what="compare run"
            )
            await wait_for_workers(pilot)
            assert screen.flat["diagnostics"]["mode"] == "flat"
            assert screen.result["diagnostics"]["mode"] == "hierarchical"
            assert screen.query_one("#cmp-flat").row_count == len(screen.flat["results"]) > 0
            assert screen.query_one("#cmp-hier").row_count == len(screen.result["results"])

    asyncio.run(scenario())


def test_recall_errors_are_reported(make_app) -> None:
    """Empty query refused; an empty index explained; a rejected parameter shown, not raised."""

    async def scenario() -> None:
        app = make_app()  # nothing indexed
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("3")
            screen = app.screen
            status = screen.query_one("#recall-status")
            await pilot.press("enter")
            assert "type a query first" in str(status.render())
            await pilot.press(*"refund", "enter")
            await wait_until(pilot, lambda: screen.result is not None, what="recall over an empty index")
            await wait_for_workers(pilot)
            assert screen.result["diagnostics"]["escalations"] == ["session-retriever:stage1-empty"]
            assert "vector index holds no turns" in str(status.render())
            screen.query_one("#top-k").value = "5000"
            await wait_until(
                pilot,
                lambda: "top_k must be between" in str(status.render()),
                what="the service's invalid_argument message",
            )

    asyncio.run(scenario())


def test_breakdown_and_trace_text() -> None:
    text = breakdown_text({"recency": 0.5, "dense": 0.8123, "zeta": "x"}, 0.61).plain
    assert text == "dense 0.812 · recency 0.500 · zeta x  → 0.610"
    trace = trace_text(
        {
            "results": [],
            "diagnostics": {
                "escalations": ["session-retriever:stage1-empty"],
                "stage2_candidates": 4,
                "dropped": [{}],
                "capped": [],
            },
        }
    ).plain
    assert (
        "session-retriever:stage1-empty" in trace
        and "stage 2: 4 candidates" in trace
        and "dropped 1" in trace
    )
