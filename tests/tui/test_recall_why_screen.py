"""Viewer why-not and golden sets over a real LanceDB index (HashEmbedder): mark a turn
expected on the Session screen, see where it falls out in the Recall trace, apply the
verified fix with one key, compare against any B parameter set, keep a golden case and
score it on the Golden screen."""

from __future__ import annotations

import asyncio
import threading

import pytest
from tui_helpers import wait_for_workers, wait_until

from memviewer.eval import golden
from memviewer.recall.why import why_not
from memviewer.tui.expected import expected_turns
from memviewer.tui.screens.golden import GoldenScreen
from memviewer.tui.screens.recall import RecallScreen
from memviewer.tui.screens.session import SessionScreen

QUERY = "product launch plan"


@pytest.fixture
def indexed(filled):
    filled.sync_index()
    return filled


async def open_at_turn(app, pilot, target: dict) -> None:  # noqa: ANN001
    """Open the target turn's session at that turn and wait until it is shown."""
    app.open_session(target["session_id"], anchor=target["index"])
    await wait_until(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.data, what="session")
    await wait_for_workers(pilot)


def test_mark_expected_trace_fix_and_golden(indexed, make_app) -> None:
    wide = indexed.recall(QUERY, top_k=10)
    target = wide["results"][3]
    _, direct = why_not(indexed.parts, QUERY, target["turn_id"], {"top_k": 2})
    assert direct["eliminated_at"] == "top_k" and direct["fix"] == {"top_k": 4}

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await open_at_turn(app, pilot, target)
            assert app.screen.current_turn["turn_id"] == target["turn_id"]
            await pilot.press("w")
            assert [m["turn_id"] for m in expected_turns(app)] == [target["turn_id"]]

            await pilot.press("3")
            screen = app.screen
            assert isinstance(screen, RecallScreen)
            screen.query_one("#top-k").value = "2"
            await pilot.press(*QUERY, "enter")
            await wait_until(pilot, lambda: screen.whys, what="why-not of the expected turn")
            await wait_for_workers(pilot)
            why = screen.whys[0]
            assert why["eliminated_at"] == "top_k" and why["fix"] == direct["fix"]
            trace = str(screen.query_one("#trace").render())
            assert "why not" in trace and "eliminated at top_k" in trace and "top_k=4" in trace

            first = screen.result
            await pilot.press("f")  # applies the fix and re-runs
            await wait_until(pilot, lambda: screen.result is not first, what="re-run with the fix")
            await wait_for_workers(pilot)
            assert screen.query_one("#top-k").value == "4"
            got = [r["turn_id"] for r in screen.result["results"]]
            assert got.index(target["turn_id"]) + 1 == why["fix_rank"]
            assert screen.whys[0]["retrieved"] is True

            await pilot.press("a")  # the query and the expected turn become a golden case
            await wait_until(pilot, lambda: golden.cases(indexed), what="golden case stored")
            case = golden.cases(indexed)[0]
            assert case["query"] == QUERY and case["turn_ids"] == [target["turn_id"]]

            await pilot.press("h")
            await wait_until(pilot, lambda: isinstance(app.screen, GoldenScreen), what="golden screen")
            gs = app.screen
            await wait_for_workers(pilot)
            assert gs.query_one("#golden-cases").row_count == 1
            await pilot.press("r")
            await wait_until(pilot, lambda: gs.runs, what="an eval run")
            assert gs.query_one("#golden-runs").row_count == 1
            assert golden.history(indexed)[0]["cases"] == 1

    asyncio.run(scenario())


def test_side_by_side_takes_any_b_parameter_set(indexed, make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("3")
            screen = app.screen
            assert not screen.query_one("#vs").display  # only in compare mode
            screen.query_one("#mode").value = "compare"
            await pilot.pause()
            assert screen.query_one("#vs").display
            screen.query_one("#vs").value = "top_k=3,k=1"
            screen.query_one("#query").value = QUERY
            assert screen.action_rerun()
            await wait_until(pilot, lambda: screen.flat is not None, what="A and B runs")
            await wait_for_workers(pilot)
            b = screen.flat["diagnostics"]["params"]
            assert b["top_k"] == 3 and b["top_sessions"] == 1 and len(screen.flat["results"]) <= 3
            assert screen.result["diagnostics"]["params"]["top_k"] == 10
            assert screen.query_one("#cmp-flat").row_count == len(screen.flat["results"])
            assert "B: top_k=3" in str(screen.query_one("#cmp-b-title").render())

            screen.query_one("#vs").value = "bogus=1"  # refused inline, nothing runs
            assert screen.action_rerun() is False
            assert "unknown recall parameter" in str(screen.query_one("#recall-status").render())

    asyncio.run(scenario())


def test_why_not_shows_progress_and_x_cancels_it(indexed, make_app, monkeypatch) -> None:
    """The results show at once; the why-not's re-runs are counted on the status line and
    ``x`` stops the search (a gate holds the search after its first re-run until x is pressed)."""
    from memviewer.tui.screens import recall as recall_screen

    wide = indexed.recall(QUERY, top_k=10)
    target = wide["results"][3]
    gate = threading.Event()
    real = recall_screen.why_nots

    def gated(*args, progress=None, **kwargs):
        def hold(turn: int, done: int, planned: int) -> None:
            progress(turn, done, planned)
            gate.wait(timeout=30)

        return real(*args, progress=hold, **kwargs)

    monkeypatch.setattr(recall_screen, "why_nots", gated)

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await open_at_turn(app, pilot, target)
            await pilot.press("w", "3")
            screen = app.screen
            screen.query_one("#top-k").value = "2"
            await pilot.press(*QUERY, "enter")
            status = screen.query_one("#recall-status")
            await wait_until(pilot, lambda: "re-run 1 of at most" in str(status.render()), what="progress")
            assert screen.result is not None and screen.query_one("#results").row_count == 2
            assert "x cancels" in str(status.render()) and not screen.whys
            await pilot.press("x")
            gate.set()
            await wait_until(pilot, lambda: screen.whys, what="the cancelled why-not")
            assert "why-not cancelled (x) after 1 of" in screen.whys[0]["error"]
            assert "cancelled" in str(screen.query_one("#trace").render())
            assert "x cancels" not in str(status.render())
            assert not screen.check_action("cancel_why", ())  # nothing left to cancel

    try:
        asyncio.run(scenario())
    finally:
        gate.set()
