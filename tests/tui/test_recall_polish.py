"""Recall screen rough edges from a first hour of use: ``/`` only focuses the query, a flat
run sits under FLAT, the trace names the speaker hint, rerank is greyed without a reranker."""

from __future__ import annotations

import asyncio

import pytest
from tui_helpers import screen_text, wait_for_workers, wait_until

from memviewer.tui.screens.recall import RecallScreen
from memviewer.tui.screens.recall_view import trace_text


@pytest.fixture
def indexed(filled):
    filled.sync_index()
    return filled


def test_slash_focuses_the_query_without_typing_a_slash(indexed, make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("3")
            screen = app.screen
            query = screen.query_one("#query")
            assert screen.focused is query
            await pilot.press("slash")  # already focused: stays focused, types nothing
            assert query.value == "" and screen.focused is query
            await pilot.press(*"and/or", "enter")
            await wait_until(pilot, lambda: screen.result is not None, what="recall result")
            await wait_for_workers(pilot)
            assert query.value == "and/or"  # a slash inside a query is text
            assert screen.focused is screen.query_one("#results")
            await pilot.press("slash")  # from the results: focus only
            assert screen.focused is query and query.value == "and/or"

    asyncio.run(scenario())


def test_flat_run_is_shown_under_flat_and_rerank_is_greyed(indexed, make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("3")
            screen: RecallScreen = app.screen
            rerank = screen.query_one("#rerank")
            assert rerank.disabled and "none configured" in str(rerank.label)
            screen.query_one("#mode").value = "flat"
            await pilot.press(*"cited papers", "enter")
            await wait_until(pilot, lambda: screen.result is not None, what="flat result")
            await wait_for_workers(pilot)
            assert screen.result["diagnostics"]["mode"] == "flat"
            assert screen.query_one("#cmp-hier").row_count == 0
            assert screen.query_one("#cmp-flat").row_count == len(screen.result["results"]) > 0
            assert "no reranker is configured" not in screen_text(app)

    asyncio.run(scenario())


def test_trace_names_the_speaker_hint() -> None:
    def trace(query: str, **params: float) -> str:
        return trace_text({"query": query, "results": [], "diagnostics": {"params": params}}).plain

    assert "speaker      asks about the user's words: their turns are favoured (w_speaker 0.2)" in trace(
        "what did I say about the deploy?", w_speaker=0.2
    )
    assert "asks about the assistant's words" in trace("what did you recommend for lunch?")
    assert "(w_speaker is 0: ignored)" in trace("what did you recommend?", w_speaker=0)
    assert "speaker      the query names no speaker" in trace("deploy token")
    assert "rerank       not reranked" in trace("deploy token") and "False" not in trace("x")


def test_trace_says_what_a_chat_was_searched_as_and_that_a_name_is_favoured() -> None:
    q = "What are Fahim's hobbies?"
    named = {
        "query": q,
        "results": [{"score_breakdown": {"dense": 0.5, "speaker": 1.0}}],
        "diagnostics": {"search_query": "What are hobbies?", "params": {"w_speaker": 0.2}},
    }
    text = trace_text(named).plain
    assert "searched     “What are hobbies?”" in text
    assert (
        "speaker      names a person of this chat: the turns they wrote are favoured (w_speaker 0.2)" in text
    )
    plain = trace_text({"query": q, "results": [], "diagnostics": {"search_query": q}}).plain
    assert "searched" not in plain and "the query names no speaker" in plain


def test_narrow_results_keep_a_readable_content_column(indexed, make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.press("3")
            screen = app.screen
            await pilot.press(*"cited papers", "enter")
            await wait_until(pilot, lambda: screen.result is not None, what="recall result")
            await wait_for_workers(pilot)
            table = screen.query_one("#results")
            widths = {str(c.label): c.get_render_width(table) for c in table.columns.values()}
            assert sum(widths.values()) <= 80 and widths["Content"] >= 30 + 2, widths
            archived = [i for i, r in enumerate(screen.result["results"]) if r["archived"]]
            assert archived, "the fixture's compacted session comes back"
            turn = table.get_row_at(archived[0])[3].plain
            assert turn.endswith(" arch") and widths["Turn"] - 2 >= len(turn)

    asyncio.run(scenario())


def test_query_history_walks_with_up_down_and_survives_a_restart(indexed, make_app) -> None:
    async def first() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("3")
            screen = app.screen
            for q in ("cited papers", "launch plan", "cited papers"):
                screen.query_one("#query").value = q
                screen.query_one("#query").focus()
                await pilot.press("enter")
                await wait_until(pilot, lambda: screen.result is not None, what="run")
                await wait_for_workers(pilot)
            assert app.prefs.history == ["launch plan", "cited papers"]  # a repeat moves to the end

    async def second() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("3")
            query = app.screen.query_one("#query")
            await pilot.press(*"draft")
            await pilot.press("up")
            assert query.value == "cited papers"
            await pilot.press("up", "up")  # stops at the oldest
            assert query.value == "launch plan"
            await pilot.press("down")
            assert query.value == "cited papers"
            await pilot.press("down")  # past the newest: what was being typed
            assert query.value == "draft"

    asyncio.run(first())
    asyncio.run(second())


def test_a_disabled_rerank_box_looks_off_and_an_enabled_one_ticks(filled, make_app) -> None:
    """Textual's Checkbox draws its X off or on; greyed out, the off box read as ticked
    (``▐X▌``). Off, the box is empty; the X shows only while the value is True."""

    async def scenario(with_reranker: bool) -> None:
        filled.reranker = object() if with_reranker else None
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("3")
            screen: RecallScreen = app.screen
            rerank = screen.query_one("#rerank")
            await wait_until(pilot, lambda: "rerank" in screen_text(app), what="the parameter row")
            if not with_reranker:
                assert rerank.disabled and not rerank.value
                assert "▐ ▌ rerank (none configured)" in screen_text(app)
                assert "▐X▌" not in screen_text(app)
                return
            assert not rerank.disabled and "▐ ▌ rerank" in screen_text(app)
            rerank.focus()
            await pilot.press("space")
            await wait_until(pilot, lambda: "▐X▌ rerank" in screen_text(app), what="the ticked box")
            assert screen.rerank is True

    asyncio.run(scenario(False))
    try:
        asyncio.run(scenario(True))
    finally:
        filled.reranker = None
