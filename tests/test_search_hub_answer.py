"""A ``search`` through a real hub process answers exactly what the in-process search
answers (the hub's fast paths: recall log entries held until the answer is written,
annotation matching skipped on a store without annotations, the client's lighter frame
check), and every search it answered is in the recall log."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_for

from memviewer.config import load_settings
from memviewer.service import MemoryService
from memviewer.wire import protocol
from memviewer.wire.syncclient import RpcConnection
from memviewer.wire.testing import HubProcess

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parent / "fixtures" / "praisonai"
QUERIES = [
    "refund policy",  # two sessions, lineage of the same topic
    "deploy token",  # a hit whose window holds a tool call and its tool result
    "迁移",  # CJK: the trigram index
    "予算",  # Japanese, two characters: trigram expansions
    "billing migration reconciliation",  # an automated (demoted) session
    "nothing-matches-this-zzz",
]


@pytest.fixture
def home(tmp_path: Path, short_tmp: Path) -> Path:
    home = tmp_path / "home"
    svc = MemoryService(load_settings(env={}, home=str(home), socket=str(short_tmp / "none.sock")))
    try:
        svc.import_praisonai([FIXTURES], index=False)
    finally:
        svc.close()
    return home


@pytest.fixture
def hub(home: Path, short_tmp: Path) -> Iterator[tuple[HubProcess, RpcConnection]]:
    sock = short_tmp / "hub.sock"
    with HubProcess(home, sock) as proc, RpcConnection(sock) as conn:
        conn.call(protocol.HELLO, {"protocol": protocol.PROTOCOL_VERSION, "role": "reader"})
        yield proc, conn


def _service(home: Path, proc: HubProcess, readonly: bool = True) -> MemoryService:
    return MemoryService(
        load_settings(env={}, home=str(home), socket=str(proc.socket_path)), readonly=readonly
    )


def _local(home: Path, proc: HubProcess, query: str) -> dict[str, Any]:
    svc = _service(home, proc)
    try:
        return svc.search(query, limit=5, window=5)
    finally:
        svc.close()


def _logged(home: Path, proc: HubProcess) -> list[str]:
    svc = _service(home, proc)
    try:
        return [e["query"] for e in svc.recalls(limit=500)["recalls"] if e["source"] == "hub"]
    finally:
        svc.close()


def test_hub_search_equals_in_process_and_every_search_is_logged(
    home: Path, hub: tuple[HubProcess, RpcConnection]
) -> None:
    proc, conn = hub
    for query in QUERIES:
        remote = conn.call(protocol.SEARCH, {"query": query, "limit": 5, "window": 5})
        local = _local(home, proc, query)
        assert remote == local, query
        assert json.dumps(remote, ensure_ascii=False) == json.dumps(local, ensure_ascii=False)
    by_query = {q: conn.call(protocol.SEARCH, {"query": q, "limit": 5, "window": 5}) for q in QUERIES}
    assert by_query["refund policy"]["results"] and not by_query["nothing-matches-this-zzz"]["results"]
    assert by_query["迁移"]["results"][0]["session_id"] == by_query["予算"]["results"][0]["session_id"]
    roles = [m["role"] for m in by_query["deploy token"]["results"][0]["messages"]]
    assert "tool" in roles  # the window around the anchor holds the tool call's result
    # Entries are held until each answer is written, then queued: none is lost.
    wait_for(lambda: sorted(_logged(home, proc)) == sorted(QUERIES * 2), what="every search logged")


def test_annotations_still_match_through_the_hub(home: Path, hub: tuple[HubProcess, RpcConnection]) -> None:
    proc, conn = hub
    before = conn.call(protocol.SEARCH, {"query": "refund policy"})
    assert "annotations" not in before  # no tag or note anywhere: the matching is skipped
    sid = before["results"][0]["session_id"]
    writer = _service(home, proc, readonly=False)
    try:
        writer.tag(sid, ["refund"])
        writer.note(sid, "ask finance about the refund policy window")
    finally:
        writer.close()
    after = conn.call(protocol.SEARCH, {"query": "refund policy"})
    assert after == _local(home, proc, "refund policy")
    assert [a["target_id"] for a in after["annotations"]] == [sid]
    assert after["annotations"][0]["tags"] == ["refund"]
    assert after["results"] == before["results"]


def test_a_search_from_a_client_that_hung_up_is_still_logged(
    home: Path, hub: tuple[HubProcess, RpcConnection]
) -> None:
    proc, _conn = hub
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.connect(str(proc.socket_path))
        raw.sendall(protocol.request(protocol.SEARCH, {"query": "deploy token"}, 1))
        raw.shutdown(socket.SHUT_WR)
    wait_for(lambda: "deploy token" in _logged(home, proc), what="the hung-up search logged")
