"""The OTLP queue's drain stores a queued request ``DRAIN_CHUNK`` commands a writer job,
lets a request being mapped go first between jobs, and after a refusal goes on from the
first job not stored (nothing lost, nothing counted twice). A fake hub records the jobs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from memviewer.errors import MemviewerError
from memviewer.sources import otlp_http
from memviewer.sources.otlp_http import DRAIN_CHUNK, OtlpReceiver
from memviewer.sources.otlp_queue import DurableQueue


class FakeHub:
    def __init__(self, receiver: OtlpReceiver, refuse_job: int | None = None) -> None:
        self.receiver = receiver
        self.jobs: list[list[str]] = []
        self.while_mapping: list[int] = []
        self.refuse_job = refuse_job
        self.changed = asyncio.Event()

    async def submit(self, commands: list[dict[str, Any]], **_: Any) -> list[dict[str, Any]]:
        self.changed.set()
        if len(self.jobs) == self.refuse_job:
            self.refuse_job = None
            raise MemviewerError("internal", "disk full", data={"retry": True})
        self.while_mapping.append(self.receiver._mapping)
        self.jobs.append([c["turn_id"] for c in commands])
        return [{"ok": {}} for _ in commands]


def turns(n: int) -> list[dict[str, Any]]:
    return [{"op": "add_turn", "turn_id": f"t{i}"} for i in range(n)]


async def until(cond: Any, what: str) -> None:
    """Let the loop run until ``cond()`` (a condition, with a deadline, never a fixed sleep)."""
    async with asyncio.timeout(20):
        while not cond():
            await asyncio.sleep(0.01)


def receiver_on(tmp_path: Path, monkeypatch: Any) -> OtlpReceiver:
    monkeypatch.setattr(otlp_http, "DRAIN_YIELD_MAX_S", 30.0)  # the test ends the mapping itself
    return OtlpReceiver("127.0.0.1", 0, token="t", queue=DurableQueue(tmp_path / "q"))


def test_a_queued_request_is_stored_in_jobs_resumed_after_a_refusal(tmp_path: Path, monkeypatch: Any) -> None:
    async def main() -> None:
        rx = receiver_on(tmp_path, monkeypatch)
        assert rx.queue is not None
        n = 2 * DRAIN_CHUNK + 5
        rx.queue.put(turns(n))
        hub = FakeHub(rx, refuse_job=1)  # the second job is refused once (a full disk)
        rx._hub = hub
        rx._queued.set()
        drain = asyncio.create_task(rx._drain())
        await until(lambda: rx.queue is not None and len(rx.queue) == 0, "the batch stored")
        drain.cancel()
        ids = [t for job in hub.jobs for t in job]
        assert ids == [f"t{i}" for i in range(n)]  # each command once, in order
        assert [len(j) for j in hub.jobs] == [DRAIN_CHUNK, DRAIN_CHUNK, 5]
        assert rx.state.counters["turns"] == n and rx.state.counters["store_refusals"] == 1

    asyncio.run(main())


def test_the_drain_waits_while_a_request_is_mapped(tmp_path: Path, monkeypatch: Any) -> None:
    async def main() -> None:
        rx = receiver_on(tmp_path, monkeypatch)
        assert rx.queue is not None
        rx.queue.put(turns(3 * DRAIN_CHUNK))
        hub = FakeHub(rx)
        rx._hub = hub
        rx._mapping, rx._idle = 1, asyncio.Event()  # a request is being mapped (as ``_handle``)
        rx._queued.set()
        drain = asyncio.create_task(rx._drain())
        await until(lambda: rx.drain_yields == 1, "the drain yielding")
        assert hub.jobs == []  # nothing stored while the request's mapping runs
        rx._mapping = 0
        rx._idle.set()
        await until(lambda: rx.queue is not None and len(rx.queue) == 0, "the batch stored")
        drain.cancel()
        assert len(hub.jobs) == 3 and hub.while_mapping == [0, 0, 0]

    asyncio.run(main())


def test_the_queue_keeps_arrival_order_in_memory_and_sets_an_unreadable_batch_aside(tmp_path) -> None:  # noqa: ANN001
    """The drain asks for the oldest batch without listing the folder; a batch it cannot read
    is renamed ``*.bad`` and the next one comes up; a reopened queue finds what is left."""
    from memviewer.sources.otlp_queue import DurableQueue

    q = DurableQueue(tmp_path / "q")
    q.put([{"op": "a"}])
    q.put([{"op": "b"}])
    first = q.oldest()
    assert first is not None and len(q) == 2 and DurableQueue.load(first) == [{"op": "a"}]
    first.write_bytes(b"{" * first.stat().st_size)  # damaged in place (same size)
    with pytest.raises(ValueError):
        DurableQueue.load(first)
    q.set_aside(first)
    assert first.with_name(first.name + ".bad").exists() and len(q) == 1
    second = q.oldest()
    assert second is not None and DurableQueue.load(second) == [{"op": "b"}]
    assert DurableQueue(tmp_path / "q").oldest() == second  # reopened: the same order from disk
    q.done(second)
    assert q.oldest() is None and len(q) == 0 and q.pending_bytes == 0
