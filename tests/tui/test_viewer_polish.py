"""The viewer's rough edges from a first hour of use (issue 18, "Fix"): the Ctrl+C toast,
number keys showing their mode's own screen, the Sessions sorts / Escape / narrow layout /
empty store, the episode table following the turn cursor, Live's resize, dates and Enter,
themes remembered across restarts."""

from __future__ import annotations

import asyncio
import time

from tui_helpers import cell_texts, screen_text, wait_for_workers, wait_until

from memviewer.events import EventRecord
from memviewer.tui.screens.live import LiveScreen
from memviewer.tui.screens.recall import RecallScreen
from memviewer.tui.screens.session import SessionScreen
from memviewer.tui.screens.sessions import SessionsScreen
from memviewer.tui.widgets.event_log import EventLog


def _titles(screen: SessionsScreen) -> list[str]:
    return [r["title"] or "" for r in screen.rows]


def test_ctrl_c_toast_is_plain_text(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            seen: list[tuple[str, bool]] = []
            notify = app.notify

            def record(message: str, **kw) -> None:
                seen.append((message, kw.get("markup", False)))
                notify(message, **kw)

            app.notify = record
            await pilot.press("ctrl+c")
            await wait_until(pilot, lambda: seen, what="the toast")
            assert seen == [("Press ctrl+q or q to quit the app", False)]  # shown as written

    asyncio.run(scenario())


def test_number_keys_show_their_modes_own_screen(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            app.open_session("s-research")
            await wait_until(pilot, lambda: isinstance(app.screen, SessionScreen), what="session open")
            await pilot.press("3")
            assert isinstance(app.screen, RecallScreen)
            app.open_session("s-zh")  # as a recall result would
            await wait_until(pilot, lambda: isinstance(app.screen, SessionScreen), what="result open")
            await pilot.press("1")
            await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen), what="the list")
            await pilot.press("3")
            await wait_until(pilot, lambda: isinstance(app.screen, RecallScreen), what="recall itself")

    asyncio.run(scenario())


def test_sorts_by_every_column_case_insensitive_and_escape_clears_the_filter(make_app, filled) -> None:
    filled.import_session(
        {"id": "s-lower", "title": "alpha notes"},
        [{"id": "l0", "role": "user", "content": "hi", "timestamp": 1.0}],
    )
    filled.import_session(
        {"id": "s-upper", "title": "Zeta plan"},
        [{"id": "u0", "role": "user", "content": "yo", "timestamp": 2.0}],
    )

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            screen = app.screen
            table = screen.query_one("#sessions")
            await pilot.click("#sessions", offset=(3, 0))  # the Title header: A→Z, any case
            await wait_for_workers(pilot)
            titles = _titles(screen)
            assert titles == sorted(titles, key=str.lower) and titles[0] == "alpha notes"
            assert "sort: title ↑" in str(screen.query_one("#page-info").render())
            for key, field in (
                ("episodes", "episodes"),
                ("active", "active_turns"),
                ("archived", "archived_turns"),
            ):
                screen.post_message(
                    table.HeaderSelected(table, table.columns[key].key, 0, table.columns[key].label)
                )
                await wait_for_workers(pilot)
                values = [r[field] for r in screen.rows]
                assert values == sorted(values, reverse=True), (key, values)
            screen.query_one("#filter").focus()
            await pilot.press(*"zeta")
            await wait_until(pilot, lambda: screen.total == 1, what="filtered to one")
            assert str(screen.query_one("#page-info").render()).startswith("1 session ")
            await pilot.press("escape")
            await wait_until(pilot, lambda: screen.total > 2, what="filter cleared by Escape")
            assert screen.query_one("#filter").value == "" and screen.filter_text == ""

    asyncio.run(scenario())


def test_narrow_sessions_keep_counts_and_status(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for_workers(pilot)
            table = app.screen.query_one("#sessions")
            labels = [str(c.label) for c in table.columns.values()]
            assert labels[:1] == ["Title"] and {"Ep", "Act", "Arch", "Status"} <= set(labels)
            assert sum(c.get_render_width(table) for c in table.columns.values()) <= 80
            bar = app.screen.query_one("#sessions-bar")
            assert bar.region.height == 2  # filter above search, not run together
            row = cell_texts(table, 0)
            assert len(row) == len(labels)

    asyncio.run(scenario())


def test_empty_store_suggests_the_demo_and_connecting_an_agent(settings) -> None:
    from memviewer.index.embedder import HashEmbedder
    from memviewer.service import MemoryService
    from memviewer.tui.app import MemviewerApp

    svc = MemoryService(settings, embedder=HashEmbedder())

    async def scenario() -> None:
        app = MemviewerApp(settings, service=svc, hub="off")
        async with app.run_test(size=(160, 24)) as pilot:
            await wait_for_workers(pilot)
            info = str(app.screen.query_one("#page-info").render())
            assert "memviewer demo" in info and "Publisher" in info

    try:
        asyncio.run(scenario())
    finally:
        svc.close()


def test_episode_table_follows_the_turn_cursor(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            app.open_session("s-research")
            await wait_until(
                pilot,
                lambda: isinstance(app.screen, SessionScreen) and app.screen.data is not None,
                what="session loaded",
            )
            screen = app.screen
            await pilot.pause()
            episodes = screen.query_one("#episodes")
            screen.set_view("active")
            for key in ("n", "n", "p"):
                await pilot.press(key)
                await pilot.pause()
                eid = screen.current_turn["episode_id"]
                assert episodes.cursor_row == episodes.get_row_index(eid), key

    asyncio.run(scenario())


def _event(seq: int, sid: str, index: int) -> EventRecord:
    return EventRecord(
        seq,
        "episode.turn_added",
        time.time(),
        sid,
        None,
        {"turn": {"index": index, "role": "user", "content": "x"}},
    )


def test_live_resize_date_and_enter_opens_the_turn(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(100, 24)) as pilot:
            await wait_for_workers(pilot)
            await pilot.press("2")
            screen = app.screen
            assert isinstance(screen, LiveScreen)
            for seq in range(1, 60):
                app.feed.add(_event(seq, "s-research", 4))
            log = screen.query_one("#events", EventLog)
            await wait_until(pilot, lambda: len(log.rows) == 59, what="events shown")
            assert log.following
            await pilot.resize_terminal(120, 40)  # a bigger terminal is still at the bottom
            await pilot.pause()
            assert log.following and "FOLLOWING" in screen_text(app)
            assert time.strftime("%m-%d", time.gmtime()) in screen_text(app)  # the date is shown
            log.focus()
            await pilot.press("enter")
            await wait_until(
                pilot,
                lambda: isinstance(app.screen, SessionScreen) and app.screen.data is not None,
                what="the event's session",
            )
            assert app.screen.session_id == "s-research" and app.screen.current_turn["index"] == 4

    asyncio.run(scenario())


def test_theme_is_remembered_across_restarts(make_app) -> None:
    async def run(check) -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            await check(app, pilot)

    async def change(app, pilot) -> None:
        assert app.theme != "nord"
        app.theme = "nord"
        await wait_until(pilot, lambda: app.prefs.theme == "nord", what="theme saved")

    async def same(app, pilot) -> None:
        assert app.theme == "nord"

    asyncio.run(run(change))
    asyncio.run(run(same))
