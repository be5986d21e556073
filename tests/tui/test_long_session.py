"""A session of 5,000 turns: the turn list renders one window of turns (so opening, ``x``,
``v`` and resizes cost a bounded amount), yet everything addressed by turn index reaches the
whole session: moving past an edge, ``g``, a search hit, ``x``, ``n``/``p``."""

from __future__ import annotations

import asyncio
from typing import Any

from tui_data import T0
from tui_helpers import screen_text, wait_for_workers, wait_until

from memviewer.tui.screens.session import SessionScreen
from memviewer.tui.widgets.turn_list import WINDOW_TURNS, TurnList

N = 5000
EVERY = 50  # turns per episode
SID = "s-long"
FOLDED = "(Enter expands)"


def long_session(service: Any, *, archived: int = 0) -> None:
    """``N`` turns of 8 lines (folded unless expanded), an episode every ``EVERY`` turns, the
    first ``archived`` compacted out; turn 300 mentions ``zanzibar``. Direct inserts: fast."""
    from memviewer.store import repos

    with service.store.write() as tx:
        repos.insert_session(
            tx.conn,
            repos.new_session_row(
                SID,
                T0,
                agent="bulk",
                title="five thousand turns",
                last_seen_at=T0 + N,
                retention="keep_all",
            ),
        )
        for e in range(N // EVERY):
            repos.insert_episode(
                tx.conn,
                {
                    "id": f"{SID}-e{e}",
                    "session_id": SID,
                    "status": "closed",
                    "closed_by": "finalized",
                    "started_at": T0 + e * EVERY,
                    "ended_at": None,
                    "intent_kind": "task",
                    "intent_confidence": 0.9,
                    "intent_rule": "long.task",
                    "intent_source": "heuristic",
                    "r_task": None,
                    "meta": None,
                },
            )
        rows = []
        for j in range(N):
            extra = " about zanzibar" if j == 300 else ""
            content = f"turn {j}{extra}\n" + "\n".join(f"line {k} of turn {j}" for k in range(2, 9))
            row = repos.new_turn_row(
                f"{SID}-t{j}",
                SID,
                f"{SID}-e{j // EVERY}",
                j,
                ("user", "assistant")[j % 2],
                content,
                T0 + j,
            )
            row["archived"] = j < archived
            rows.append(row)
        repos.insert_turns(tx.conn, rows)


async def _open(app: Any, pilot: Any, **kw: Any) -> SessionScreen:
    await wait_for_workers(pilot)
    app.open_session(SID, **kw)
    await wait_until(
        pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.data is not None, what="opened"
    )
    await pilot.pause()
    return app.screen


def shown(lst: TurnList) -> list[int]:
    """Indexes of the turns the window holds."""
    return [r.turn["index"] for r in lst.rows if r.turn is not None]


def in_view(lst: TurnList, index: int) -> bool:
    """Turn ``index`` has at least one line inside the list's viewport."""
    option = lst.get_option_index(f"t{index}")
    top, bottom = lst.line_span(option)
    return top < lst.scroll_y + lst.scrollable_content_region.height and bottom > lst.scroll_y


def test_opening_shows_the_newest_window_with_an_edge_header(filled, make_app) -> None:
    long_session(filled)

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _open(app, pilot)
            act = screen.query_one("#active-list", TurnList)
            top = N - WINDOW_TURNS
            assert act.windowed and len(act.turn_indexes) == N and act.has_turn(0)
            assert shown(act) == list(range(N - WINDOW_TURNS, N))
            assert act.option_count < WINDOW_TURNS + WINDOW_TURNS // EVERY + 3  # turns, episodes, edge
            edge = act.rows[0]
            assert edge.kind == "edge" and edge.label.plain.startswith(f"▲ {top:,} earlier turns")
            assert act.rows[-1].kind == "turn"  # the newest turn closes the window: no later edge
            assert screen.current_turn["index"] == N - WINDOW_TURNS
            assert f"{N - WINDOW_TURNS:,} earlier turns" in screen_text(app)

    asyncio.run(scenario())


def test_moving_past_an_edge_loads_the_adjacent_window_and_keeps_the_place(filled, make_app) -> None:
    long_session(filled)

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _open(app, pilot)
            act = screen.query_one("#active-list", TurnList)
            top = N - WINDOW_TURNS
            await pilot.press("up")  # from the window's first turn: earlier turns load, the cursor moves on
            assert screen.current_turn["index"] == top - 1
            assert top - 1 in shown(act) and top in shown(act) and shown(act)[0] < top - 1
            assert in_view(act, top - 1) and in_view(act, top)
            assert act.rows[0].kind == "edge" and f"{shown(act)[0]:,} earlier" in act.rows[0].label.plain
            assert act.rows[-1].kind == "edge" and "later turns" in act.rows[-1].label.plain
            await pilot.press("down")
            assert screen.current_turn["index"] == top

            await pilot.press("home")  # the session's first turn, not the window's
            assert screen.current_turn["index"] == 0 and act.rows[0].kind != "edge"
            last_shown = shown(act)[-1]
            act.go_to(last_shown)
            await pilot.press("down")  # past the bottom edge: later turns load
            assert screen.current_turn["index"] == last_shown + 1
            assert in_view(act, last_shown + 1) and last_shown in shown(act)
            assert shown(act)[-1] > last_shown + 1
            edge_turn = shown(act)[0]
            assert edge_turn > 0
            act.go_to(edge_turn)
            await pilot.press("pageup")  # a page up from the top edge also loads and moves
            here = screen.current_turn["index"]
            assert here < edge_turn and shown(act)[0] < here and in_view(act, here)

            await pilot.press("end")
            assert screen.current_turn["index"] == N - 1 and act.rows[-1].kind == "turn"
            await pilot.press("down")  # the last turn wraps round to the first, as a short list does
            assert screen.current_turn["index"] == 0

    asyncio.run(scenario())


def test_jump_to_a_far_turn_rewindows_around_it(filled, make_app) -> None:
    long_session(filled)

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _open(app, pilot)
            act = screen.query_one("#active-list", TurnList)
            await pilot.press("g")
            await pilot.press(*"2000", "enter")
            await pilot.pause()
            assert app.screen is screen and screen.current_turn["index"] == 2000
            assert shown(act)[0] < 2000 < shown(act)[-1] and len(shown(act)) == WINDOW_TURNS
            assert act.rows[0].kind == "edge" and act.rows[-1].kind == "edge"
            assert in_view(act, 2000)
            assert "#2000" in screen_text(app)

    asyncio.run(scenario())


def test_search_hit_on_a_far_archived_turn_opens_at_it(filled, make_app) -> None:
    long_session(filled, archived=N // 2)

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            sessions = app.screen
            await pilot.press("s")
            await pilot.press(*"zanzibar", "enter")
            await wait_until(pilot, lambda: sessions.hits, what="search hits")
            assert sessions.hits[0]["session_id"] == SID and sessions.hits[0]["anchor_index"] == 300
            await pilot.press("enter")
            await wait_until(
                pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.data, what="opened"
            )
            await pilot.pause()
            screen = app.screen
            arch = screen.query_one("#archived-list", TurnList)
            assert screen.view == "both" and app.focused is arch
            assert screen.current_turn["index"] == 300 and in_view(arch, 300)
            assert len(shown(arch)) == WINDOW_TURNS and 300 in shown(arch)
            assert "▶ #300" in str(arch.get_option("t300").prompt)  # the anchor is marked
            act = screen.query_one("#active-list", TurnList)  # the other side opens on its newest turns
            assert shown(act)[-1] == N - 1 and len(shown(act)) == WINDOW_TURNS

    asyncio.run(scenario())


def test_expand_all_covers_turns_outside_the_window(filled, make_app) -> None:
    long_session(filled)

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _open(app, pilot)
            act = screen.query_one("#active-list", TurnList)
            first = shown(act)[0]
            assert FOLDED in str(act.get_option(f"t{first}").prompt)
            await pilot.press("x")
            assert len(act.expanded) == N
            assert FOLDED not in str(act.get_option(f"t{first}").prompt)
            screen.go_to(10)  # a window that was not rendered when x was pressed
            await pilot.pause()
            assert first not in shown(act)
            assert FOLDED not in str(act.get_option("t10").prompt)
            await pilot.press("x")
            assert not act.expanded and FOLDED in str(act.get_option("t10").prompt)
            await pilot.press("enter")  # one turn by hand, then away and back: it stays expanded
            screen.go_to(N - 1)
            screen.go_to(10)
            await pilot.pause()
            assert act.expanded == {10} and FOLDED not in str(act.get_option("t10").prompt)

    asyncio.run(scenario())


def test_next_and_previous_episode_cross_the_window_edges(filled, make_app) -> None:
    long_session(filled)

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _open(app, pilot)
            act = screen.query_one("#active-list", TurnList)
            top = N - WINDOW_TURNS  # an episode starts there
            await pilot.press("p")  # the previous episode lies before the window
            assert screen.current_turn["index"] == top - EVERY and in_view(act, top - EVERY)
            await pilot.press("n")
            assert screen.current_turn["index"] == top
            screen.go_to(2010)
            await pilot.pause()
            await pilot.press("p")  # inside an episode: back to its own start
            assert screen.current_turn["index"] == 2000
            while shown(act)[-1] >= screen.current_turn["index"] + EVERY:
                await pilot.press("n")
            beyond = screen.current_turn["index"] + EVERY
            assert beyond not in shown(act)
            await pilot.press("n")  # the next episode lies after the window
            assert screen.current_turn["index"] == beyond and in_view(act, beyond)
            await pilot.press("end", "n")  # after the last episode start: nothing further
            assert screen.current_turn["index"] == N - 1
            await pilot.press("home", "p")
            assert screen.current_turn["index"] == 0

    asyncio.run(scenario())
