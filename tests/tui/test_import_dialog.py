"""Import from the viewer: a PraisonAI folder with one bad file (listed, the rest go in),
progress shown, the Sessions list reloaded; a missing path is an error line, nothing stored."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from tui_helpers import wait_for_workers, wait_until

from memviewer.tui.screens.import_dialog import ImportScreen

FIXTURES = Path(__file__).parents[1] / "fixtures" / "praisonai"


def test_import_a_folder_with_progress(make_app, tmp_path) -> None:
    folder = tmp_path / "sessions"
    shutil.copytree(FIXTURES, folder, ignore=shutil.ignore_patterns("*.lock"))
    (folder / "broken.json").write_text("{not json", encoding="utf-8")
    good = len([p for p in FIXTURES.glob("*.json")])

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            sessions = app.screen
            before = sessions.total
            await pilot.press("i")
            dialog = app.screen
            assert isinstance(dialog, ImportScreen)
            dialog.query_one("#import-path").value = str(tmp_path / "missing")
            await pilot.press("ctrl+s")
            await wait_until(
                pilot, lambda: "does not exist" in str(dialog.query_one("#import-status").render())
            )
            dialog.query_one("#import-path").value = str(folder)
            await pilot.press("ctrl+s")
            status = dialog.query_one("#import-status")
            await wait_until(pilot, lambda: "imported" in str(status.render()), what="import finished")
            text = str(status.render())
            assert f"imported {good} sessions" in text and "1 failed" in text and "broken.json" in text
            bar = dialog.query_one("#import-progress")
            assert bar.progress == bar.total and bar.total >= good
            await pilot.press("escape")
            await wait_until(pilot, lambda: sessions.total == before + good, what="the list reloaded")
            assert "billing-review-8c1e" in [r["session_id"] for r in sessions.rows]

    asyncio.run(scenario())


def test_the_path_placeholder_names_praisonais_session_folder(make_app) -> None:
    """PraisonAI keeps its sessions in ``~/.praisonai/sessions`` (``praisonaiagents.paths``);
    ``~/.praison`` is its legacy home, which a fresh install never creates."""

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            await pilot.press("i")
            dialog = app.screen
            assert isinstance(dialog, ImportScreen)
            assert dialog.query_one("#import-path").placeholder == "~/.praisonai/sessions or export.json"

    asyncio.run(scenario())


def test_no_page_or_module_names_the_legacy_praison_folder() -> None:
    root = Path(__file__).parents[2]
    files = [root / "README.md", *(root / "docs").glob("*.md"), *(root / "memviewer").rglob("*.py")]
    named = [str(p.relative_to(root)) for p in files if ".praison/" in p.read_text(encoding="utf-8")]
    assert named == []
