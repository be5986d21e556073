"""Session screen: archived vs active vs both, the boundary and summary, folded
tool calls, verbatim text, jump to a turn, bookends, a missing session."""

from __future__ import annotations

import asyncio

from tui_data import fixture_intent
from tui_helpers import screen_text, wait_for_workers, wait_until

from memviewer.tui.screens.session import SessionScreen, bookends, build_rows
from memviewer.tui.widgets.turn_list import TurnList


async def _open(app, pilot, session_id: str, **kw) -> SessionScreen:
    await wait_for_workers(pilot)
    app.open_session(session_id, **kw)
    await wait_until(
        pilot,
        lambda: isinstance(app.screen, SessionScreen) and app.screen.data is not None,
        what=f"session {session_id} loaded",
    )
    await pilot.pause()
    return app.screen


def test_active_archived_both_and_the_compaction_boundary(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _open(app, pilot, "s-research")
            arch = screen.query_one("#archived-list", TurnList)
            act = screen.query_one("#active-list", TurnList)
            assert screen.view == "active"
            assert not screen.query_one("#archived-pane").display and screen.query_one("#active-pane").display
            # compaction archived the 4 oldest turns; the summary heads the active window
            assert sorted(arch.turn_indexes) == [0, 1, 2, 3]
            assert act.rows[0].kind == "boundary" and "4 earlier turns archived" in act.rows[0].label.plain
            summary = act.rows[1].turn
            assert summary is not None and summary["is_compaction_summary"] and summary["index"] == 4
            text = screen_text(app)
            assert "SUMMARY" in text and "replaces 4 archived turns" in text
            assert arch.rows[-1].kind == "boundary" and "continues at #4" in arch.rows[-1].label.plain

            await pilot.press("v")
            assert screen.view == "archived"
            assert screen.query_one("#archived-pane").display and not screen.query_one("#active-pane").display
            await pilot.press("v")
            assert screen.view == "both"
            assert screen.query_one("#archived-pane").display and screen.query_one("#active-pane").display
            text = screen_text(app)
            assert "ARCHIVED · 4 turns" in text and "ACTIVE · 5 turns" in text
            await pilot.press("v")
            assert screen.view == "active"

    asyncio.run(scenario())


def test_tool_calls_fold_and_text_is_verbatim(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _open(app, pilot, "s-research", anchor=1)
            arch = screen.query_one("#archived-list", TurnList)
            assert screen.view == "both" and app.focused is arch
            assert arch.current_turn()["index"] == 1
            folded = str(arch.get_option("t1").prompt)
            assert "▸ 1 tool call: search_papers" in folded and '"arguments"' not in folded
            await pilot.press("enter")
            expanded = str(arch.get_option("t1").prompt)
            assert "▾ 1 tool call" in expanded and '"arguments"' in expanded
            await pilot.press("enter")
            assert '"arguments"' not in str(arch.get_option("t1").prompt)

            act = screen.query_one("#active-list", TurnList)
            long_prompt = str(act.get_option("t8").prompt)
            assert (
                "more lines (Enter expands)" in long_prompt and "[bold]this is not markup" not in long_prompt
            )
            screen.set_view("active")  # full width: the line is not wrapped
            screen.go_to(8)
            await pilot.press("enter")
            act.scroll_end(animate=False, immediate=True)
            await pilot.pause()
            assert "[bold]this is not markup[/bold] and **this is not markdown**" in screen_text(app)
            assert "fixture-1" in str(act.get_option("t8").prompt)  # metadata shown when expanded

    asyncio.run(scenario())


def test_jump_to_turn_index_and_episode_navigation(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _open(app, pilot, "s-research")
            await pilot.press("g")
            await pilot.press("9", "9", "enter")  # out of range: the dialog says so and stays
            assert "no turn #99" in str(app.screen.query_one("#jump-error").render())
            await pilot.press("backspace", "backspace", "2", "enter")
            await pilot.pause()
            assert app.screen is screen and screen.view == "both"
            assert app.focused is screen.query_one("#archived-list") and screen.current_turn["index"] == 2
            screen.set_view("active")
            await pilot.press("n")  # next episode header -> its first turn
            assert screen.current_turn["index"] == 5
            await pilot.press("n")
            assert screen.current_turn["index"] == 7
            await pilot.press("p")
            assert screen.current_turn["index"] == 5

    asyncio.run(scenario())


def test_episodes_table_and_bookends(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _open(app, pilot, "s-research")
            table = screen.query_one("#episodes")
            assert table.row_count == 3
            rewards = [table.get_row_at(i)[5].plain for i in range(3)]
            assert rewards == ["0.90", "1.00", "0.70"]
            assert table.get_row_at(0)[4].plain == "finalized"
            bookends_box = screen.query_one("#bookends")
            assert bookends_box.has_class("hidden")
            await pilot.press("b")
            assert not bookends_box.has_class("hidden")
            text = screen_text(app)
            assert "opening" in text and "closing" in text and "#0 user: Find the three" in text
            table.focus()
            table.move_cursor(row=2)
            await pilot.press("enter")  # an episode row jumps to its first turn
            assert screen.current_turn["index"] == 7

    asyncio.run(scenario())


def test_unknown_session_shows_an_error(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            app.open_session("s-nope")
            await wait_for_workers(pilot)
            assert isinstance(app.screen, SessionScreen) and app.screen.data is None
            assert "cannot open session" in screen_text(app)

    asyncio.run(scenario())


def test_build_rows_groups_turns_under_episodes() -> None:
    episodes = [
        {
            "episode_id": "e1",
            "intent": {"kind": "task", "rule_id": "r", "confidence": 0.9},
            "status": "closed",
            "closed_by": "finalized",
            "r_task": None,
            "started_at": None,
        }
    ]
    turns = [
        {"index": 0, "role": "user", "content": "a", "episode_id": "e1", "archived": False},
        {"index": 1, "role": "assistant", "content": "b", "episode_id": "e1", "archived": False},
        {"index": 2, "role": "user", "content": "c", "episode_id": None, "archived": False},
    ]
    rows = build_rows(turns, episodes, "active", 0, 0)
    assert [r.kind for r in rows] == ["episode", "turn", "turn", "episode", "turn"]
    assert "task (r, 0.90)" in rows[0].label.plain and "2 turns" in rows[0].label.plain
    assert "imported history" in rows[3].label.plain
    assert bookends(turns) is not None and bookends(turns[:2]) is None


def test_opening_and_closing_screens_faster_than_a_refresh(make_app) -> None:
    """A screen closed before its first refresh must not leave callbacks that crash the app."""

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            for _ in range(5):
                app.open_session("s-research")
                await pilot.pause(0)
                app.pop_screen()
            await pilot.press("2", "1", "2", "1")
            await wait_for_workers(pilot)
            assert app.is_running and type(app.screen).__name__ == "SessionsScreen"

    asyncio.run(scenario())


def test_fixture_intent_is_set_through_the_public_setter(filled) -> None:
    """The fixture's fixed classifier (set with ``manager.classifier``) decides every episode."""
    assert filled.manager.classifier is fixture_intent
    episodes = filled.session("s-research")["episodes"]
    assert episodes and all(e["intent"]["rule_id"].startswith("fixture.") for e in episodes)
    filled.manager.classifier = None  # no classifier: new episodes are "unknown"
    ep = filled.start_episode("s-research", "fix the parser")
    assert ep["intent"]["kind"] == "unknown" and ep["intent"]["rule_id"] == "none"
