"""The hub's recall log entries wait for a quiet moment, then go to the writer together
(``memviewer.wire.recall_buffer``); none is lost, also when the hub stops while they wait."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from dated import cooking_sessions

from memviewer.recall_log import RecordAs
from memviewer.wire.hub import Hub
from memviewer.wire.hub_limits import HubLimits
from memviewer.wire.recall_buffer import RecallLogBuffer
from memviewer.wire.remote import RemoteService


def _run_buffer(quiet_s: float, max_wait_s: float, gaps: list[float], max_entries: int = 256) -> list[Any]:
    """Add one entry after each gap; return [(loop time, entries)] of every write, and the add times."""

    async def main() -> tuple[list[tuple[float, list[int]]], list[float]]:
        loop = asyncio.get_running_loop()
        writes: list[tuple[float, list[int]]] = []
        buf = RecallLogBuffer(
            loop,
            lambda items: writes.append((loop.time(), [c["n"] for c in items])),
            quiet_s=quiet_s,
            max_wait_s=max_wait_s,
            max_entries=max_entries,
        )
        added: list[float] = []
        for n, gap in enumerate(gaps):
            await asyncio.sleep(gap)
            buf.add({"n": n})
            added.append(loop.time())
        deadline = loop.time() + 10
        while len(buf) and loop.time() < deadline:
            await asyncio.sleep(0.01)
        return writes, added

    return list(asyncio.run(main()))


def test_entries_close_together_are_written_once_quiet_in_one_write() -> None:
    writes, added = _run_buffer(quiet_s=0.3, max_wait_s=5.0, gaps=[0.0] * 5)
    assert [w[1] for w in writes] == [[0, 1, 2, 3, 4]]
    assert writes[0][0] >= added[-1] + 0.3 - 0.01  # not before the quiet moment


def test_a_steady_stream_is_written_every_max_wait_and_nothing_is_lost() -> None:
    # an entry every 10 ms for ~0.8 s: never 0.2 s quiet, so max_wait (0.3 s) writes them
    writes, added = _run_buffer(quiet_s=0.2, max_wait_s=0.3, gaps=[0.01] * 80)
    written = [n for _, items in writes for n in items]
    assert written == list(range(80))  # each once, in order
    assert len(writes) < 80 / 4  # coalesced
    assert writes[0][0] < added[-1]  # the first write did not wait for the stream to end


def test_max_entries_writes_at_once() -> None:
    writes, _ = _run_buffer(quiet_s=0.05, max_wait_s=10.0, gaps=[0.0] * 7, max_entries=3)
    assert [w[1] for w in writes] == [[0, 1, 2], [3, 4, 5], [6]]


def test_bad_bounds_are_refused() -> None:
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(ValueError):
            RecallLogBuffer(loop, lambda _items: None, quiet_s=1.0, max_wait_s=0.5)
    finally:
        loop.close()


def test_searches_waiting_for_a_quiet_moment_are_written_when_the_hub_stops(service, settings) -> None:  # noqa: ANN001
    cooking_sessions(service)
    queries = ["paella", "risotto", "lasagne", "paella rice", "risotto stock"]

    async def main() -> None:
        hub = Hub(
            service,
            settings.socket_path,
            start_indexer=False,
            limits=HubLimits(recall_log_quiet_s=60, recall_log_max_wait_s=60),
        )
        await hub.start()
        remote = RemoteService(settings.socket_path)
        try:
            for q in queries:
                assert (await asyncio.to_thread(remote.search, q))["success"]
            deadline = time.monotonic() + 20
            while hub.info()["recall_log_waiting"] < len(queries) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert hub.info()["recall_log_waiting"] == len(queries)
            assert service.recalls(kind="search")["total"] == 0  # still waiting: nothing written yet
        finally:
            remote.close()
        await hub.close()
        assert hub.counters["recall_log_written"] == len(queries)
        assert hub.counters["recall_log_failed"] == 0

    asyncio.run(main())
    logged = service.recalls(kind="search", limit=50)["recalls"]
    assert sorted(r["query"] for r in logged) == sorted(queries)
    assert {r["source"] for r in logged} == {"hub"}


def test_a_burst_of_searches_is_logged_in_few_transactions(service, settings) -> None:  # noqa: ANN001
    cooking_sessions(service)
    n = 20

    async def main() -> None:
        hub = Hub(service, settings.socket_path, start_indexer=False)  # the default quiet moment
        await hub.start()
        remote = RemoteService(settings.socket_path)
        try:
            commits = hub.counters["group_commits"]
            for i in range(n):
                assert (await asyncio.to_thread(remote.search, f"paella {i}", record=RecordAs("cli")))[
                    "success"
                ]
            deadline = time.monotonic() + 20
            while hub.counters["recall_log_written"] < n and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert hub.counters["recall_log_written"] == n
            assert hub.counters["group_commits"] - commits <= n // 2  # written together, not one by one
            assert hub.info()["recall_log_waiting"] == 0
        finally:
            remote.close()
            await hub.close()

    asyncio.run(main())
    assert service.recalls(source="cli")["total"] == n


def test_entries_being_committed_still_count_as_waiting() -> None:
    """``recall_log_waiting`` is 0 only once the writer answered: an entry handed to it and not
    yet committed is not in the store, and a caller waiting for 0 must not read it as written."""
    from memviewer.wire.hub_records import HubRecords

    class Writes:
        ready = True

        def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
            self.loop = loop
            self.futures: list[asyncio.Future[list[dict[str, Any]]]] = []

        def enqueue(self, commands: list[dict[str, Any]], bounded: bool = True) -> asyncio.Future[Any]:
            fut: asyncio.Future[list[dict[str, Any]]] = self.loop.create_future()
            self.futures.append(fut)
            return fut

    async def main() -> None:
        loop = asyncio.get_running_loop()
        writes = Writes(loop)
        counters = {"recall_log_written": 0, "recall_log_failed": 0}
        records = HubRecords(writes, counters, quiet_s=0.01, max_wait_s=0.05)  # type: ignore[arg-type]
        records.open(loop)
        entry = {"op": "record_recall", "recall_id": "r-1", "kind": "search", "query": "q"}
        records.queue(entry)  # type: ignore[arg-type]
        assert records.waiting() == 1
        while not writes.futures:  # the quiet moment hands it to the writer
            await asyncio.sleep(0.005)
        assert records.waiting() == 1, "handed to the writer, not yet committed"
        writes.futures[0].set_result([{"ok": True}])
        await asyncio.sleep(0)  # the done callback runs on the loop
        assert records.waiting() == 0 and counters["recall_log_written"] == 1

    asyncio.run(main())
