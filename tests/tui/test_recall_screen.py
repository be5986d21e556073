"""Recall screen over a real LanceDB index built with HashEmbedder (no model):
run, read the trace, re-run on parameter change, compare, open a result."""

from __future__ import annotations

import asyncio

import pytest
from dated import ASKED, DAY_S, cooking_sessions
from tui_helpers import cell_texts, screen_text, wait_for_workers, wait_until

from memviewer.contract.timeref import AS_OF_FORMS
from memviewer.present.snippets import text_or_tool_calls, tool_call_label
from memviewer.tui.screens.recall import RecallScreen
from memviewer.tui.screens.recall_view import breakdown_text, result_detail, trace_text
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

            for bad in ("0", "1001"):  # recall's own bounds, refused inline before a run
                k.value = bad
                await wait_until(
                    pilot,
                    lambda bad=bad: (
                        f"bad parameter: top_sessions must be an integer from 1 to 1000, not {bad}"
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
            # nothing is embedded yet: recall says so (the index lags the store) and escalates
            assert screen.result["diagnostics"]["escalations"] == [
                "session-retriever:stage1-empty",
                "index:lagging",
            ]
            assert "vector index holds no turns" in str(status.render())
            screen.query_one("#top-k").value = "5000"
            await wait_until(
                pilot,
                lambda: "top_k must be an integer from" in str(status.render()),
                what="the service's invalid_argument message",
            )

    asyncio.run(scenario())


def test_result_detail_says_which_rule_demoted_the_turn() -> None:
    base = {"index": 9, "role": "user", "content": "What did we decide last time?", "score": 0.42}
    plain = result_detail({**base, "score_breakdown": {"dense": 0.7}}).plain
    assert "demoted" not in plain
    shown = result_detail({**base, "score_breakdown": {"dense": 0.7, "question": 1.0, "short": 0.1}}).plain
    lines = [line for line in shown.splitlines() if line.startswith("demoted")]
    assert len(lines) == 2
    assert "question_penalty" in lines[0] and "length_prior" in lines[1]
    # a rule's key present but zero did not fire
    assert "demoted" not in result_detail({**base, "score_breakdown": {"short": 0}}).plain


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
    assert "time " not in trace
    dated = trace_text(
        {
            "results": [],
            "diagnostics": {
                "time_window": {
                    "phrase": "a week ago",
                    "start": "2023-01-29 15:09",
                    "end": "2023-02-02 03:09",
                    "slack_days": 1.75,
                }
            },
        }
    ).plain
    assert "“a week ago” → 2023-01-29 15:09 … 2023-02-02 03:09" in dated
    assert "as of" not in dated  # only shown when one was set
    undated = trace_text({"results": [], "diagnostics": {"time_window": None}}, as_of=ASKED).plain
    assert "as of        2023-02-07 09:00 UTC  (the query names no relative date)" in undated
    off = trace_text(
        {"results": [], "diagnostics": {"time_window": None, "params": {"w_time": 0}}}, as_of=ASKED
    ).plain
    assert "(w_time is 0: dates ignored)" in off


def test_as_of_dates_the_query_in_both_runs(filled, make_app) -> None:
    """A replayed question: "a week ago" counts from the as-of field, in the hierarchical
    run and in the flat run of the comparison; a later as-of moves the answer."""
    cooking_sessions(filled)

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("3")
            screen = app.screen
            screen.query_one("#scope-id").value = "u1"
            as_of = screen.query_one("#as-of")
            as_of.focus()
            await pilot.press(*"2023-02-07 09:00")
            screen.query_one("#query").value = "What did I cook a week ago?"
            as_of.focus()
            await pilot.press("enter")  # Enter in the as-of field runs too
            await wait_until(pilot, lambda: screen.result is not None, what="recall result")
            await wait_for_workers(pilot)
            diag = screen.result["diagnostics"]
            assert diag["time_window"]["phrase"] == "a week ago"
            assert diag["stage1"][0]["session_id"] == "s-week"
            assert screen.result["results"][0]["turn_id"] == "s-week-0"
            assert cell_texts(screen.query_one("#results"), 0)[2] == "s-week"
            status = str(screen.query_one("#recall-status").render())
            assert "as of 2023-02-07 09:00" in status and "time “a week ago”" in status
            trace = str(screen.query_one("#trace").render())
            assert "as of        2023-02-07 09:00 UTC" in trace
            assert "“a week ago” → 2023-01-29 15:00 … 2023-02-02 03:00" in trace

            # 23 days earlier "a week ago" is the month-old session; compare runs both modes.
            before = screen.result
            as_of.value = str(ASKED - 23 * DAY_S)  # epoch seconds
            screen.query_one("#mode").value = "compare"
            await wait_until(
                pilot, lambda: screen.result is not before and screen.flat is not None, what="compare run"
            )
            await wait_for_workers(pilot)
            for run in (screen.result, screen.flat):
                assert run["diagnostics"]["time_window"]["start"] == "2023-01-06 15:00"
                assert run["results"][0]["session_id"] == "s-month"
            assert screen.flat["diagnostics"]["mode"] == "flat"
            assert "as of 2023-01-15 09:00" in str(screen.query_one("#recall-status").render())

    asyncio.run(scenario())


def test_bad_as_of_is_reported_and_the_screen_stays_usable(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("3")
            screen = app.screen
            status = screen.query_one("#recall-status")
            as_of = screen.query_one("#as-of")
            as_of.value = "next tuesday"
            await pilot.press(*"refund", "enter")
            expected = f"bad parameter: as_of must be {AS_OF_FORMS}, not 'next tuesday'"
            assert expected in str(status.render())
            assert screen.result is None and not [w for w in app.workers if w.group == "recall"]
            as_of.value = "nan"  # a number, but no date: refused before recall sees it
            await wait_until(
                pilot,
                lambda: "as_of must be a date between 1970 and 9999, not 'nan'" in str(status.render()),
                what="the out-of-range error",
            )
            as_of.value = "2023-05-30"
            await wait_until(pilot, lambda: screen.result is not None, what="a run once the value is good")
            await wait_for_workers(pilot)
            assert app.screen is screen and "as of 2023-05-30 00:00" in str(status.render())
            before = screen.result
            as_of.value = ""  # empty is now
            await wait_until(pilot, lambda: screen.result is not before, what="a run as of now")
            await wait_for_workers(pilot)
            assert "results" in str(status.render()) and "as of" not in str(status.render())

    asyncio.run(scenario())


WEATHER_CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
}


def test_tool_call_only_turn_shows_its_calls(filled, make_app) -> None:
    filled.import_session(
        {"id": "s-weather", "scope": "user", "scope_id": "carol"},
        [
            {"id": "w0", "role": "user", "content": "What is the weather in Oslo today?", "timestamp": 1.0},
            {"id": "w1", "role": "assistant", "content": "", "tool_calls": [WEATHER_CALL], "timestamp": 2.0},
            {"id": "w2", "role": "assistant", "content": "It is 3 degrees in Oslo.", "timestamp": 3.0},
        ],
    )
    filled.sync_index()

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("3")
            screen = app.screen
            screen.query_one("#scope-id").value = "carol"
            screen.query_one("#m").value = "10"  # every turn of the one session comes back
            screen.query_one("#query").focus()
            await pilot.press(*"weather in Oslo", "enter")
            await wait_until(pilot, lambda: screen.result is not None, what="recall result")
            await wait_for_workers(pilot)
            rows = screen.result["results"]
            (pos,) = [i for i, r in enumerate(rows) if r["turn_id"] == "w1"]
            table = screen.query_one("#results")
            assert cell_texts(table, pos)[-1] == "→ get_weather(…)"
            text_row = next(i for i, r in enumerate(rows) if r["turn_id"] == "w2")
            assert cell_texts(table, text_row)[-1] == "It is 3 degrees in Oslo."
            table.focus()
            table.move_cursor(row=pos)
            await wait_until(
                pilot,
                lambda: "→ get_weather(…)" in str(screen.query_one("#result-detail").render()),
                what="the calls in the result detail",
            )

    asyncio.run(scenario())


def test_text_or_tool_calls() -> None:
    weather = {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    no_args = {"type": "function", "function": {"name": "get_time", "arguments": "{}"}}
    plain = {"name": "lookup", "arguments": {"q": "x"}}
    assert text_or_tool_calls("", [weather]) == "→ get_weather(…)"
    assert text_or_tool_calls(None, [weather, no_args, plain]) == "→ get_weather(…), get_time(), lookup(…)"
    assert text_or_tool_calls("  \n ", [{"function": {"arguments": "not json"}}, "junk"]) == "→ ?(…), ?()"
    # Text wins: the label is only for turns that would otherwise look blank.
    assert text_or_tool_calls("Checking the forecast.", [weather]) == "Checking the forecast."
    assert text_or_tool_calls("", None) == "" and text_or_tool_calls("", []) == ""
    assert tool_call_label([]) == ""
