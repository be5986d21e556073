"""Live subscriptions against real hub processes: the history/live seam, restarts, slow readers."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_for

from memviewer.client import Publisher
from memviewer.events import EventRecord
from memviewer.wire.remote import RemoteService
from memviewer.wire.subscriber import ConnectionState, Subscriber
from memviewer.wire.testing import HubProcess

pytestmark = pytest.mark.integration


class Collector(threading.Thread):
    """Runs a ``Subscriber`` on its own loop and keeps what it yields."""

    def __init__(self, sock: Path, from_seq: int = 0, **kwargs: Any) -> None:
        super().__init__(daemon=True)
        self.states: list[ConnectionState] = []
        self.events: list[EventRecord] = []
        self.sub = Subscriber(
            sock, from_seq, on_state=self.states.append, min_backoff=0.05, max_backoff=0.3, **kwargs
        )
        self.loop: asyncio.AbstractEventLoop | None = None
        self.start()

    def run(self) -> None:
        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            async for ev in self.sub.stream():
                self.events.append(ev)  # type: ignore[arg-type]

        asyncio.run(main())

    def wait_seq(self, seq: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.sub.last_seq < seq:
            assert time.monotonic() < deadline, f"stuck at seq {self.sub.last_seq}, want {seq}"
            time.sleep(0.02)

    def stop(self) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.sub.close)
        self.join(10)


def last_seq(sock: Path) -> int:
    with RemoteService(sock) as remote:
        return remote.last_seq


def publish_turns(pub: Publisher, sessions: int, turns: int, content: str = "") -> int:
    n = 0
    for s in range(sessions):
        sid = pub.open_session(agent=f"load-{s}", retention="keep_all")
        eid = pub.start_episode(sid, f"job {s}")
        for i in range(turns):
            pub.add_turn(eid, "tool", f"{s}/{i} {content}", metadata={"tool": "bench"})
            n += 1
        pub.finalize_episode(eid)
    return n


def open_sessions(pub: Publisher, n: int, title: str) -> None:
    """The cheapest command that carries a payload: one ``session.started`` event each."""
    for i in range(n):
        pub.open_session(agent="crowd", title=f"{i} {title}")


def test_history_then_live_without_gap_or_duplicate(tmp_path: Path, short_tmp: Path) -> None:
    sock = short_tmp / "hub.sock"
    with HubProcess(tmp_path / "home", sock), Publisher(sock, tmp_path / "spool", max_batch=50) as pub:
        publish_turns(pub, 3, 400)
        assert pub.flush(30)
        before = last_seq(sock)
        producer = threading.Thread(target=publish_turns, args=(pub, 6, 250))
        producer.start()
        # subscribe once the producer's writes are landing: the seam is under load
        wait_for(lambda: last_seq(sock) > before, what="the producer's first stored events")
        everything = Collector(sock, 0)
        starts = Collector(sock, 0, kinds=["episode.started"])
        producer.join(60)
        assert pub.flush(30)
        final = last_seq(sock)
        everything.wait_seq(final)
        starts.wait_seq(max(e.seq for e in everything.events if e.kind == "episode.started"))
        # a late joiner resuming from the middle
        middle = Collector(sock, final // 2)
        middle.wait_seq(final)
        for c in (everything, starts, middle):
            c.stop()
    assert [e.seq for e in everything.events] == list(range(1, final + 1))
    assert everything.sub.duplicates_dropped == 0 and everything.sub.gaps == 0
    assert [e.seq for e in middle.events] == list(range(final // 2 + 1, final + 1))
    assert {e.kind for e in starts.events} == {"episode.started"}
    assert [e.seq for e in starts.events] == [e.seq for e in everything.events if e.kind == "episode.started"]
    assert len(starts.events) == 9


def test_resume_across_a_hub_restart(tmp_path: Path, short_tmp: Path) -> None:
    sock = short_tmp / "hub.sock"
    hub = HubProcess(tmp_path / "home", sock).start()
    pub = Publisher(sock, tmp_path / "spool", max_batch=20)
    collector = Collector(sock, 0)
    try:
        publish_turns(pub, 1, 200)
        assert pub.flush(20)
        collector.wait_seq(last_seq(sock))
        before = collector.sub.last_seq
        producer = threading.Thread(target=publish_turns, args=(pub, 2, 300))
        producer.start()
        # kill -9 once the subscriber is receiving the producer's events
        wait_for(lambda: collector.sub.last_seq > before, what="live events reaching the subscriber")
        hub.kill()  # kill waits until the process is gone
        hub.start()
        producer.join(60)
        # Publishing is fast enough that the producer may finish before the kill;
        # these turns exist only after the restart, so the subscriber must resume.
        publish_turns(pub, 3, 50)
        assert pub.flush(30)
        final = last_seq(sock)
        collector.wait_seq(final)
    finally:
        collector.stop()
        pub.close(timeout=1)
        hub.kill()
    seqs = [e.seq for e in collector.events]
    assert seqs == list(range(1, final + 1))
    statuses = [s.status for s in collector.states]
    assert statuses[0] == "connected"
    assert "reconnecting" in statuses and "resumed" in statuses
    resumed = next(s for s in collector.states if s.status == "resumed")
    assert 0 < resumed.last_seq < final


def test_a_subscriber_that_stops_reading_does_not_grow_hub_memory(tmp_path: Path, short_tmp: Path) -> None:
    sock = short_tmp / "hub.sock"
    queue_limit = 500
    payload = "x" * 10_000  # few large events: the same bytes flow in a third of the commands
    with (
        HubProcess(tmp_path / "home", sock, subscriber_queue=queue_limit) as hub,
        Publisher(sock, tmp_path / "spool") as pub,
    ):
        open_sessions(pub, 100, payload)  # warm-up: caches, pools, first pages
        assert pub.flush(60)
        start_seq = last_seq(sock)
        rss_before = hub.rss_bytes()

        stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        stalled.connect(str(sock))
        stalled.sendall(
            json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "subscribe", "params": {"from_seq": start_seq}}
            ).encode()
            + b"\n"
        )
        reader = Collector(sock, start_seq)  # a healthy subscriber alongside

        open_sessions(pub, 6_000, payload)
        assert pub.flush(120)
        final = last_seq(sock)
        assert final - start_seq >= 6_000
        reader.wait_seq(final, timeout=60)

        with RemoteService(sock) as remote:
            info = remote.stats()["hub"]
        rss_growth = hub.rss_bytes() - rss_before
        event_bytes = (final - start_seq) * len(payload)
        print(f"hub RSS growth {rss_growth / 2**20:.1f} MiB; {event_bytes / 2**20:.0f} MiB of events flowed")
        assert info["counters"]["lagged"] >= 1
        assert all(s["queued"] <= queue_limit for s in info["subscribers"])
        assert info["queued_events"] <= queue_limit * len(info["subscribers"])
        assert rss_growth < 40 * 1024 * 1024, (rss_growth, event_bytes)
        assert event_bytes > 55 * 1024 * 1024  # what an unbounded queue would have held

        # the stalled client now reads: events in order, then `lagged`, then it resumes by seq
        stalled.settimeout(10)
        rfile = stalled.makefile("rb")
        assert json.loads(rfile.readline())["result"]["from_seq"] == start_seq
        seen = start_seq
        lagged = None
        while lagged is None:
            msg = json.loads(rfile.readline())
            if msg.get("method") == "lagged":
                lagged = msg["params"]
                break
            assert msg["method"] == "event" and msg["params"]["seq"] == seen + 1
            seen += 1
        assert lagged["last_seq_sent"] == seen < final
        stalled.sendall(
            json.dumps(
                {"jsonrpc": "2.0", "id": 2, "method": "subscribe", "params": {"from_seq": seen}}
            ).encode()
            + b"\n"
        )
        assert json.loads(rfile.readline())["id"] == 2
        while seen < final:
            msg = json.loads(rfile.readline())
            if msg.get("method") == "lagged":  # allowed again while catching up live
                stalled.sendall(
                    json.dumps(
                        {"jsonrpc": "2.0", "id": 3, "method": "subscribe", "params": {"from_seq": seen}}
                    ).encode()
                    + b"\n"
                )
                continue
            if "id" in msg:
                continue
            assert msg["params"]["seq"] == seen + 1
            seen += 1
        stalled.close()
        reader.stop()
    assert [e.seq for e in reader.events] == list(range(start_seq + 1, final + 1))
