"""Start-up: host a hub when none answers, connect (read-only) when one does,
keep working when none can be reached; the palette and help list the actions."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest
from tui_helpers import screen_text, wait_for_workers, wait_until

from memviewer.tui.app import MemviewerApp
from memviewer.tui.screens.help import HelpScreen
from memviewer.tui.screens.session import SessionScreen
from memviewer.tui.screens.sessions import SessionsScreen
from memviewer.wire.probe import probe_hub

pytestmark = pytest.mark.integration


def test_viewer_hosts_a_hub_that_others_can_reach(settings) -> None:
    sock = settings.socket_path

    async def scenario() -> None:
        app = MemviewerApp(settings, hub="auto", hub_indexer=False)  # its own writable service
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until(pilot, lambda: app.hosted is not None, what="hub hosted")
            assert app.hub_status.role == "hosting" and not app.service.readonly
            assert app.sub_title == f"hosting hub on {sock}"
            version = await asyncio.to_thread(probe_hub, sock)  # the hub runs on this loop
            assert version
            from memviewer.client import Publisher

            pub = Publisher(sock, spool_dir=settings.home_path / "spool")
            sid = pub.open_session(agent="probe-agent", title="published while the viewer runs")
            assert await asyncio.to_thread(pub.flush, 10.0)
            screen = app.screen
            assert isinstance(screen, SessionsScreen)
            await wait_until(
                pilot,
                lambda: any(r["agent"] == "probe-agent" for r in screen.rows),
                what="the sessions table refreshed from the live stream",
            )
            table = screen.query_one("#sessions")
            assert table.get_cell(sid, "episodes").plain == "0"
            pub.start_episode(sid, "one more question")  # same order: the row updates in place
            assert await asyncio.to_thread(pub.flush, 10.0)
            await wait_until(
                pilot, lambda: table.get_cell(sid, "episodes").plain == "1", what="counts updated"
            )
            assert table.get_cell(sid, "active").plain == "1"
            pub.close(timeout=2)
        assert not sock.exists()
        assert await asyncio.to_thread(probe_hub, sock) is None

    asyncio.run(scenario())


def _serve(settings) -> subprocess.Popen:
    """``memviewer serve`` in its own process; returns once it answers."""
    env = {
        **os.environ,
        "MEMVIEWER_HOME": str(settings.home_path),
        "MEMVIEWER_SOCKET": str(settings.socket_path),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "memviewer.cli", "serve", "--no-index"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 20
    while probe_hub(settings.socket_path) is None:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "hub exited"
        assert time.monotonic() < deadline, "memviewer serve did not answer"
        time.sleep(0.05)
    return proc


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(timeout=15)


def test_viewer_connects_read_only_and_resumes_after_a_hub_restart(settings) -> None:
    from memviewer.client import Publisher

    procs = [_serve(settings)]
    try:

        async def publish(agent: str, spool: str) -> None:
            pub = Publisher(settings.socket_path, spool_dir=settings.home_path / spool)
            pub.open_session(agent=agent, title=f"written by {agent}")
            assert await asyncio.to_thread(pub.flush, 10.0)
            pub.close(timeout=2)

        async def scenario() -> None:
            app = MemviewerApp(settings, takeover_after=None)  # probe, then read-only; never host
            async with app.run_test(size=(120, 36)) as pilot:
                assert app.hub_status.role == "connected" and app.service.readonly
                assert app.sub_title.startswith(f"connected to hub {settings.socket_path}")
                await wait_until(pilot, lambda: app.feed.state == "connected", what="subscribed")
                await publish("remote-agent", "spool1")
                screen = app.screen
                await wait_until(
                    pilot,
                    lambda: any(r["agent"] == "remote-agent" for r in screen.rows),
                    what="the read-only viewer sees the hub's writes",
                )
                assert app.hosted is None

                await asyncio.to_thread(_stop, procs[0])  # the hub goes away ...
                await wait_until(pilot, lambda: app.feed.state == "reconnecting", what="reconnecting")
                seen = app.feed.last_seq
                procs.append(await asyncio.to_thread(_serve, settings))  # ... and comes back
                await wait_until(pilot, lambda: app.feed.state == "resumed", what="resumed")
                assert app.feed.detail == f"from seq {seen}"
                await publish("after-restart", "spool2")
                await wait_until(pilot, lambda: app.feed.last_seq > seen, what="new events after resume")
                await pilot.press("2")
                log = app.screen.query_one("#events")
                await wait_until(pilot, lambda: log.rows and log.rows[-1].seq == app.feed.last_seq)
                seqs = [e.seq for e in log.rows]
                assert seqs == sorted(set(seqs)) and app.feed.duplicates == 0
                assert f"resumed from seq {seen}" in str(app.screen.query_one("#live-status").render())

        asyncio.run(scenario())
    finally:
        for proc in procs:
            if proc.poll() is None:
                _stop(proc)


def test_no_reachable_hub_still_browses(make_app) -> None:
    async def scenario() -> None:
        app = make_app(hub="connect")
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            assert app.hub_status.role == "unavailable" and "hub not available" in app.sub_title
            assert len(app.screen.rows) == 6
            await pilot.press("2")
            await pilot.pause(0.1)
            assert "off" in screen_text(app)

    asyncio.run(scenario())


def test_help_and_command_palette_list_the_screen_actions(make_app) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            titles = [c.title for c in app.get_system_commands(app.screen)]
            for expected in (
                "Browse sessions",
                "Watch live events",
                "Open recall",
                "Export sessions",
                "Sort sessions",
                "Filter sessions",
                "Search sessions",
                "Show the next page",
            ):
                assert expected in titles
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            assert "Active/Archived/Both" in screen_text(app)
            await pilot.press("end")
            await pilot.pause()
            assert "Pause/Resume" in screen_text(app) and "open the highlighted turn" in screen_text(app)
            await pilot.press("escape")
            assert isinstance(app.screen, SessionsScreen)
            # the real palette runs the screen's action
            await pilot.press("ctrl+p")
            await pilot.press(*"sort")
            await pilot.pause(0.3)
            await pilot.press("enter")
            await wait_until(
                pilot,
                lambda: isinstance(app.screen, SessionsScreen) and app.screen.sort_index == 1,
                what="Sort ran from the palette",
            )

    asyncio.run(scenario())


def test_first_paint_happens_before_heavy_imports(settings, filled, tmp_path) -> None:
    """The Sessions screen paints without LanceDB, onnxruntime or pyarrow loaded (fresh process)."""
    report = tmp_path / "paint.json"
    code = (
        "import sys\n"
        "from memviewer.config import load_settings\n"
        "from memviewer.tui.app import MemviewerApp\n"
        f"s = load_settings(None, env={{}}, home={str(settings.home_path)!r},\n"
        f"                  socket={str(settings.socket_path)!r})\n"
        f"MemviewerApp(s, paint_report={str(report)!r}).run(headless=True, size=(120, 36))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, capture_output=True)
    import json

    data = json.loads(report.read_text())
    assert data["rows"] == 6 and data["total"] == 6
    assert data["heavy_loaded"] == []
    assert not settings.socket_path.exists()  # exited at first paint, before hosting the hub


def _first_word(title: str) -> str:
    return title.split()[0]


def test_every_palette_entry_is_worded_as_its_action(make_app) -> None:
    """Each palette title starts with a verb from the allowed list and each help text ends
    with the key; every described key of every screen has its own wording (no fallback to
    the footer's short description)."""
    import importlib
    import inspect
    import pkgutil

    from textual.binding import Binding
    from textual.screen import Screen

    import memviewer.tui.screens as screens
    from memviewer.tui.palette import SCREEN_COMMANDS, VERBS

    for info in pkgutil.iter_modules(screens.__path__):
        module = importlib.import_module(f"{screens.__name__}.{info.name}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if not issubclass(cls, Screen) or cls.__module__ != module.__name__:
                continue
            for binding in cls.__dict__.get("BINDINGS", []):
                if isinstance(binding, Binding) and binding.description:
                    assert (name, binding.action) in SCREEN_COMMANDS, (name, binding.action)
                    title, _ = SCREEN_COMMANDS[(name, binding.action)]
                    assert _first_word(title) in VERBS, title

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            seen = 0
            for mode, screen_type in app.MODES.items():
                await app.switch_mode(mode)  # keys would type into the Recall query
                await wait_until(pilot, lambda t=screen_type: isinstance(app.screen, t), what=mode)
                for command in app.get_system_commands(app.screen):
                    seen += 1
                    assert _first_word(command.title) in VERBS, command.title
                    assert command.help and command.help[0].isupper(), command
            assert seen > 40
            app.open_session("s-research")
            await wait_until(
                pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.data, what="session"
            )
            titles = [c.title for c in app.get_system_commands(app.screen)]
            assert "Find words in the session" in titles and "Go back" in titles
            assert all(_first_word(t) in VERBS for t in titles)

    asyncio.run(scenario())
