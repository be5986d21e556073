"""The hub hosted inside an already-running event loop (how the TUI embeds it)."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path

import pytest
from dated import ASKED, cooking_sessions

from memviewer import paths
from memviewer.events import EventRecord
from memviewer.session.manager import SessionManager
from memviewer.store.db import Store
from memviewer.wire.hub import Hub, HubAlreadyRunning
from memviewer.wire.hub_limits import HubLimits
from memviewer.wire.remote import RemoteService
from memviewer.wire.subscriber import Subscriber


async def _collect(sub: Subscriber, until_seq: int, out: list[EventRecord]) -> None:
    async for ev in sub.stream():
        out.append(ev)  # type: ignore[arg-type]
        if sub.last_seq >= until_seq:
            return


def test_hub_inside_a_running_loop_serves_and_fans_out(service, settings) -> None:  # noqa: ANN001
    sock = settings.socket_path

    async def main() -> None:
        hub = Hub(service, sock, start_indexer=False)
        await hub.start()
        assert oct(os.stat(sock).st_mode & 0o777) == "0o600"
        # a remote client publishes while the app itself writes in-process from a worker thread
        remote = RemoteService(sock)
        results = await asyncio.to_thread(
            remote.publish,
            [
                {"op": "open_session", "session_id": "s-remote", "agent": "remote"},
                {
                    "op": "start_episode",
                    "session_id": "s-remote",
                    "episode_id": "e-remote",
                    "user_message": "fix the flaky test",
                },
            ],
        )
        assert all("ok" in r for r in results)
        await asyncio.to_thread(service.open_session, session_id="s-local", agent="tui")
        last = service.last_seq
        got: list[EventRecord] = []
        await asyncio.wait_for(_collect(Subscriber(sock, 0), last, got), timeout=10)
        assert [e.seq for e in got] == list(range(1, last + 1))
        assert {e.session_id for e in got} == {"s-remote", "s-local"}
        stats = await asyncio.to_thread(remote.stats)
        assert stats["counts"]["sessions"] == 2 and stats["hub"]["pid"] == os.getpid()
        remote.close()
        report = await hub.close()
        assert report == {"abandoned_episodes": [], "open_episodes": ["e-remote"]}  # a stop closes nothing
        assert not Path(sock).exists()
        # the loop goes on, and a new hub can take over the same socket and service
        hub2 = Hub(service, sock, start_indexer=False)
        await hub2.start()
        again = await asyncio.to_thread(lambda: RemoteService(sock).session("s-local"))
        assert again["session"]["agent"] == "tui"
        await hub2.close()

    asyncio.run(main())


def test_a_second_hub_object_on_the_same_socket_is_refused(service, settings) -> None:  # noqa: ANN001
    async def main() -> None:
        first = Hub(service, settings.socket_path, start_indexer=False)
        await first.start()
        try:
            with pytest.raises(HubAlreadyRunning, match="already running"):
                await Hub(service, settings.socket_path, start_indexer=False).start()
            assert Path(settings.socket_path).exists()
            info = await asyncio.to_thread(lambda: RemoteService(settings.socket_path).stats())
            assert info["hub"]["pid"] == os.getpid()
        finally:
            await first.close()

    asyncio.run(main())


def test_socket_path_too_long_is_a_clear_error(service, tmp_path: Path) -> None:  # noqa: ANN001
    from memviewer.wire.hub import HubError

    async def main() -> None:
        with pytest.raises(HubError, match="too long"):
            await Hub(service, tmp_path / ("d" * 120) / "hub.sock", start_indexer=False).start()

    asyncio.run(main())


def test_events_missed_in_process_are_read_from_the_store(service, settings) -> None:  # noqa: ANN001
    """Commits this process did not see (another writer) show up from the store, in order."""

    async def main() -> None:
        # the foreign-commit watch stays asleep: only the gap seen in-process can reveal s-a, s-b
        hub = Hub(
            service,
            settings.socket_path,
            start_indexer=False,
            limits=HubLimits(foreign_poll_interval=3600),
        )
        await hub.start()
        got: list[EventRecord] = []
        sub = Subscriber(settings.socket_path, 0)
        task = asyncio.ensure_future(_collect(sub, 3, got))
        deadline = time.monotonic() + 10
        while not hub.info()["subscribers"]:  # live: the subscription is registered
            assert time.monotonic() < deadline, "the subscriber never registered"
            await asyncio.sleep(0.02)
        other = Store.open(paths.db_path(settings.home_path))  # another writer: the hub never hears of it
        try:
            foreign = SessionManager(other)
            await asyncio.to_thread(foreign.open_session, session_id="s-a", agent="a")
            await asyncio.to_thread(foreign.open_session, session_id="s-b", agent="b")
        finally:
            other.close()
        await asyncio.to_thread(service.open_session, session_id="s-c", agent="c")  # reveals the gap 1..2
        await asyncio.wait_for(task, timeout=5)
        assert [(e.seq, e.session_id) for e in got] == [(1, "s-a"), (2, "s-b"), (3, "s-c")]
        await hub.close()

    asyncio.run(main())


def test_recall_over_the_socket_passes_options_and_reports_bad_ones(service, settings) -> None:  # noqa: ANN001
    from memviewer.errors import MemviewerError

    cooking_sessions(service)
    sock = settings.socket_path

    async def main() -> None:
        hub = Hub(service, sock, start_indexer=False)
        await hub.start()
        remote = RemoteService(sock)
        try:
            out = await asyncio.to_thread(
                remote.recall,
                "what did I cook a week ago?",
                scope="user",
                scope_id="u1",
                as_of=ASKED,
                top_k=1,
            )
            assert out["diagnostics"]["time_window"]["phrase"] == "a week ago"
            assert [r["session_id"] for r in out["results"]] == ["s-week"]
            with pytest.raises(MemviewerError) as err:
                await asyncio.to_thread(remote.recall, "what did I cook?", as_of="someday")
            assert err.value.code == "invalid_argument" and "as_of" in err.value.message
            # the connection survives the error
            again = await asyncio.to_thread(remote.recall, "paella", scope_id="u1", top_k=1)
            assert again["results"][0]["session_id"] == "s-week"
        finally:
            remote.close()
            await hub.close()

    asyncio.run(main())


def _raw_client(path: Path) -> socket.socket:
    """A bare socket to the hub, to send exactly the bytes a test wants."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(str(path))
    return s


def test_connections_past_the_cap_are_told_why_and_let_go(service, settings) -> None:  # noqa: ANN001
    import json

    sock = settings.socket_path

    def connect() -> socket.socket:
        return _raw_client(sock)

    def hello(s: socket.socket) -> dict:
        s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"hello"}\n')
        return json.loads(s.makefile("rb").readline())

    async def main() -> None:
        hub = Hub(service, sock, start_indexer=False, limits=HubLimits(max_connections=3))
        await hub.start()
        held: list[socket.socket] = []
        try:
            for _ in range(3):
                held.append(await asyncio.to_thread(connect))
                assert "result" in await asyncio.to_thread(hello, held[-1])
            extra = await asyncio.to_thread(connect)
            line = await asyncio.to_thread(lambda: extra.makefile("rb").readline())
            refusal = json.loads(line)
            assert refusal["error"]["data"]["code"] == "internal" and refusal["error"]["data"]["retry"]
            assert "too many connections (3)" in refusal["error"]["message"]
            assert await asyncio.to_thread(lambda: extra.recv(1)) == b""  # and closed
            extra.close()
            assert hub.counters["refused_connections"] == 1
            open_before = hub.info()["connections"]
            held.pop().close()
            deadline = time.monotonic() + 10
            while hub.info()["connections"] >= open_before:  # the hub has noticed the close
                assert time.monotonic() < deadline, "the hub never noticed the closed connection"
                await asyncio.sleep(0.02)
            again = await asyncio.to_thread(connect)  # room again
            assert "result" in await asyncio.to_thread(hello, again)
            held.append(again)
        finally:
            for s in held:
                s.close()
            await hub.close()

    asyncio.run(main())


def test_half_a_frame_held_too_long_closes_that_connection_only(service, settings) -> None:  # noqa: ANN001
    sock = settings.socket_path

    def connect() -> socket.socket:
        return _raw_client(sock)

    async def main() -> None:
        hub = Hub(service, sock, start_indexer=False, limits=HubLimits(stall_timeout=0.3))
        await hub.start()
        stuck, quiet = await asyncio.to_thread(connect), await asyncio.to_thread(connect)
        try:
            stuck.sendall(b'{"jsonrpc": "2.0", "id": 1, "method": "hel')  # and nothing more
            assert await asyncio.to_thread(lambda: stuck.recv(1)) == b""  # closed by the hub
            assert hub.counters["stalled_connections"] == 1
            await asyncio.sleep(0.5)  # quiet between frames is not a stall
            quiet.sendall(b'{"jsonrpc": "2.0", "id": 2, "method": "hello"}\n')
            answer = await asyncio.to_thread(lambda: quiet.makefile("rb").readline())
            assert b'"id":2' in answer and b'"result"' in answer
        finally:
            stuck.close()
            quiet.close()
            await hub.close()

    asyncio.run(main())


def test_a_stopped_hub_leaves_no_commit_listener_on_the_store(service, settings, monkeypatch) -> None:  # noqa: ANN001
    """The service outlives a hosted hub (the viewer stops and restarts it): once the hub
    stopped, the store's commits no longer reach it."""
    calls: list[int] = []
    real_on_commit = service.store.on_commit

    def counting_on_commit(listener):  # noqa: ANN001, ANN202 - a spy on the public seam
        def counted(events):  # noqa: ANN001, ANN202
            calls.append(len(events))
            listener(events)

        return real_on_commit(counted)

    monkeypatch.setattr(service.store, "on_commit", counting_on_commit)

    async def main() -> None:
        hub = Hub(service, settings.socket_path, start_indexer=False)
        await hub.start()
        await asyncio.to_thread(service.open_session, session_id="s-1", agent="a")
        assert calls == [1]  # the hub's listener saw the commit
        await hub.close()
        await asyncio.to_thread(service.open_session, session_id="s-2", agent="a")
        assert calls == [1]  # removed at stop

    asyncio.run(main())


def test_a_search_answered_while_the_hub_stops_keeps_its_recall_log_entry(
    service, settings, monkeypatch
) -> None:  # noqa: ANN001
    """The hub holds a read's recall log entry until the answer is written; a stop that begins
    meanwhile waits for the answer, so the entry still reaches the writer (not dropped)."""
    import threading

    cooking_sessions(service)
    sock = settings.socket_path
    entered, release = threading.Event(), threading.Event()
    real_search = service.search

    def slow_search(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - a search that waits once
        out = real_search(*args, **kwargs)
        entered.set()
        assert release.wait(20)
        return out

    monkeypatch.setattr(service, "search", slow_search)

    async def main() -> None:
        hub = Hub(service, sock, start_indexer=False)
        await hub.start()
        remote = RemoteService(sock)
        try:
            answer = asyncio.ensure_future(asyncio.to_thread(remote.search, "paella"))
            assert await asyncio.to_thread(entered.wait, 20)
            report_before = hub.last_close_report
            closing = asyncio.ensure_future(hub.close(grace=10))
            deadline = time.monotonic() + 10
            while hub.last_close_report is report_before and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert hub.last_close_report is not report_before  # the stop has begun
            release.set()
            out = await answer
            assert out["results"]
            await closing
        finally:
            release.set()
            remote.close()
        assert hub.counters["recall_log_failed"] == 0
        assert hub.counters["recall_log_written"] == 1

    asyncio.run(main())
    logged = service.recalls(kind="search")
    assert [r["query"] for r in logged["recalls"]] == ["paella"]
