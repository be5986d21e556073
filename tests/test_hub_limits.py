"""``HubLimits``: the hub's bounds in one value, with the defaults docs/protocol.md states, and
the ``stats`` a hub built from its parts still reports (the split of wire/hub.py, issue 30)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from memviewer.wire import protocol
from memviewer.wire.hub import Hub
from memviewer.wire.hub_limits import HubLimits
from memviewer.wire.remote import RemoteService

# docs/protocol.md, `stats`: the hub's counters, every one of them and no other.
STATS_COUNTERS = {
    "publish_requests",
    "published_commands",
    "group_commits",
    "command_errors",
    "events_dispatched",
    "lagged",
    "protocol_errors",
    "connections_total",
    "refused_batches",
    "refused_connections",
    "stalled_connections",
    "refused_commands",
    "recall_log_written",
    "recall_log_failed",
    "overloaded_requests",
    "overloaded_commands",
    "refused_tokens",
}
# ...and the other keys of `stats.hub` it names.
STATS_HUB_KEYS = {
    "version",
    "socket",
    "listen",
    "pid",
    "uptime_s",
    "connections",
    "connections_by_role",
    "connections_threaded",
    "subscribers",
    "queued_events",
    "write_queue",
    "write_pending",
    "recall_log_waiting",
    "keyword_segments",
    "dispatched_seq",
    "counters",
    "refused_by_code",
    "last_refused",
    "last_refusal",
    "spool_ingested",
    "indexer",
    "sources",
}


def test_the_defaults_are_the_documented_limits() -> None:
    limits = HubLimits()
    assert limits.max_connections == 512  # docs/protocol.md, "Connections"
    assert limits.stall_timeout == 60.0
    assert limits.max_pending_bytes == 32 * 1024 * 1024  # "When the write queue is full"
    assert limits.max_pending_commands == 50_000
    assert limits.threaded_connections == 32  # docs/architecture.md, the hub
    assert limits.readers == 4
    assert (limits.recall_log_quiet_s, limits.recall_log_max_wait_s) == (0.1, 1.0)
    assert (limits.spool_scan_interval, limits.keyword_upkeep_interval) == (30.0, 30.0)
    assert limits.frame_limit is None and limits.subscriber_queue is None  # the settings'


def test_limits_are_one_frozen_value() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        HubLimits().max_connections = 1  # type: ignore[misc]


def test_frame_limit_and_queue_come_from_the_settings_unless_the_limits_name_them(service, settings) -> None:  # noqa: ANN001
    plain = Hub(service, settings.socket_path, start_indexer=False)
    assert plain.frame_limit == (settings.frame_limit or protocol.DEFAULT_FRAME_LIMIT)
    assert plain.subscriber_queue == (settings.subscriber_queue or 10_000)
    named = Hub(
        service,
        settings.socket_path,
        start_indexer=False,
        limits=HubLimits(frame_limit=4096, subscriber_queue=7, max_connections=3, stall_timeout=0.5),
    )
    assert (named.frame_limit, named.subscriber_queue) == (4096, 7)
    assert (named.max_connections, named.stall_timeout) == (3, 0.5)


def test_a_started_hub_reports_its_limits_and_every_documented_counter(service, settings) -> None:  # noqa: ANN001
    async def main() -> None:
        hub = Hub(service, settings.socket_path, start_indexer=False, limits=HubLimits(frame_limit=8192))
        await hub.start()
        try:
            remote = RemoteService(settings.socket_path)
            stats = await asyncio.to_thread(remote.stats)
            remote.close()
        finally:
            await hub.close()
        info = stats["hub"]
        assert info["frame_limit"] == 8192
        assert STATS_HUB_KEYS <= set(info)
        assert set(info["counters"]) == STATS_COUNTERS
        assert info["write_pending"]["max_pending_commands"] == 50_000

    asyncio.run(main())
