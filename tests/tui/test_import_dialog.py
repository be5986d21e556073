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
