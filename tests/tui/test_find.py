"""Search highlighting: matched terms marked in the hits and in the Session screen, where
n / N jump between the matching turns (and / finds new words in the open session)."""

from __future__ import annotations

import asyncio

from tui_helpers import wait_for_workers, wait_until

from memviewer.present.highlight import match_spans, query_terms
from memviewer.tui.formatting import MATCH_STYLE, turn_text
from memviewer.tui.screens.session import SessionScreen


def _marked(text) -> list[str]:
    return [text.plain[s.start : s.end] for s in text.spans if str(s.style) == MATCH_STYLE]


def test_query_terms_and_spans() -> None:
    assert query_terms('"deploy token" XZ99 a 缓') == ("deploy token", "xz99", "缓")
    assert match_spans("The Deploy Token XZ99", query_terms('"deploy token" xz99')) == [(4, 16), (17, 21)]
    assert match_spans("anything", ()) == []
    turn = {"index": 3, "role": "user", "content": "papers about retrieval", "timestamp": None}
    assert _marked(turn_text(turn, terms=("retrieval",))) == ["retrieval"]
    assert _marked(turn_text({**turn, "role": "retrieval"}, terms=("retrieval",))) == [
        "retrieval"
    ]  # body only


def test_hits_and_session_highlight_and_n_jumps(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            screen = app.screen
            await pilot.press("s")
            await pilot.press(*"refund", "enter")
            await wait_until(pilot, lambda: screen.hits, what="search hits")
            prompt = screen.query_one("#hits").get_option_at_index(0).prompt
            assert [m.lower() for m in _marked(prompt)] == ["refund"] * len(_marked(prompt)) and _marked(
                prompt
            )
            await pilot.press("enter")
            await wait_until(
                pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.data, what="opened"
            )
            session = app.screen
            await pilot.pause()
            found = session.matches()
            assert found and session.current_turn["index"] == screen.hits[0]["anchor_index"]
            assert "find 'refund'" in str(session.query_one("#session-info").render())
            visited = []
            for _ in range(len(found)):
                await pilot.press("n")
                visited.append(session.current_turn["index"])
            assert sorted(set(visited)) == found  # n reaches every match, wrapping around
            await pilot.press("N")
            assert session.current_turn["index"] == visited[-2 if len(visited) > 1 else -1]

            await pilot.press("slash")
            await pilot.press(*"zzz-nothing", "enter")
            await pilot.pause()
            assert session.terms == ("zzz-nothing",) and session.matches() == []
            await pilot.press("slash")
            for _ in range(len("zzz-nothing")):
                await pilot.press("backspace")
            await pilot.press("enter")
            await pilot.pause()
            assert session.terms == ()  # cleared: n is the next episode again

    asyncio.run(scenario())


def test_find_says_which_match_and_escape_gives_n_p_back_to_episodes(make_app) -> None:
    """While a find is active the header says "match K of N" and n / p move between the
    matches; escape clears the find (n / p jump between episodes again), a second escape
    goes back."""

    def info(session: SessionScreen) -> str:
        return str(session.query_one("#session-info").render())

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            app.open_session("s-research")
            await wait_until(
                pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.data, what="opened"
            )
            session = app.screen
            await pilot.press("slash", *"paper", "enter")
            await wait_until(pilot, lambda: session.terms == ("paper",), what="find applied")
            found = session.matches()
            assert len(found) >= 2
            n = len(found)

            def at_match() -> int:  # 1-based position of the cursor among the matches
                return found.index(session.current_turn["index"]) + 1

            k = at_match()  # the find moved the cursor onto a match
            await wait_until(pilot, lambda: f"match {k} of {n}" in info(session), what="match K of N")
            await pilot.press("n")
            k2 = k % n + 1
            await wait_until(pilot, lambda: at_match() == k2, what="n: the next match")
            assert f"match {k2} of {n}" in info(session)
            await pilot.press("p")  # back a match, not an episode
            await wait_until(pilot, lambda: at_match() == k, what="p: the previous match")
            assert f"match {k} of {n}" in info(session)

            await pilot.press("escape")  # clears the find, stays on the session
            await wait_until(pilot, lambda: session.terms == (), what="find cleared")
            assert app.screen is session and "find" not in info(session)
            await pilot.press("n")
            await wait_until(pilot, lambda: session.current_turn["episode_id"], what="n: an episode")
            first = session.current_turn["episode_id"]
            await pilot.press("n")
            await wait_until(
                pilot, lambda: session.current_turn["episode_id"] not in (None, first), what="n: the next one"
            )
            await pilot.press("p")
            await wait_until(
                pilot, lambda: session.current_turn["episode_id"] == first, what="p: the previous episode"
            )
            await pilot.press("escape")  # no find left: back to the sessions
            await wait_until(pilot, lambda: app.screen is not session, what="back")

    asyncio.run(scenario())
