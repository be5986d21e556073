"""Quitting the viewer that hosts the hub leaves the agents' open episodes open."""

from __future__ import annotations

import asyncio

import pytest
from tui_helpers import wait_until

from memviewer import paths
from memviewer.client import Publisher
from memviewer.store import repos
from memviewer.store.db import Store
from memviewer.tui.app import MemviewerApp

pytestmark = pytest.mark.integration


def test_quitting_the_hosting_viewer_does_not_abandon_open_episodes(settings) -> None:  # noqa: ANN001
    sock = settings.socket_path
    pub = Publisher(sock, spool_dir=settings.home_path / "agent-spool")

    async def scenario() -> dict:
        app = MemviewerApp(settings, hub="auto", hub_indexer=False)  # no hub runs: it hosts one
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until(pilot, lambda: app.hosted is not None, what="hub hosted")
            sid = pub.open_session(agent="outlives-the-viewer")
            eid = pub.start_episode(sid, "keep working after the viewer quits")
            assert await asyncio.to_thread(pub.flush, 10.0)
            await pilot.press("q")  # the app shuts down (and stops its hub) as the block ends
        assert not sock.exists() and app.hosted is not None
        return {"eid": eid, "report": app.hosted.close_report}

    try:
        out = asyncio.run(scenario())
    finally:
        pub.close(timeout=1)
    eid = out["eid"]
    assert out["report"] == {"abandoned_episodes": [], "open_episodes": [eid]}
    store = Store.open(paths.db_path(settings.home_path), readonly=True)
    try:
        with store.read() as conn:
            episode = repos.get_episode(conn, eid)
        kinds = {e.kind for e in store.events_since(0, 100)}
    finally:
        store.close()
    assert episode is not None and episode["status"] == "open" and episode["closed_by"] is None
    assert "episode.abandoned" not in kinds
