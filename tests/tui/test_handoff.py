"""Copy to the clipboard (a turn, a session as Markdown, a recall as a CLI command and as
JSON) and open a turn or a session in $PAGER / $EDITOR."""

from __future__ import annotations

import asyncio
import json
import shlex

import pytest
from tui_helpers import wait_for_workers, wait_until

from memviewer.commands.recall import recall_cmd
from memviewer.tui.handoff import recall_command
from memviewer.tui.screens.recall import resolve_as_of
from memviewer.tui.screens.session import SessionScreen


async def _open(app, pilot, sid: str) -> SessionScreen:
    await wait_for_workers(pilot)
    app.open_session(sid)
    await wait_until(
        pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.data is not None, what="loaded"
    )
    await pilot.pause()
    return app.screen


def test_copy_turn_and_session_markdown(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _open(app, pilot, "s-research")
            turn = screen.current_turn
            await pilot.press("c")
            assert app.clipboard.startswith(f"#{turn['index']} {turn['role']} · s-research")
            assert (turn["content"] or "").strip().splitlines()[0] in app.clipboard
            await pilot.press("C")
            await wait_until(pilot, lambda: app.clipboard.startswith("#"), what="markdown copied")
            await wait_until(
                pilot, lambda: "s-research" in app.clipboard and "archived" in app.clipboard.lower()
            )
            assert app.clipboard.count("\n") > 20  # the whole session, not one turn

    asyncio.run(scenario())


def test_pager_and_editor_get_the_text(make_app, tmp_path, monkeypatch) -> None:
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("PAGER", f"cp -t {shlex.quote(str(out / 'pager'))}")
    monkeypatch.setenv("EDITOR", f"cp -t {shlex.quote(str(out / 'editor'))}")
    monkeypatch.delenv("VISUAL", raising=False)
    (out / "pager").mkdir()
    (out / "editor").mkdir()

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _open(app, pilot, "s-research")
            turn = screen.current_turn
            await pilot.press("o")
            (page,) = list((out / "pager").iterdir())
            assert page.read_text(encoding="utf-8").startswith(f"#{turn['index']} {turn['role']}")
            page.unlink()
            await pilot.press("E")
            await wait_until(pilot, lambda: list((out / "editor").iterdir()), what="the editor ran")
            (doc,) = list((out / "editor").iterdir())
            assert doc.suffix == ".md" and "s-research" in doc.read_text(encoding="utf-8")
            monkeypatch.setenv("PAGER", "false")  # a failing pager is reported, not raised
            await pilot.press("o")
            await pilot.pause()
            assert app.screen is screen

    asyncio.run(scenario())


@pytest.fixture
def indexed(filled):
    filled.sync_index()
    return filled


def test_copy_recall_as_command_and_json(indexed, make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await pilot.press("3")
            screen = app.screen
            screen.query_one("#scope-id").value = "alice"
            screen.query_one("#k").value = "2"
            screen.query_one("#as-of").value = "2025-03-02 10:00"
            screen.query_one("#query").focus()
            await pilot.press(*"it's papers", "enter")
            await wait_until(pilot, lambda: screen.result is not None, what="recall result")
            await wait_for_workers(pilot)
            await pilot.press("y")
            args = shlex.split(app.clipboard)
            assert args[:3] == ["memviewer", "recall", "it's papers"]
            params = recall_cmd.make_context("recall", args[2:]).params
            assert params["scope_id"] == "alice" and params["top_sessions"] == 2
            assert float(params["as_of"]) == resolve_as_of("2025-03-02 10:00") and params["as_json"]
            await pilot.press("Y")
            assert json.loads(app.clipboard) == json.loads(json.dumps(screen.result, default=str))

    asyncio.run(scenario())


def test_recall_command_quotes_and_flags() -> None:
    cmd = recall_command("a 'b' $c", {"mode": "flat", "top_k": 3, "scope": "user", "as_of": 1.5})
    assert shlex.split(cmd) == [
        "memviewer",
        "recall",
        "a 'b' $c",
        "--scope",
        "user",
        "--top-k",
        "3",
        "--flat",
        "--as-of",
        "1.5",
        "--json",
    ]
