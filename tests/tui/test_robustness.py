"""Hostile and racy input for the viewer (the TUI robustness audit): markup in ids and
queries, terminal escape sequences and lone surrogates in stored text, late search
results, a session deleted while open, the Recall keys after Enter, LIKE wildcards in
the filter, dialogs and the command palette, an export closed while it runs, small terminals.

``run_test`` turns toasts off unless asked (``notifications=True``); the markup crashes
only happen when a toast renders, so the tests that cover them turn toasts on.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from tui_helpers import notifications, screen_raw, screen_text, wait_for_workers, wait_until

from memviewer.tui.app import ControlCharFilter
from memviewer.tui.formatting import hit_text, one_line, printable, turn_text
from memviewer.tui.screens.export import ExportScreen
from memviewer.tui.screens.recall import RecallScreen
from memviewer.tui.screens.session import SessionScreen
from memviewer.tui.widgets.turn_list import TurnList

T0 = 1740819600.0
ANSI = (
    "\x1b[31mRED\x1b[0m \x1b[2J\x1b[H cleared? \x1b]0;evil title\x07 bell tab\there\r\nnext \u202eflip\u202c"
)


def _import(service: Any, sid: str, title: str = "t", content: str = "hi", **session: Any) -> None:
    service.import_session(
        {"id": sid, "agent": "a", "title": title, "started_at": T0, "last_seen_at": T0 + 1, **session},
        [{"id": f"{sid}-1", "role": "user", "content": content, "timestamp": T0}],
    )


async def _open(app: Any, pilot: Any, session_id: str) -> SessionScreen:
    await wait_for_workers(pilot)
    app.open_session(session_id)
    await wait_until(pilot, lambda: isinstance(app.screen, SessionScreen), what="session screen")
    await wait_for_workers(pilot)
    await pilot.pause()
    return app.screen


# -- markup ---------------------------------------------------------------------------
def test_search_for_markup_is_shown_verbatim_not_a_crash(make_app) -> None:
    """``[/]`` as a query: the refusal toast used to be parsed as markup (MarkupError, app gone)."""

    async def scenario() -> None:
        app = make_app()
        said = notifications(app)
        async with app.run_test(size=(120, 30), notifications=True) as pilot:
            await wait_for_workers(pilot)
            await pilot.press("s", *"[/]", "enter")
            await wait_for_workers(pilot)
            await pilot.pause(0.2)
            assert app.is_running
            assert any("'[/]'" in m for m in said)
            assert "nothing to search for in '[/]'" in screen_text(app)  # the toast, verbatim

    asyncio.run(scenario())


def test_missing_session_with_markup_id_and_export_of_one(filled, make_app) -> None:
    """A missing session whose id is markup (toast) and the Export dialog over a session whose
    id is markup (radio-button label): both showed as MarkupError crashes."""
    _import(filled, "s[/]x", title="zz markup id", last_seen_at=T0 + 10**9)

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 30), notifications=True) as pilot:
            screen = await _open(app, pilot, "[b]gone[/b]-[/]")
            assert "cannot open session: unknown session '[b]gone[/b]-[/]'" in screen_text(app)
            assert screen.data is None
            await pilot.press("escape")
            await wait_for_workers(pilot)
            assert app.screen.current_id() == "s[/]x"  # newest first
            await pilot.press("e")
            await wait_until(pilot, lambda: isinstance(app.screen, ExportScreen), what="export dialog")
            await pilot.pause()
            assert "current session  s[/]x" in screen_text(app)
            assert app.is_running

    asyncio.run(scenario())


# -- terminal control characters -----------------------------------------------------
def test_printable_shows_controls_and_keeps_text() -> None:
    assert printable("plain [b]text[/b]\twith\nlines") == "plain [b]text[/b]\twith\nlines"
    assert printable("\x1b[2J\x00\x07\x7f") == "␛[2J␀␇␡"
    assert printable("a\r\nb\rc") == "a\nb␍c"
    assert printable("\x9b31m \u202eevil\u2066") == "\\x9b31m \\u202eevil\\u2066"
    assert printable("lone \ud800 surrogate") == "lone \ufffd surrogate"
    assert one_line("x\x1b[31m\n\ny", 40) == "x␛[31m y"
    assert one_line("\x1b" * 50, 10) == "␛" * 9 + "…"
    text = turn_text({"index": 1, "role": "user", "content": "\x1b]0;t\x07\ud83d", "tool_call_id": "\x1b"})
    assert "\x1b" not in text.plain and "␛]0;t␇\ufffd" in text.plain and "↳ ␛" in text.plain
    hit = hit_text({"title": "\x1b[2J", "session_id": "s\x1b", "snippet": "\x9b"})
    assert "\x1b" not in hit.plain and "\x9b" not in hit.plain


def test_a_search_hit_on_an_archived_turn_says_so() -> None:
    """``at #9`` alone reads as a turn the agent still sees; the CLI's hits say it too."""
    hit = {"title": "t", "session_id": "s-1", "snippet": "x", "anchor_index": 9}
    before, anchor = {"index": 8, "archived": True}, {"index": 9, "archived": True}
    archived = hit_text({**hit, "messages": [before, anchor]})
    active = hit_text({**hit, "messages": [before, {**anchor, "archived": False}]})
    assert "at #9 (archived)" in archived.plain
    assert "at #9" in active.plain and "archived" not in active.plain


def test_control_filter_drops_what_the_terminal_would_act_on() -> None:
    """The backstop behind ``printable``: zero-width controls go, so the layout is unchanged."""
    red = Style(color="red")
    segments = [Segment("ok "), Segment("\x1b[2Jx\u202e", red), Segment("\ud800")]
    out = ControlCharFilter().apply(segments, Color(0, 0, 0))
    assert [s.text for s in out] == ["ok ", "[2Jx", "\ufffd"] and out[1].style == red
    clean = [Segment("nothing to do")]
    assert ControlCharFilter().apply(clean, Color(0, 0, 0)) is clean


def test_stored_escape_sequences_never_reach_the_terminal(filled, make_app) -> None:
    _import(filled, "s-ansi\x1b[H", title="title \x1b[31mansi\x1b[0m \x1b]0;evil\x07", content=ANSI)

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            for raw in (screen_raw(app), screen_text(app)):  # the Sessions table
                assert "\x1b[2J" not in raw and "\x1b]0;" not in raw and "\x1b[31mansi" not in raw
            assert "title ␛[31mansi␛[0m" in screen_text(app)
            await pilot.press("s", *"cleared", "enter")  # a search hit with the snippet
            await wait_until(pilot, lambda: app.screen.hits, what="search hits")
            await pilot.pause()
            assert "\x1b[2J" not in screen_raw(app) and "␛[2J␛[H cleared?" in screen_text(app)
            await pilot.press("escape")
            await _open(app, pilot, "s-ansi\x1b[H")
            raw = screen_raw(app)
            assert "\x1b[2J" not in raw and "\x1b]0;" not in raw and "\x1b[H" not in raw
            assert "\u202e" not in raw
            text = screen_text(app)
            assert "s-ansi␛[H" in text and "␛[31mRED␛[0m ␛[2J␛[H cleared? ␛]0;evil title␇" in text
            assert "\\u202eflip\\u202c" in text

    asyncio.run(scenario())


def test_lone_surrogates_display_instead_of_crashing(filled, make_app) -> None:
    """A lone surrogate (from an old store or a JSON ``\\ud800`` escape) cannot be encoded for
    the terminal; it shows as U+FFFD. What is stored is not touched."""
    real = filled.session

    def with_surrogates(session_id: str) -> dict[str, Any]:
        data = real(session_id)
        data["session"]["title"] = "bad \ud800 title"
        data["turns"][0]["content"] = "bad \udfff content"
        data["turns"][0]["metadata"] = {"k": "\ud83d"}
        return data

    filled.session = with_surrogates

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _open(app, pilot, "s-research")
            await pilot.press("v", "x")  # archived view (turn #0), everything expanded
            await pilot.pause()
            text = screen_text(app)
            assert "bad \ufffd title" in text and "bad \ufffd content" in text
            screen_raw(app).encode("utf-8")  # raised UnicodeEncodeError before
            assert screen.data["turns"][0]["content"] == "bad \udfff content"

    asyncio.run(scenario())


# -- races and stale state -------------------------------------------------------------
def test_late_hits_of_a_superseded_search_are_dropped(filled, make_app) -> None:
    release = threading.Event()
    real = filled.search

    def slow_search(query: str | None = None, **kw: Any) -> dict[str, Any]:
        if query == "refund":
            release.wait(10)  # a cold index: finishes after the next search
        return real(query=query, **kw)

    filled.search = slow_search

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            screen = app.screen
            await pilot.press("s", *"refund", "enter")
            screen.query_one("#search").value = ""
            await pilot.press(*"launch", "enter")
            await wait_until(pilot, lambda: screen.hits, what="launch hits")
            release.set()
            await wait_for_workers(pilot)
            await pilot.pause(0.1)
            assert screen.hits and all(h["session_id"].startswith("s-launch") for h in screen.hits)

    asyncio.run(scenario())


def test_a_session_deleted_while_open_shows_the_error_not_its_turns(filled, make_app) -> None:
    from sqlalchemy import text

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 30)) as pilot:
            screen = await _open(app, pilot, "s-research")
            assert screen.data is not None
            with filled.store.write() as tx:
                for table in ("turns", "episodes"):
                    tx.conn.execute(text(f"DELETE FROM {table} WHERE session_id = 's-research'"))
                tx.conn.execute(text("DELETE FROM sessions WHERE id = 's-research'"))
            await pilot.press("ctrl+r")
            await wait_for_workers(pilot)
            for key in ("", "v", "v", "x"):  # no later key redraws the deleted session
                if key:
                    await pilot.press(key)
                await pilot.pause()
                shown = screen_text(app)
                assert "cannot open session: unknown session 's-research'" in shown
                assert "Find the three most cited" not in shown and "retrieval" not in shown
                assert not screen.query_one("#active-list", TurnList).turn_indexes
                assert not screen.query_one("#archived-list", TurnList).turn_indexes
                assert not screen.query_one("#episodes").display

    asyncio.run(scenario())


def test_recall_keys_work_after_enter_in_the_query(filled, make_app) -> None:
    """Enter runs and hands the keys to the results: t, m and 1 do what docs/viewer.md says;
    ``/`` goes back to the query, where typing works again."""
    filled.sync_index()

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("3")
            screen = app.screen
            assert isinstance(screen, RecallScreen)
            await pilot.press(*"launch plan", "enter")
            await wait_until(pilot, lambda: screen.result is not None, timeout=60, what="recall result")
            await wait_for_workers(pilot)
            assert screen.focused is screen.query_one("#results")
            await pilot.press("t")
            assert screen.query_one("#recall-tabs").active == "tab-stage1"
            await pilot.press("slash", "end", *" now")  # focus selects the query; End keeps it
            assert screen.query_one("#query").value == "launch plan now"
            await pilot.press("escape", "m")
            assert screen.query_one("#mode").value == "flat"
            await wait_for_workers(pilot)
            await pilot.press("1")
            assert screen.query_one("#query").value == "launch plan now"
            assert type(app.screen).__name__ == "SessionsScreen"

    asyncio.run(scenario())


def test_percent_and_underscore_in_the_filter_are_literal(filled, make_app) -> None:
    _import(filled, "s-pct", title="done 100% of it")
    for text, expected in (("%", {"s-pct"}), ("0% o", {"s-pct"}), ("_", set()), ("s_r", set())):
        page = filled.sessions(filter=text, limit=50)
        assert {s["session_id"] for s in page["sessions"]} == expected, text
        assert page["total"] == len(expected)
    assert "s-research" in {s["session_id"] for s in filled.sessions(filter="s-r", limit=50)["sessions"]}
    assert filled.sessions(filter="\\", limit=50)["total"] == 0

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            await pilot.press("slash", "_")
            await wait_until(pilot, lambda: app.screen.filter_text == "_", what="filter applied")
            await wait_for_workers(pilot)
            assert app.screen.total == 0 and "No sessions match the filter" in screen_text(app)

    asyncio.run(scenario())


# -- dialogs and the palette -------------------------------------------------------------
def test_palette_over_a_dialog_offers_only_the_dialog_keys(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            sessions = app.screen
            titles = {c.title for c in app.get_system_commands(sessions)}
            assert {"Export sessions", "Watch live events", "Open recall"} <= titles
            await pilot.press("e")
            await wait_until(pilot, lambda: isinstance(app.screen, ExportScreen), what="export dialog")
            titles = {c.title for c in app.get_system_commands(app.screen)}
            assert not titles & {"Export sessions", "Watch live events", "Open recall", "Browse sessions"}
            assert "Export" in titles  # the dialog's own ctrl+s
            app.action_export()  # what the palette command called
            await pilot.pause()
            assert [type(s).__name__ for s in app.screen_stack] == ["SessionsScreen", "ExportScreen"]

    asyncio.run(scenario())


def test_an_export_closed_while_running_still_reports_its_end(filled, make_app, tmp_path) -> None:
    started, release = threading.Event(), threading.Event()
    real = filled.export

    def slow_export(*args: Any, **kw: Any) -> Any:
        started.set()
        release.wait(10)
        return real(*args, **kw)

    filled.export = slow_export
    out = tmp_path / "closed.json"

    async def scenario() -> None:
        app = make_app()
        said = notifications(app)
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            await pilot.press("e")
            await wait_until(pilot, lambda: isinstance(app.screen, ExportScreen), what="export dialog")
            dialog = app.screen
            dialog.query_one("#path").value = str(out)
            await pilot.press("ctrl+s")
            await wait_until(pilot, started.is_set, what="export started")
            await pilot.press("escape")
            await wait_until(pilot, lambda: not isinstance(app.screen, ExportScreen), what="dialog closed")
            release.set()
            deadline = time.monotonic() + 15
            while not any("exported 1 session to" in m for m in said):
                assert time.monotonic() < deadline, said
                await pilot.pause(0.05)
            assert f"exported 1 session to {out}" in said and out.exists()
            assert app.is_running

    asyncio.run(scenario())


# -- small terminals ---------------------------------------------------------------------
def test_small_terminals_keep_fields_and_turns_on_screen(filled, make_app) -> None:
    filled.sync_index()
    _import(filled, "s-longtitle", title="T" * 3000 + "\n" * 40 + "end", content="visible turn")

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for_workers(pilot)
            await pilot.press("3")
            recall = app.screen
            fields = ("#scope", "#top-k", "#as-of", "#rerank", "#mode")

            def regions() -> dict[str, Any]:
                return {wid: recall.query_one(wid).region for wid in fields}

            # The narrow layout is a breakpoint class set once the screen knows its size; on
            # a loaded machine the first layout can come before it, so wait for it to settle.
            with contextlib.suppress(AssertionError):  # the asserts below say which field
                await wait_until(pilot, lambda: all(r.width and r.right <= 80 for r in regions().values()))
            for wid, region in regions().items():
                assert region.width and region.right <= 80, (wid, region)
            await pilot.press(*"launch plan", "enter")
            await wait_until(pilot, lambda: recall.result is not None, timeout=60, what="recall result")
            await wait_for_workers(pilot)
            assert recall.query_one("#results").region.height >= 6  # header and 5 rows at least
            await pilot.press("1")
            await pilot.resize_terminal(60, 20)
            screen = await _open(app, pilot, "s-longtitle")
            assert "visible turn" in screen_text(app)
            await pilot.press("escape")
            screen = await _open(app, pilot, "s-research")
            await pilot.press("b")  # bookends on: the turns still get rows
            await pilot.pause()
            turns = screen.query_one("#active-list").region
            assert turns.y < 15 and turns.bottom <= 19, turns
            await pilot.press("e")
            await wait_until(pilot, lambda: isinstance(app.screen, ExportScreen), what="export dialog")
            await pilot.pause()
            assert app.screen.query_one("#export-box").region.right <= 60
            assert app.screen.query_one("#redact").region.right <= 60
            await pilot.press("escape", "2")
            await pilot.pause()
            assert "received 0" in screen_text(app)  # the counters line of the Live screen

    asyncio.run(scenario())
