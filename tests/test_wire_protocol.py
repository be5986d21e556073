"""Protocol robustness against a real ``memviewer serve`` process over a real Unix socket.

Every abuse gets a JSON-RPC error (or, for an oversized frame, an error and a
closed connection) and the hub keeps serving everyone else.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rawclient import Raw

from memviewer.errors import MemviewerError
from memviewer.wire import protocol
from memviewer.wire.probe import hub_hello, probe_hub
from memviewer.wire.remote import RemoteService
from memviewer.wire.testing import HubProcess

pytestmark = pytest.mark.integration

FRAME_LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def hub() -> Iterator[HubProcess]:
    base = Path(tempfile.mkdtemp(prefix="mvp-", dir="/tmp"))
    proc = HubProcess(base / "home", base / "hub.sock", frame_limit=FRAME_LIMIT)
    try:
        with proc:
            yield proc
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def raw(hub: HubProcess) -> Iterator[Raw]:
    client = Raw(hub.socket_path)
    yield client
    client.close()


def assert_alive(hub: HubProcess) -> None:
    """A brand-new client still gets served."""
    assert hub.proc is not None and hub.proc.poll() is None
    hello = hub_hello(hub.socket_path, timeout=5)
    assert hello is not None and hello["protocol"] == protocol.PROTOCOL_VERSION


def err(msg: dict[str, Any]) -> tuple[int, str]:
    assert "error" in msg, msg
    return msg["error"]["code"], msg["error"]["data"]["code"]


def test_malformed_json_is_a_parse_error_and_the_connection_stays_usable(hub: HubProcess, raw: Raw) -> None:
    raw.send(b'{"jsonrpc": "2.0", "id": 1, "method": "hello", \n')
    out = raw.read()
    assert out is not None and out["id"] is None
    assert err(out) == (protocol.PARSE_ERROR, "invalid_argument")
    assert raw.call("hello", {"protocol": 1}, req_id=2)["result"]["protocol"] == 1
    assert_alive(hub)


def test_random_bytes_and_invalid_utf8(hub: HubProcess, raw: Raw) -> None:
    rng = random.Random(7)
    junk = bytes(rng.getrandbits(8) for _ in range(20_000)).replace(b"\n", b"") + b"\n"
    raw.send(b"\xff\xfe\xc3\x28 not utf-8\n" + junk)
    for _ in range(2):
        out = raw.read()
        assert out is not None
        assert err(out)[0] == protocol.PARSE_ERROR
        assert "UTF-8" in out["error"]["message"] or "JSON" in out["error"]["message"]
    assert raw.call("hello", req_id="after")["id"] == "after"
    assert_alive(hub)


@pytest.mark.parametrize("times", [2, 12])
def test_frame_over_the_limit_gets_an_error_then_the_connection_closes(
    hub: HubProcess, raw: Raw, times: int
) -> None:
    # 12x the limit is far more than a socket buffer holds: the hub must read the
    # rest of the frame away, or a client still writing it gets a broken pipe
    # instead of the error (a CI flake until the hub drained).
    big = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "publish",
            "params": {"commands": [{"op": "open_session", "agent": "x" * (FRAME_LIMIT * times)}]},
        }
    )
    raw.send(big.encode() + b"\n")
    out = raw.read()
    assert out is not None
    assert err(out) == (protocol.INVALID_REQUEST, "invalid_argument")
    assert out["error"]["data"]["reason"] == "frame_too_large"
    assert out["error"]["data"]["limit"] == FRAME_LIMIT
    assert raw.read() is None  # closed by the hub
    assert_alive(hub)


def test_unknown_method(hub: HubProcess, raw: Raw) -> None:
    out = raw.call("drop_all_tables", {}, req_id=9)
    assert out["id"] == 9
    assert err(out) == (protocol.METHOD_NOT_FOUND, "invalid_argument")
    assert "publish" in out["error"]["data"]["methods"]
    # a notification (no id) for an unknown method is ignored, not answered
    raw.send(b'{"jsonrpc": "2.0", "method": "nope"}\n')
    assert raw.call("hello", req_id=10)["id"] == 10


@pytest.mark.parametrize(
    ("method", "params", "code"),
    [
        ("sessions", {"limit": "ten"}, protocol.INVALID_PARAMS),
        ("sessions", {"descending": 1}, protocol.INVALID_PARAMS),
        ("sessions", {"bogus": 1}, protocol.INVALID_PARAMS),
        ("session", {}, protocol.INVALID_PARAMS),
        ("session", {"session_id": 42}, protocol.INVALID_PARAMS),
        ("publish", {"commands": "open_session"}, protocol.INVALID_PARAMS),
        ("subscribe", {"kinds": ["session.exploded"]}, protocol.INVALID_PARAMS),
        ("subscribe", {"from_seq": -1}, protocol.INVALID_PARAMS),
        ("events", {"limit": True}, protocol.INVALID_PARAMS),
        ("events", {"limit": 0}, protocol.INVALID_PARAMS),
        ("events", {"from_seq": 10**23}, protocol.INVALID_PARAMS),  # was an OverflowError (-32603)
        ("sessions", {"limit": 10**23}, protocol.INVALID_PARAMS),
        ("sessions", {"offset": -5}, protocol.INVALID_PARAMS),
        ("sessions", {"sort": "vibes"}, protocol.APP_ERROR_NUMBERS["invalid_argument"]),
        ("search", {"query": "x", "limit": 0}, protocol.INVALID_PARAMS),
        # search and recall: the request models' bounds and keys, before the handler
        ("search", {"query": "x", "limit": 1001}, protocol.INVALID_PARAMS),
        ("search", {"query": "x", "window": 501}, protocol.INVALID_PARAMS),
        ("recall", {"query": "x", "top_k": 1001}, protocol.INVALID_PARAMS),
        ("recall", {"query": "x", "weights": {"w_dense": 1.0}}, protocol.INVALID_PARAMS),
        ("hello", {"role": "admin"}, protocol.INVALID_PARAMS),
        ("hello", {"protocol": 2}, protocol.APP_ERROR_NUMBERS["invalid_argument"]),
    ],
)
def test_wrong_parameters(hub: HubProcess, raw: Raw, method: str, params: Any, code: int) -> None:
    out = raw.call(method, params, req_id=3)
    assert out["id"] == 3
    assert err(out) == (code, "invalid_argument")


def test_invalid_requests(hub: HubProcess, raw: Raw) -> None:
    raw.send(b"[1, 2, 3]\n")
    assert err(raw.read() or {})[0] == protocol.INVALID_REQUEST
    raw.send(b'{"jsonrpc": "1.0", "id": 5, "method": "hello"}\n')
    out = raw.read() or {}
    assert out["id"] == 5 and err(out)[0] == protocol.INVALID_REQUEST
    raw.send(b'{"jsonrpc": "2.0", "id": 6}\n')
    assert err(raw.read() or {})[0] == protocol.INVALID_REQUEST
    raw.send(b'{"jsonrpc": "2.0", "id": 7, "method": "sessions", "params": [1]}\n')
    assert err(raw.read() or {})[0] == protocol.INVALID_PARAMS
    raw.send(b"\n   \n")  # blank lines are parse errors too, not a hang
    assert err(raw.read() or {})[0] == protocol.PARSE_ERROR
    assert_alive(hub)


def test_half_closed_connection_is_still_answered(hub: HubProcess) -> None:
    client = Raw(hub.socket_path)
    try:
        client.send(b'{"jsonrpc":"2.0","id":1,"method":"stats"}\n{"jsonrpc":"2.0","id":2,"method":"hello"}')
        client.sock.shutdown(socket.SHUT_WR)  # the last request has no newline: EOF ends it
        answers = {m["id"]: m for m in (client.read(), client.read())}
        assert set(answers) == {1, 2}
        assert "counts" in answers[1]["result"] and answers[2]["result"]["protocol"] == 1
        assert client.read() is None
    finally:
        client.close()
    # a client that vanishes mid-frame does not hurt either
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(hub.socket_path))
    s.sendall(b'{"jsonrpc":"2.0","id":1,"meth')
    s.close()
    assert_alive(hub)


def test_publish_isolates_bad_commands(hub: HubProcess, raw: Raw) -> None:
    sid, eid = "s-proto-1", "e-proto-1"
    commands: list[Any] = [
        {"op": "open_session", "session_id": sid, "agent": "proto"},
        {"op": "add_turn", "episode_id": "e-missing", "role": "assistant", "content": "x"},
        {"op": "start_episode", "session_id": sid, "user_message": "   "},
        {"op": "start_episode", "session_id": sid, "user_message": "fix it", "episode_id": eid},
        {"op": "add_turn", "episode_id": eid, "role": "robot", "content": "beep"},
        {"op": "add_turn", "episode_id": eid, "role": "assistant", "content": "done", "turn_id": "t-p1"},
        {"op": "explode"},
        "not a command",
        {"op": "finalize_episode", "episode_id": eid},
        {"op": "add_turn", "episode_id": eid, "role": "assistant", "content": "late"},
    ]
    out = raw.call("publish", {"commands": commands}, req_id=11)
    results = out["result"]["results"]
    assert len(results) == len(commands)
    codes = [r["error"]["code"] if "error" in r else "ok" for r in results]
    assert codes == [
        "ok",
        "episode_not_found",
        "invalid_argument",
        "ok",
        "invalid_argument",
        "ok",
        "invalid_argument",
        "invalid_argument",
        "ok",
        "conflict",
    ]
    session = RemoteService(hub.socket_path).session(sid)
    assert [t["content"] for t in session["turns"]] == ["fix it", "done"]
    assert session["episodes"][0]["status"] == "closed"


def test_read_methods_match_the_service(hub: HubProcess) -> None:
    from memviewer.config import load_settings
    from memviewer.service import MemoryService

    with RemoteService(hub.socket_path) as remote:
        remote.publish(
            [
                {
                    "op": "open_session",
                    "session_id": "s-read-1",
                    "agent": "reader",
                    "scope": "user",
                    "scope_id": "u9",
                    "ts": 1_700_000_000,
                },
                {
                    "op": "start_episode",
                    "session_id": "s-read-1",
                    "user_message": "hello 世界",
                    "episode_id": "e-read-1",
                    "ts": 1_700_000_001,
                },
            ]
        )
        settings = load_settings(None, env={}, home=str(hub.home), socket=str(hub.socket_path))
        local = MemoryService(settings, readonly=True)
        try:
            assert remote.sessions(scope_id="u9") == json.loads(json.dumps(local.sessions(scope_id="u9")))
            assert remote.session("s-read-1") == json.loads(json.dumps(local.session("s-read-1")))
            events = remote.events(0, 10_000)
            assert [e.seq for e in events] == list(range(1, local.last_seq + 1))
            assert events == local.events(0, 10_000)
            stats = remote.stats()
            assert stats["counts"] == local.stats()["counts"]
            assert stats["hub"]["connections"] >= 1 and stats["hub"]["frame_limit"] == FRAME_LIMIT
            assert stats["hub"]["counters"]["protocol_errors"] >= 0
        finally:
            local.close()
        with pytest.raises(MemviewerError) as exc:
            remote.session("s-nope")
        assert exc.value.code == "not_found"


def test_search_through_the_hub_equals_in_process(hub: HubProcess) -> None:
    from memviewer.config import load_settings
    from memviewer.service import MemoryService

    with RemoteService(hub.socket_path) as remote:
        remote.publish(
            [
                {"op": "open_session", "session_id": "s-search-1", "agent": "searcher"},
                {
                    "op": "start_episode",
                    "session_id": "s-search-1",
                    "episode_id": "e-search-1",
                    "user_message": "rotate the deploy token XZ99 please",
                },
            ]
        )
        settings = load_settings(None, env={}, home=str(hub.home), socket=str(hub.socket_path))
        local = MemoryService(settings, readonly=True)
        try:
            assert remote.search("XZ99") == json.loads(json.dumps(local.search("XZ99")))
        finally:
            local.close()


def test_probe(hub: HubProcess, tmp_path: Path) -> None:
    assert probe_hub(hub.socket_path) == hub_hello(hub.socket_path)["server_version"]  # type: ignore[index]
    assert probe_hub(tmp_path / "nothing.sock") is None
    plain = tmp_path / "plain-file"
    plain.write_text("not a socket")
    assert probe_hub(plain) is None
    # a socket that accepts but never answers: probe gives up quickly
    d = Path(tempfile.mkdtemp(prefix="mvq-", dir="/tmp"))
    try:
        mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        mute.bind(str(d / "mute.sock"))
        mute.listen(1)
        assert probe_hub(d / "mute.sock", timeout=0.2) is None
        mute.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    assert os.path.exists(hub.socket_path)


def _publish_frame(metadata: str, req_id: int) -> bytes:
    """A raw publish whose one add_turn carries ``metadata`` (raw JSON text) verbatim."""
    return (
        b'{"jsonrpc":"2.0","id":%d,"method":"publish","params":{"commands":[{"op":"open_session",'
        b'"session_id":"s-poison","agent":"x","meta":%s}]}}\n' % (req_id, metadata.encode())
    )


@pytest.mark.parametrize(
    ("metadata", "why"),
    [
        ('{"x": "half an emoji \\ud83d"}', "lone UTF-16 surrogate"),
        ('{"\\udc00": 1}', "lone UTF-16 surrogate"),
        ("[" * 70 + "]" * 70, "nested deeper than 64 levels"),
        ("[" * 970 + "]" * 970, "nested deeper than 64 levels"),  # what Python's codec still reads
        ("[" * 20_000 + "]" * 20_000, "nested deeper than 64 levels"),  # beyond its recursion limit
    ],
    ids=["lone-surrogate", "surrogate-key", "depth-70", "depth-970", "depth-20000"],
)
def test_values_that_could_never_be_read_back_are_refused_and_the_connection_stays(
    hub: HubProcess, raw: Raw, metadata: str, why: str
) -> None:
    """Stored, they would make every later read of them fail (a poisoned session list)."""
    raw.send(_publish_frame(metadata, 41))
    out = raw.read()
    assert out is not None and out["id"] is None
    assert err(out) == (protocol.PARSE_ERROR, "invalid_argument")
    assert why in out["error"]["message"]
    assert raw.call("hello", req_id=42)["id"] == 42
    with RemoteService(hub.socket_path) as remote:  # nothing stored, reads keep answering
        assert all(s["session_id"] != "s-poison" for s in remote.sessions(limit=500)["sessions"])
    assert_alive(hub)


def test_a_valid_surrogate_pair_is_a_character_not_an_error(hub: HubProcess, raw: Raw) -> None:
    raw.send(_publish_frame('{"mood": "\\ud83d\\ude00"}', 43))
    out = raw.read()
    assert out is not None and "ok" in out["result"]["results"][0], out
    with RemoteService(hub.socket_path) as remote:
        assert remote.session("s-poison")["session"]["meta"] == {"mood": "😀"}


def test_encoding_never_fails_on_a_stored_lone_surrogate() -> None:
    frame = protocol.encode({"x": "cut \ud83d"})
    assert frame.endswith(b"\n") and frame.isascii()
    assert json.loads(frame) == {"x": "cut \ud83d"}  # the value itself, escaped
    assert protocol.encode({"x": "ok ✓"}) == '{"x":"ok ✓"}\n'.encode()  # UTF-8 when it can be


def test_an_event_that_cannot_be_encoded_still_arrives_in_order() -> None:
    from memviewer.events import EventRecord
    from memviewer.wire.connection import event_frame

    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    frame = json.loads(
        event_frame(
            EventRecord(
                seq=7, kind="session.started", ts=1.0, session_id="s", episode_id=None, payload={"meta": deep}
            )
        )
    )
    assert frame["params"]["seq"] == 7 and "RecursionError" in frame["params"]["payload"]["unencodable"]
