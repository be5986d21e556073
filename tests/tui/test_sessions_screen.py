"""Sessions screen: the table, filter-as-you-type, sort keys, paging, keyword hits."""

from __future__ import annotations

import asyncio

from tui_data import bulk_sessions
from tui_helpers import cell_texts, wait_for_workers, wait_until

from memviewer.tui.screens.session import SessionScreen
from memviewer.tui.screens.sessions import PAGE_SIZE, SessionsScreen
from memviewer.tui.widgets.paged_table import PagedTable


def _ids(screen: SessionsScreen) -> list[str]:
    return [r["session_id"] for r in screen.rows]


def test_table_shows_counts_badges_and_status(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(160, 36)) as pilot:
            await wait_for_workers(pilot)
            screen = app.screen
            assert isinstance(screen, SessionsScreen)
            table = screen.query_one("#sessions", PagedTable)
            assert table.row_count == 6
            # most recent first
            assert _ids(screen)[0] == "s-imported" and _ids(screen)[-1] == "s-research"
            cells = {r["session_id"]: cell_texts(table, i) for i, r in enumerate(screen.rows)}
            research = cells["s-research"]
            assert research[1] == "researcher" and research[2] == "user:alice"
            assert research[5:8] == ["3", "5", "4"]  # episodes, active, archived (compacted)
            assert research[4] == "2025-03-01 09:05"  # absolute UTC
            assert "auto" in cells["s-nightly"][9]
            assert "lineage" in cells["s-launch-1"][9] and "lineage" in cells["s-launch-2"][9]
            assert cells["s-imported"][8] == "closed"
            assert "Sessions 1–6 of 6" in str(screen.query_one("#page-info").render())

    asyncio.run(scenario())


def test_filter_as_you_type_and_clear(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            screen = app.screen
            await pilot.press("slash")
            await pilot.press(*"launch")
            await wait_until(pilot, lambda: len(screen.rows) == 2, what="filtered to 2 rows")
            assert set(_ids(screen)) == {"s-launch-1", "s-launch-2"}
            for _ in range(6):
                await pilot.press("backspace")
            await wait_until(pilot, lambda: len(screen.rows) == 6, what="filter cleared")
            await pilot.press(*"no-such-thing")
            await wait_until(pilot, lambda: not screen.rows, what="nothing matches")
            assert "No sessions match the filter" in str(screen.query_one("#page-info").render())

    asyncio.run(scenario())


def test_sort_keys_and_reverse(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            screen = app.screen
            newest_first = _ids(screen)
            await pilot.press("r")
            await wait_for_workers(pilot)
            assert _ids(screen) == list(reversed(newest_first))
            await pilot.press("o", "o")  # started -> title
            await wait_for_workers(pilot)
            titles = [r["title"] for r in screen.rows]
            assert titles == sorted(titles)  # ascending after the reverse
            assert "sort: title ↑" in str(screen.query_one("#page-info").render())

    asyncio.run(scenario())


def test_pages_through_many_sessions_without_loading_them_all(make_app, filled) -> None:
    bulk_sessions(filled, 2 * PAGE_SIZE + 50)
    total = 2 * PAGE_SIZE + 50 + 6

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            screen = app.screen
            table = screen.query_one("#sessions", PagedTable)
            assert screen.total == total and table.row_count == PAGE_SIZE
            table.move_cursor(row=PAGE_SIZE - 1)
            await pilot.press("down")  # past the last row: next page
            await wait_until(pilot, lambda: screen.page_offset == PAGE_SIZE, what="second page")
            assert table.cursor_row == 0 and table.row_count == PAGE_SIZE
            await pilot.press("up")  # before the first row: previous page, cursor on its last row
            await wait_until(pilot, lambda: screen.page_offset == 0, what="first page again")
            assert table.cursor_row == PAGE_SIZE - 1
            await pilot.press("right_square_bracket", "right_square_bracket")
            await wait_until(pilot, lambda: screen.page_offset == 2 * PAGE_SIZE, what="third page")
            assert table.row_count == total - 2 * PAGE_SIZE
            await pilot.press("right_square_bracket")  # no page after the last one
            await wait_for_workers(pilot)
            assert screen.page_offset == 2 * PAGE_SIZE

    asyncio.run(scenario())


def test_keyword_search_hit_opens_session_at_anchor(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            screen = app.screen
            await pilot.press("s")
            await pilot.press(*"refund", "enter")
            await wait_until(pilot, lambda: screen.hits, what="search hits")
            assert screen.hits[0]["session_id"] == "s-imported"
            anchor = screen.hits[0]["anchor_index"]
            await pilot.press("enter")
            await wait_until(
                pilot,
                lambda: isinstance(app.screen, SessionScreen) and app.screen.data,
                what="session opened",
            )
            opened = app.screen
            assert opened.session_id == "s-imported" and opened.anchor_index == anchor
            current = opened.current_turn
            assert current is not None and current["index"] == anchor
            if current["archived"]:
                assert opened.view == "both"  # archived anchors are shown next to the active window
            assert opened.terms  # the search's words are the session's find
            await pilot.press("escape")  # the first escape clears the find, the second goes back
            assert app.screen is opened and not opened.terms
            await pilot.press("escape")
            assert app.screen is screen

    asyncio.run(scenario())


def test_search_errors_are_shown_not_raised(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            screen = app.screen
            await pilot.press("s")
            await pilot.press(*"AND OR", "enter")
            await wait_for_workers(pilot)
            hits = screen.query_one("#hits")
            assert not screen.hits and not hits.has_class("hidden")
            assert "nothing to search for" in str(hits.get_option_at_index(0).prompt)
            await pilot.press("escape")
            assert hits.has_class("hidden")

    asyncio.run(scenario())


def test_mark_sessions_for_export(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            screen = app.screen
            first, second = _ids(screen)[:2]
            await pilot.press("space", "space")
            assert screen.marked == {first, second}
            assert "2 marked" in str(screen.query_one("#page-info").render())
            current, selected = screen.export_context()
            assert selected == sorted([first, second]) and current == _ids(screen)[2]
            await pilot.press("up", "space")  # unmark the second
            assert screen.marked == {first}

    asyncio.run(scenario())


def test_title_column_follows_the_terminal_width(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            screen = app.screen
            table = screen.query_one("#sessions", PagedTable)
            narrow = len(cell_texts(table, 5)[0])  # the title column's width, as drawn
            table.move_cursor(row=3)
            await pilot.resize_terminal(160, 36)
            await pilot.pause()
            assert table.row_count == 6 and table.cursor_row == 3
            title = cell_texts(table, 5)[0]
            # 40 columns more: the start date comes back (12) and the agent widens (4)
            assert len(title) == narrow + 24 and title.startswith(
                "Find the three most cited papers on retrieval"
            )

    asyncio.run(scenario())
