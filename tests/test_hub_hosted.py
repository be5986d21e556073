"""Stopping a hub without abandoning open episodes (how the viewer's hosted hub stops).

An agent that outlives the hub spools its turns and replays them when a hub
comes back; they must land in the same, still open, episode.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from memviewer.client import Publisher
from memviewer.store import repos
from memviewer.wire.hub import Hub

pytestmark = pytest.mark.integration


async def _wait(predicate: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def _episode(service: Any, eid: str) -> dict[str, Any]:
    with service.store.read() as conn:
        row = repos.get_episode(conn, eid)
    assert row is not None
    return row


def test_a_publisher_replays_into_its_episode_after_a_hub_stop(
    service: Any, settings: Any, tmp_path: Path
) -> None:
    """A stopped hub leaves episodes open: the agent's spooled turn lands in its episode."""
    sock = settings.socket_path

    async def main() -> None:
        hub = Hub(service, sock, start_indexer=False)
        await hub.start()
        pub = Publisher(sock, tmp_path / "agent-spool")
        try:
            sid = pub.open_session(agent="long-lived")
            eid = pub.start_episode(sid, "refactor the parser")
            assert await asyncio.to_thread(pub.flush, 10.0)
            report = await hub.close()
            assert report == {"abandoned_episodes": [], "open_episodes": [eid]}
            assert not sock.exists()

            # the agent keeps working while no hub answers: its turn goes to its spool
            tid = pub.add_turn(eid, "assistant", "parser split into tokenizer and grammar")
            await _wait(lambda: pub.stats()["spooled_commands"] >= 1, "the turn to be spooled")

            hub2 = Hub(service, sock, start_indexer=False)  # back on the home
            await hub2.start()
            try:
                assert await asyncio.to_thread(pub.flush, 10.0)
            finally:
                await hub2.close()
        finally:
            await asyncio.to_thread(pub.close, 2.0, end_episodes=False)

        with service.store.read() as conn:
            turn = repos.get_turn(conn, tid)
        episode = _episode(service, eid)
        assert pub.errors == 0 and not pub.error_log and pub.refusals == []
        assert turn is not None and turn["episode_id"] == eid
        assert episode["status"] == "open" and episode["closed_by"] is None

    asyncio.run(main())
