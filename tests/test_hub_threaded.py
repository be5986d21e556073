"""Reader connections served by one thread (``memviewer.wire.threaded``) on a real hub:
from its first fast read a connection's frames are read, run and answered by its own
thread; everything else on it still goes through the loop and the one writer. The bad
paths (malformed frames, oversized frames, a client gone mid-answer, a client not reading,
half a frame held, half-close, the hub stopping) behave as they do on the loop."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rawclient import Raw
from waiting import wait_for

from memviewer.config import load_settings
from memviewer.service import MemoryService
from memviewer.wire import protocol
from memviewer.wire.hub import Hub
from memviewer.wire.hub_limits import HubLimits
from memviewer.wire.syncclient import RpcConnection
from memviewer.wire.testing import HubProcess

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parent / "fixtures" / "praisonai"


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubProcess]:
    import shutil
    import tempfile

    home = tmp_path_factory.mktemp("threaded") / "home"
    short = Path(tempfile.mkdtemp(prefix="mv-", dir="/tmp"))
    svc = MemoryService(load_settings(env={}, home=str(home), socket=str(short / "none.sock")))
    try:
        svc.import_praisonai([FIXTURES], index=False)
    finally:
        svc.close()
    try:
        with HubProcess(home, short / "hub.sock") as proc:
            yield proc
    finally:
        shutil.rmtree(short, ignore_errors=True)


@pytest.fixture
def raw(hub: HubProcess) -> Iterator[Raw]:
    client = Raw(hub.socket_path)
    yield client
    client.close()


def _stats(hub: HubProcess) -> dict[str, Any]:
    with RpcConnection(hub.socket_path) as conn:
        return conn.call(protocol.STATS, {})["hub"]


def _logged(hub: HubProcess) -> list[str]:
    svc = MemoryService(load_settings(env={}, home=str(hub.home), socket=str(hub.socket_path)), readonly=True)
    try:
        return [e["query"] for e in svc.recalls(limit=2000)["recalls"]]
    finally:
        svc.close()


def _in_process(hub: HubProcess, query: str) -> dict[str, Any]:
    svc = MemoryService(load_settings(env={}, home=str(hub.home), socket=str(hub.socket_path)), readonly=True)
    try:
        return svc.search(query, limit=5, window=5)
    finally:
        svc.close()


def _threaded_now(hub: HubProcess, n: int) -> bool:
    return _stats(hub)["connections_threaded"] == n


def test_searches_on_a_connection_are_served_by_its_thread_and_answer_as_in_process(
    hub: HubProcess, raw: Raw
) -> None:
    before = _stats(hub)["connections_threaded"]
    assert raw.call("hello", {"protocol": protocol.PROTOCOL_VERSION, "role": "reader"})["result"]
    for i, query in enumerate(["refund policy", "deploy token", "迁移", "nothing-matches-zzz"] * 2):
        answer = raw.call("search", {"query": query, "limit": 5, "window": 5, "record": False}, req_id=i)
        assert answer["id"] == i
        assert answer["result"] == _in_process(hub, query)
    assert _stats(hub)["connections_threaded"] == before + 1  # this one, served by a thread
    # sessions and session on the same connection: the same answers as through any client
    with RpcConnection(hub.socket_path) as other:
        listed = other.call(protocol.SESSIONS, {"limit": 3})
        one = other.call(protocol.SESSION, {"session_id": listed["sessions"][0]["session_id"]})
    assert raw.call("sessions", {"limit": 3}, req_id="s")["result"] == listed
    sid = listed["sessions"][0]["session_id"]
    assert raw.call("session", {"session_id": sid}, req_id="t")["result"] == one
    missing = raw.call("session", {"session_id": "s-no-such"}, req_id="u")
    assert missing["id"] == "u" and missing["error"]["data"]["code"] == "not_found"


def test_every_search_answered_on_the_thread_is_in_the_recall_log(hub: HubProcess, raw: Raw) -> None:
    queries = [f"refund policy {i}" for i in range(6)]
    for i, q in enumerate(queries):
        assert "result" in raw.call("search", {"query": q}, req_id=i)
    wait_for(lambda: set(queries) <= set(_logged(hub)), what="every search logged")
    assert _stats(hub)["counters"]["recall_log_failed"] == 0


def test_bad_frames_on_a_threaded_connection_get_their_errors_and_it_stays_open(
    hub: HubProcess, raw: Raw
) -> None:
    assert "result" in raw.call("search", {"query": "refund", "record": False})
    errors_before = _stats(hub)["counters"]["protocol_errors"]
    raw.send(b"this is not json\n")
    assert raw.answer()["error"]["code"] == protocol.PARSE_ERROR
    raw.send(b'{"jsonrpc": "2.0", "id": 2, "method": "search", "params": [1]}\n')
    assert raw.answer()["error"]["code"] == protocol.INVALID_PARAMS
    bad = raw.call("search", {"query": "refund", "bogus": 1}, req_id=3)
    assert bad["id"] == 3 and bad["error"]["code"] == protocol.INVALID_PARAMS
    unknown = raw.call("no_such_method", {}, req_id=4)
    assert unknown["id"] == 4 and unknown["error"]["code"] == protocol.METHOD_NOT_FOUND
    wrong = raw.call("search", {"query": "refund", "record": "yes"}, req_id=5)  # refused by the service
    assert wrong["id"] == 5 and wrong["error"]["data"]["code"] == "invalid_argument"
    # a notification is run and never answered: the next answer is the next request's
    raw.send(b'{"jsonrpc": "2.0", "method": "search", "params": {"query": "refund", "record": false}}\n')
    assert raw.call("search", {"query": "deploy token", "record": False}, req_id=6)["id"] == 6
    assert _stats(hub)["counters"]["protocol_errors"] >= errors_before + 4


def test_writes_and_subscriptions_on_a_threaded_connection_go_through_the_loop(
    hub: HubProcess, raw: Raw
) -> None:
    assert "result" in raw.call("search", {"query": "refund", "record": False})
    sub = raw.call("subscribe", {"from_seq": _stats(hub)["dispatched_seq"], "kinds": ["session.started"]}, 2)
    assert sub["result"]["subscription"]
    sids = [f"s-threaded-{time.monotonic_ns()}-{i}" for i in range(20)]
    frames = b""
    for i, sid in enumerate(sids):  # publishes and searches interleaved, without waiting
        frames += raw.request("publish", {"commands": [{"op": "open_session", "session_id": sid}]}, f"p{i}")
        frames += raw.request("search", {"query": "refund policy", "record": False}, f"q{i}")
    raw.send(frames)
    answers: dict[str, Any] = {}
    opened: list[str] = []
    while len(answers) < 2 * len(sids) or len(opened) < len(sids):
        msg = raw.answer()  # every line is one whole frame: events and answers never interleave
        if "id" in msg:
            answers[msg["id"]] = msg
        elif msg["method"] == "event":
            opened.append(msg["params"]["session_id"])
    assert all("error" not in answers[f"p{i}"]["result"]["results"][0] for i in range(len(sids)))
    assert all("results" in answers[f"q{i}"]["result"] for i in range(len(sids)))
    assert opened == sids  # published in order, committed and fanned out in order


def test_an_oversized_frame_on_a_threaded_connection_is_refused_and_closes_it(
    hub: HubProcess, raw: Raw
) -> None:
    assert "result" in raw.call("search", {"query": "refund", "record": False})
    limit = protocol.DEFAULT_FRAME_LIMIT
    raw.send(b'{"jsonrpc": "2.0", "id": 9, "method": "search", "params": {"query": "' + b"a" * (limit + 10))
    error = raw.answer()
    assert error["id"] is None and error["error"]["data"]["reason"] == "frame_too_large"
    raw.send(b'"}}\n')
    assert raw.at_eof()
    with RpcConnection(hub.socket_path) as other:  # the hub goes on
        assert "results" in other.call(protocol.SEARCH, {"query": "refund", "record": False})


def test_a_client_gone_mid_answer_leaves_the_hub_serving_and_its_searches_logged(hub: HubProcess) -> None:
    marker = f"deploy token gone{time.monotonic_ns()}"
    for _ in range(3):
        gone = Raw(hub.socket_path)
        assert "result" in gone.call("search", {"query": "refund", "record": False})
        gone.send(b"".join(gone.request("search", {"query": marker}, i) for i in range(50)))
        assert gone.sock.recv(100)  # the first answer has started arriving: hang up mid-answer
        gone.close()
    with RpcConnection(hub.socket_path) as other:
        assert "results" in other.call(protocol.SEARCH, {"query": "refund", "record": False})
    # every search that ran was logged (answered or not); at least the first of each client ran
    wait_for(lambda: _logged(hub).count(marker) >= 3, what="the hung-up searches logged")
    wait_for(lambda: _threaded_now(hub, 0), what="the gone connections' threads ended")


def test_a_client_not_reading_its_answers_is_held_back_and_others_are_served(
    hub: HubProcess, raw: Raw
) -> None:
    assert "result" in raw.call("search", {"query": "refund", "record": False})
    n = 400  # ~4 KB answers: far more than the socket buffers hold
    raw.send(
        b"".join(raw.request("search", {"query": "refund policy", "record": False}, i) for i in range(n))
    )
    # the hub's thread for ``raw`` is blocked writing; another connection is still answered
    with RpcConnection(hub.socket_path) as other:
        started = time.monotonic()
        assert "results" in other.call(protocol.SEARCH, {"query": "deploy token", "record": False})
        assert time.monotonic() - started < 10
    ids = [raw.answer()["id"] for _ in range(n)]  # then every answer arrives, whole and in order
    assert ids == list(range(n))


def test_half_closed_threaded_connection_answers_its_last_frame_then_closes(
    hub: HubProcess, raw: Raw
) -> None:
    assert "result" in raw.call("search", {"query": "refund", "record": False})
    raw.send(
        b'{"jsonrpc": "2.0", "id": 7, "method": "search", "params": {"query": "refund", "record": false}}'
    )
    raw.sock.shutdown(socket.SHUT_WR)  # an unterminated last frame counts as a frame at EOF
    assert raw.answer()["id"] == 7
    assert raw.at_eof()


def test_the_hub_stops_promptly_with_threaded_connections_open(tmp_path: Path, short_tmp: Path) -> None:
    home = tmp_path / "home"
    svc = MemoryService(load_settings(env={}, home=str(home), socket=str(short_tmp / "none.sock")))
    try:
        svc.import_praisonai([FIXTURES], index=False)
    finally:
        svc.close()
    proc = HubProcess(home, short_tmp / "stop.sock").start()
    clients = [Raw(proc.socket_path) for _ in range(3)]
    try:
        for c in clients:
            assert "result" in c.call("search", {"query": "refund"})
        started = time.monotonic()
        assert proc.stop(timeout=15) == 0
        assert time.monotonic() - started < 10
        for c in clients:
            assert c.at_eof()  # each idle thread woke up and let its connection go
    finally:
        for c in clients:
            c.close()
        proc.kill()
    svc = MemoryService(
        load_settings(env={}, home=str(home), socket=str(short_tmp / "none.sock")), readonly=True
    )
    try:
        assert [e["query"] for e in svc.recalls(limit=10)["recalls"]].count("refund") == 3
    finally:
        svc.close()


def test_half_a_frame_held_on_a_threaded_connection_closes_it(short_tmp: Path, tmp_path: Path) -> None:
    settings = load_settings(env={}, home=str(tmp_path / "home"), socket=str(short_tmp / "stall.sock"))
    service = MemoryService(settings)
    service.import_praisonai([FIXTURES], index=False)

    async def main() -> None:
        hub = Hub(service, settings.socket_path, start_indexer=False, limits=HubLimits(stall_timeout=0.3))
        await hub.start()
        stuck = await asyncio.to_thread(Raw, settings.socket_path)
        try:
            answer = await asyncio.to_thread(stuck.call, "search", {"query": "refund", "record": False})
            assert "result" in answer
            assert hub.info()["connections_threaded"] == 1
            await asyncio.sleep(0.7)  # quiet between frames is not a stall
            again = await asyncio.to_thread(stuck.call, "search", {"query": "refund", "record": False}, 2)
            assert again["id"] == 2
            stuck.send(b'{"jsonrpc": "2.0", "id": 3, "method": "sea')  # and nothing more
            assert await asyncio.to_thread(stuck.at_eof)  # closed by the hub
            assert hub.counters["stalled_connections"] == 1
        finally:
            stuck.close()
            await hub.close()

    try:
        asyncio.run(main())
    finally:
        service.close()
