"""Export the README screenshots from the viewer itself.

    /tmp/venv/bin/python assets/make_screenshots.py

Loads the deterministic demo history (``memviewer.demo.scenario``, with a fixed
"now") into a temporary store, indexes it with the real embedding model, runs
the viewer headless at 120x36 hosting a hub on a fixed socket path, and saves:

* ``assets/sessions.svg``  the Sessions screen
* ``assets/session.svg``   the compacted session, archived and active side by side
* ``assets/session-active.svg`` the same session's active window with bookends
* ``assets/recall.svg``    a recall query and its score breakdown
* ``assets/live.svg``      the Live screen after the stored events replayed
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from memviewer.config import load_settings
from memviewer.demo.scenario import build_scenario
from memviewer.service import MemoryService
from memviewer.tui.app import MemviewerApp
from memviewer.tui.screens.session import SessionScreen

HERE = Path(__file__).resolve().parent
NOW = 1_748_779_200.0  # 2025-06-01T12:00:00Z: the demo's "two weeks" end here
SOCKET_DIR = Path("/tmp/memviewer-demo")
SIZE = (120, 36)
RECALL_QUERY = "which token did staging deploys need"


async def _until(pilot, check, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise TimeoutError("screen did not get ready")
        await pilot.pause(0.05)


def _save(app: MemviewerApp, name: str) -> None:
    svg = app.export_screenshot(title="memviewer")
    (HERE / name).write_text(svg, encoding="utf-8")
    print(f"wrote assets/{name}")


async def _shoot(settings, service: MemoryService) -> None:
    app = MemviewerApp(settings, service=service, hub="auto", hub_indexer=False)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.screen.loaded_once and app.feed.state == "connected")
        await pilot.pause(0.5)
        _save(app, "sessions.svg")

        compacted = max(service.sessions(limit=100)["sessions"], key=lambda s: s["archived_turns"])
        app.push_screen(SessionScreen(compacted["session_id"], view="both"))
        await _until(pilot, lambda: getattr(app.screen, "data", None) is not None)
        await pilot.pause(0.3)
        _save(app, "session.svg")
        app.screen.set_view("active")
        await pilot.press("b")
        await pilot.pause(0.3)
        _save(app, "session-active.svg")
        app.pop_screen()

        await pilot.press("3")
        await pilot.press(*RECALL_QUERY, "enter")
        await _until(pilot, lambda: app.screen.result is not None)
        await pilot.press("escape")
        await pilot.pause(0.3)
        _save(app, "recall.svg")

        await pilot.press("2")
        await pilot.pause(1.0)
        _save(app, "live.svg")


def main() -> None:
    home = Path(tempfile.mkdtemp(prefix="mv-assets-"))
    shutil.rmtree(SOCKET_DIR, ignore_errors=True)
    settings = load_settings(
        home / "none.toml", env={}, home=str(home / "home"), socket=str(SOCKET_DIR / "hub.sock")
    )
    service = MemoryService(settings)
    try:
        results = service.apply_batch(build_scenario(now=NOW))
        failed = [r for r in results if "error" in r]
        if failed:
            raise SystemExit(f"demo commands failed: {failed[:3]}")
        service.sync_index()
        asyncio.run(_shoot(settings, service))
    finally:
        service.close()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
