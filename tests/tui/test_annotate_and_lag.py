"""Tags and notes in the viewer (the dialog, badges, errors kept in the dialog) and the
index lag: the header's lag line while an indexer embeds, the Recall screen's notice."""

from __future__ import annotations

import asyncio
import os
import time

from tui_helpers import screen_text, wait_for_workers, wait_until

from memviewer import paths
from memviewer.index import timing
from memviewer.index.progress import CATCH_UP_PID
from memviewer.tui.notices import escalation_notice, lag_forms, lag_line
from memviewer.tui.screens.annotate import AnnotateScreen
from memviewer.tui.screens.recall import RecallScreen
from memviewer.tui.screens.session import SessionScreen


async def _type(pilot, text: str) -> None:
    await pilot.press(*[{" ": "space"}.get(c, c) for c in text])


def test_tagging_a_session_from_the_sessions_list(make_app, filled) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            screen = app.screen
            sid = screen.current_id()
            await pilot.press("t")
            assert isinstance(app.screen, AnnotateScreen)
            await _type(pilot, "Bug, needs-review")
            await pilot.press("enter")  # on to the note
            await _type(pilot, "look at the retries")
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: app.screen is screen, what="the dialog closes after the save")
            await wait_until(
                pilot,
                lambda: (
                    next(r for r in screen.rows if r["session_id"] == sid).get("tags")
                    == ["bug", "needs-review"]
                ),
                what="the list reloads with the tags",
            )
            assert "#bug #needs-review ✎" in screen_text(app)
            (stored,) = filled.annotations(sid)
            assert stored["note"] == "look at the retries"
            # editing again: the dialog starts from what is stored; removing a tag removes it
            await pilot.press("t")
            dialog = app.screen
            assert dialog.query_one("#annotate-tags").value == "bug needs-review"
            dialog.query_one("#annotate-tags").value = "needs-review"
            dialog.query_one("#annotate-note").text = ""
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: app.screen is screen, what="closed")
            await wait_until(
                pilot, lambda: filled.annotations(sid)[0]["tags"] == ["needs-review"], what="saved"
            )
            assert filled.annotations(sid)[0]["note"] is None

    asyncio.run(scenario())


def test_a_refused_tag_stays_in_the_dialog_and_nothing_is_written(make_app, filled) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            await pilot.press("t")
            dialog = app.screen
            dialog.query_one("#annotate-tags").value = "fine bad!tag"
            dialog.query_one("#annotate-note").text = "a note"
            await pilot.press("ctrl+s")
            error = dialog.query_one("#annotate-error")
            await wait_until(pilot, lambda: "bad!tag" in str(error.render()), what="the refusal shown")
            assert app.screen is dialog
            assert filled.annotations() == []  # checked before anything was written
            await pilot.press("escape")
            assert not isinstance(app.screen, AnnotateScreen)

    asyncio.run(scenario())


def test_tagging_a_turn_and_the_session_on_the_session_screen(make_app, filled) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_for_workers(pilot)
            app.push_screen(SessionScreen("s-research"))
            await wait_until(pilot, lambda: getattr(app.screen, "data", None), what="session loaded")
            screen = app.screen
            await wait_for_workers(pilot)
            turn = screen.current_turn
            assert turn is not None
            await pilot.press("t")
            assert isinstance(app.screen, AnnotateScreen)
            await _type(pilot, "cited")
            await pilot.press("enter")
            await _type(pilot, "the key answer")
            await pilot.press("ctrl+s")
            await wait_until(
                pilot,
                lambda: app.screen is screen and "#cited ✎ the key answer" in screen_text(app),
                what="the turn header shows its tag and note",
            )
            assert screen.current_turn["turn_id"] == turn["turn_id"]  # back on the same turn
            assert filled.annotations(turn["turn_id"])[0]["tags"] == ["cited"]
            await pilot.press("T")
            await _type(pilot, "research")
            await pilot.press("ctrl+s")
            await wait_until(
                pilot,
                lambda: "#research" in str(screen.query_one("#session-info").render()),
                what="the session header shows its tag",
            )

    asyncio.run(scenario())


def test_the_header_shows_the_lag_while_an_indexer_embeds(make_app, filled) -> None:
    """Nothing embedded and a background indexer at work (its pid file: this process):
    the header says how many turns are left; once they are embedded the line goes; new
    turns bring it back with an ETA from the measured rate."""
    lance = paths.lance_dir(filled.home)
    lance.mkdir(parents=True, exist_ok=True)

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(160, 36)) as pilot:
            await wait_for_workers(pilot)
            total = filled.stats()["counts"]["turns"]
            await wait_until(
                pilot,
                lambda: f"index: {total} turns to embed" in str(app.sub_title),
                what="the lag line",
            )
            await asyncio.to_thread(filled.sync_index)
            await wait_until(pilot, lambda: "index:" not in str(app.sub_title), what="the line gone")
            filled.manager.open_session(session_id="s-new", agent="a")
            # stored a minute ago: past the indexer's normal delay (a fresh turn is not shown)
            filled.manager.start_episode(
                "s-new", "one more question", episode_id="e-new", ts=time.time() - 60
            )
            await wait_until(
                pilot,
                lambda: (
                    "index: 1 turn to embed · ETA " in str(app.sub_title)
                    and "unknown" not in str(app.sub_title)
                ),
                what="the lag line with an ETA",
            )
            assert app.index_lag is not None and app.index_lag["lag"] == 1

    (lance / CATCH_UP_PID).write_text(str(os.getpid()), encoding="ascii")
    try:
        asyncio.run(scenario())
    finally:
        (lance / CATCH_UP_PID).unlink()


def test_the_header_says_when_no_indexer_runs(make_app) -> None:
    """Hub off, no background indexer, turns stored long ago: the header says that
    nothing embeds them and what to run (no countdown: there is no ETA)."""

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(160, 36)) as pilot:
            await wait_until(pilot, lambda: app.index_lag is not None, what="the first lag reading")
            assert app.index_lag["lag"] > 0 and app.index_lag["embedding"] is False
            assert app.index_lag["indexer"] is None and "reindex --catch-up" in app.index_lag["fix"]
            await wait_until(
                pilot,
                lambda: (
                    "turns to embed (no indexer runs: `memviewer reindex --catch-up`)" in str(app.sub_title)
                ),
                what="the no-indexer line",
            )
            assert "ETA" not in str(app.sub_title)

    asyncio.run(scenario())


def test_a_turn_stored_just_now_is_not_shown_as_lag(make_app, filled, monkeypatch) -> None:
    """Lag within the indexer's normal delay (a live agent's turn, seconds old) is the
    indexer catching up: no header line, though nothing embeds here."""
    monkeypatch.setattr(timing, "CATCH_UP_GRACE_S", 3600.0)  # "just now" however slow the run
    filled.sync_index()
    filled.manager.open_session(session_id="s-live", agent="a")
    filled.manager.start_episode("s-live", "a question this second", episode_id="e-live")

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(160, 36)) as pilot:
            await wait_until(
                pilot,
                lambda: app.index_lag is not None and app.index_lag["lag"] == 1,
                what="the lag reading",
            )
            assert app.index_lag["within_grace"] is True
            assert "embedding" not in app.index_lag  # who embeds is not even asked
            assert "index:" not in str(app.sub_title)

    asyncio.run(scenario())


def test_recall_on_a_lagging_index_shows_a_notice(make_app) -> None:
    async def scenario() -> None:
        app = make_app()  # nothing indexed
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("3")
            screen = app.screen
            assert isinstance(screen, RecallScreen)
            notice = screen.query_one("#recall-notice")
            assert not notice.display
            await pilot.press(*"retrieval", "enter")
            await wait_until(pilot, lambda: screen.result is not None, what="recall result")
            await wait_for_workers(pilot)
            assert notice.display
            text = str(notice.render())
            assert "the index is catching up" in text and "not embedded yet" in text
            assert "keyword-only result" in text  # the fixture's keyword hits among unembedded turns
            assert "no indexer runs: run `memviewer reindex --catch-up`" in text  # hub off, no catch-up

    asyncio.run(scenario())


def test_notices_render_unknown_escalations_and_skip_routine_ones() -> None:
    diag = {
        "escalations": ["session-retriever:stage1-empty", "index:damaged", "index:lagging"],
        "index_damaged": {"message": "turns table rolled back"},
        "index_lag": {"lag": 1200, "eta_s": 30.0, "keyword_results": 2},
    }
    notice = escalation_notice(diag)
    assert notice is not None
    lines = notice.plain.splitlines()
    assert lines[0].startswith("⚠ index:damaged: turns table rolled back")
    assert "1,200 turns not embedded yet (about 30 s)" in lines[1] and "2 keyword-only results" in lines[1]
    assert "re-run (ctrl+r)" in lines[1]  # no "indexer" key (an older hub): someone may embed
    assert escalation_notice({"escalations": ["session-retriever:stage2-empty"]}) is None
    assert lag_line({"lag": 0, "eta_s": 0.0}) == ""
    assert lag_line({"lag": 5000, "eta_s": 600.0}) == "index: 5,000 turns to embed · ETA 10 min"
    assert lag_line({"lag": 3, "eta_s": None, "embedding": False}).endswith("`memviewer reindex --catch-up`)")
    assert lag_forms({"lag": 3, "eta_s": None, "embedding": False}) == (
        "index: 3 turns to embed (no indexer runs: `memviewer reindex --catch-up`)",
        "index: 3 turns to embed (no indexer runs)",  # a narrow header drops the fix first
        "no indexer: 3 turns to embed",
        "no indexer: 3 to embed",
    )
    assert lag_forms({"lag": 5000, "eta_s": 600.0}) == ("index: 5,000 turns to embed · ETA 10 min",)
