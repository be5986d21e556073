"""A viewer connected to a hub whose owner quits: it says so instead of "connected", then
takes over hosting (a real hub process is the first owner; an agent publishes afterwards)."""

from __future__ import annotations

import asyncio

import pytest
from tui_helpers import wait_until

from memviewer.client import Publisher
from memviewer.tui.app import MemviewerApp
from memviewer.wire.testing import HubProcess

pytestmark = pytest.mark.integration


def test_second_viewer_takes_over_hosting_when_the_hub_stops(settings) -> None:
    sock = settings.socket_path
    hub = HubProcess(settings.home_path, sock).start()
    pub = Publisher(sock, spool_dir=settings.home_path / "agent-spool", max_backoff=0.2)

    async def scenario() -> None:
        app = MemviewerApp(settings, hub="auto", hub_indexer=False, takeover_after=1.0)
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until(pilot, lambda: app.feed.state == "connected", what="subscribed")
            assert app.hub_status.role == "connected" and app.service.readonly
            await asyncio.to_thread(hub.stop)
            await wait_until(pilot, lambda: app.hosted is not None, timeout=30, what="took over hosting")
            assert app.hub_status.role == "hosting" and not app.service.readonly
            assert app.sub_title == f"hosting hub on {sock}"
            sid = pub.open_session(agent="after-takeover", title="published to the new host")
            assert await asyncio.to_thread(pub.flush, 10.0)
            await wait_until(
                pilot,
                lambda: any(r["session_id"] == sid for r in app.service.sessions()["sessions"]),
                what="stored by the viewer's hub",
            )
            await wait_until(pilot, lambda: app.feed.state in ("connected", "resumed"), what="live again")

    try:
        asyncio.run(scenario())
    finally:
        pub.close(timeout=1)
        if hub.proc is not None and hub.proc.poll() is None:
            hub.kill()
