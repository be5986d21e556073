"""Export dialog: marked sessions to JSONL with redaction, the whole store to
Markdown, and a bad path that writes nothing."""

from __future__ import annotations

import asyncio
import json

from tui_helpers import notifications, wait_for_workers, wait_until

from memviewer.tui.screens.export import ExportScreen


async def _open_export(app, pilot) -> ExportScreen:
    await wait_for_workers(pilot)
    await pilot.press("e")
    screen = app.screen
    assert isinstance(screen, ExportScreen)
    await pilot.pause()
    return screen


async def _export_from_session(app, pilot, session_id: str) -> ExportScreen:
    """The dialog opened from a session's screen (that session preselected)."""
    await wait_for_workers(pilot)
    app.open_session(session_id)
    await wait_for_workers(pilot)
    return await _open_export(app, pilot)


def test_export_marked_sessions_as_jsonl(make_app, tmp_path) -> None:
    out = tmp_path / "marked.jsonl"

    async def scenario() -> None:
        app = make_app()
        said = notifications(app)
        async with app.run_test(size=(120, 36), notifications=True) as pilot:
            await wait_for_workers(pilot)
            sessions = app.screen
            first, second = [r["session_id"] for r in sessions.rows[:2]]
            await pilot.press("space", "space")
            screen = await _open_export(app, pilot)
            assert screen.chosen_ids() == sorted([first, second])
            screen.query_one("#format").value = "jsonl"
            screen.query_one("#redact").value = "standard"
            screen.query_one("#path").value = str(out)
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: not screen.running and screen.last_result, what="export done")
            assert screen.last_result["sessions"] == 2 and screen.last_result["redact"] == "standard"
            bar = screen.query_one("#export-progress")
            assert bar.progress == bar.total == 2
            assert f"exported 2 sessions to {out}" in str(screen.query_one("#export-status").render())
            assert any(str(out) in m for m in said)
        lines = out.read_text(encoding="utf-8").splitlines()
        assert len(lines) >= 2
        exported = {
            json.loads(line).get("session_id") or json.loads(line).get("session", {}).get("session_id")
            for line in lines
        }
        assert {first, second} <= exported

    asyncio.run(scenario())


def test_export_all_as_markdown_from_a_session(make_app, tmp_path) -> None:
    out = tmp_path / "all.md"

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _export_from_session(app, pilot, "s-zh")
            assert screen.chosen_ids() == ["s-zh"]  # the current session is preselected
            await pilot.click("#which-all")
            assert screen.chosen_ids() is None
            screen.query_one("#format").value = "md"
            screen.query_one("#path").value = str(out)
            await pilot.click("#export-go")
            await wait_until(pilot, lambda: not screen.running and screen.last_result, what="export done")
            assert screen.last_result["sessions"] == 6
            await pilot.press("escape")
            assert app.screen.session_id == "s-zh"
        text = out.read_text(encoding="utf-8")
        assert "请帮我总结一下昨天的会议记录" in text and "Refund policy questions" in text

    asyncio.run(scenario())


def test_export_to_a_missing_folder_writes_nothing(make_app, tmp_path) -> None:
    exports = tmp_path / "exports"
    exports.mkdir()
    out = exports / "no-such-folder" / "x.json"

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _open_export(app, pilot)
            screen.query_one("#path").value = str(out)
            await pilot.press("ctrl+s")
            await wait_for_workers(pilot)
            assert "does not exist" in str(screen.query_one("#export-status").render())
            assert not screen.running and screen.last_result is None
            screen.query_one("#path").value = str(exports)  # a folder, for a file format
            await pilot.press("ctrl+s")
            await wait_until(
                pilot,
                lambda: "export failed" in str(screen.query_one("#export-status").render()),
                what="the exporter's error",
            )
        assert list(exports.iterdir()) == []

    asyncio.run(scenario())


def test_a_praisonai_export_over_existing_files_asks_then_a_second_press_replaces(make_app, tmp_path) -> None:
    """The CLI's --force, in the dialog: the first press names the files, the second replaces them."""
    folder = tmp_path / "pa"

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await _export_from_session(app, pilot, "s-zh")
            screen.query_one("#format").value = "praisonai"
            screen.query_one("#path").value = str(folder)
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: not screen.running and screen.last_result, what="first export")
            target = folder / "s-zh.json"
            target.write_text("an older copy", encoding="utf-8")
            screen.last_result = None
            await pilot.press("ctrl+s")
            status = screen.query_one("#export-status")
            await wait_until(pilot, lambda: "press Export again" in str(status.render()), what="the question")
            assert target.read_text(encoding="utf-8") == "an older copy"  # nothing replaced yet
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: not screen.running and screen.last_result, what="replaced")
            assert json.loads(target.read_text(encoding="utf-8"))["session_id"] == "s-zh"

    asyncio.run(scenario())
