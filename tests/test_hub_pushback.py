"""The hub's bounded write queue under a flood: many raw connections send large
publishes without reading their answers. The hub's memory stays flat, and every
command is either stored and acknowledged or answered with the retryable
``overloaded`` push-back (nothing stored), never lost or left unanswered."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_for

from memviewer import paths
from memviewer.wire import protocol
from memviewer.wire.remote import RemoteService
from memviewer.wire.testing import HubProcess

CONNECTIONS = 32
PER_CONNECTION = 4
FRAME_LIMIT = 1_048_576


def _frame(req_id: int, episode_id: str, turn_id: str, size: int) -> bytes:
    # long words: the flood's cost is bytes, not full-text tokens (the writer stays quick)
    content = ((f"{req_id:06d}" + "x" * 993 + " ") * (size // 1000 + 1))[:size]
    command = {
        "op": "add_turn",
        "episode_id": episode_id,
        "role": "tool",
        "content": content,
        "turn_id": turn_id,
    }
    return protocol.request(protocol.PUBLISH, {"commands": [command]}, req_id)


def _flood(
    sock: Path, frames: list[bytes], replies: list[dict[str, Any]], errors: list[BaseException]
) -> None:
    """Send every frame without reading, then read every answer until the hub closes."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(str(sock))
            for frame in frames:
                s.sendall(frame)
            s.shutdown(socket.SHUT_WR)  # half-closed: the hub answers all, then closes
            s.settimeout(120)
            with s.makefile("rb") as rfile:
                for line in rfile:
                    replies.append(json.loads(line))
    except BaseException as exc:  # reported by the test thread
        errors.append(exc)


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


@pytest.mark.integration
def test_a_flood_of_large_publishes_is_pushed_back_and_nothing_is_lost(
    tmp_path: Path, short_tmp: Path
) -> None:
    sock = short_tmp / "hub.sock"
    home = tmp_path / "home"
    with HubProcess(home, sock) as hub:
        with RemoteService(sock) as remote:
            setup = remote.publish(
                [
                    {"op": "open_session", "session_id": "s-flood", "agent": "flood"},
                    {
                        "op": "start_episode",
                        "session_id": "s-flood",
                        "episode_id": "e-flood",
                        "user_message": "go",
                    },
                ]
            )
            assert all("ok" in r for r in setup)
            stats_before = remote.stats()["hub"]
        limit = stats_before["write_pending"]["max_pending_bytes"]
        rss_before = _rss(hub.pid)

        size = FRAME_LIMIT - 400  # just under the frame limit once framed
        frames: dict[int, list[bytes]] = {}
        turn_of: dict[tuple[int, int], str] = {}
        for c in range(CONNECTIONS):
            frames[c] = []
            for k in range(PER_CONNECTION):
                req_id = c * 1000 + k
                turn_of[(c, req_id)] = f"t-flood-{c}-{k}"
                frames[c].append(_frame(req_id, "e-flood", turn_of[(c, req_id)], size))
                assert len(frames[c][-1]) <= FRAME_LIMIT + 1
        replies: dict[int, list[dict[str, Any]]] = {c: [] for c in range(CONNECTIONS)}
        errors: list[BaseException] = []
        threads = [
            threading.Thread(target=_flood, args=(sock, frames[c], replies[c], errors), daemon=True)
            for c in range(CONNECTIONS)
        ]
        peak = 0
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            peak = max(peak, _rss(hub.pid))
            time.sleep(0.01)  # sampling rate of the RSS probe, not a synchronisation
        for t in threads:
            t.join()
        assert not errors, errors
        offered = sum(len(f) for fs in frames.values() for f in fs)
        del frames

        stored_ok: set[str] = set()
        pushed_back: set[str] = set()
        for c, answers in replies.items():
            assert sorted(a["id"] for a in answers) == [c * 1000 + k for k in range(PER_CONNECTION)], answers
            for answer in answers:
                turn_id = turn_of[(c, answer["id"])]
                if "result" in answer:
                    (result,) = answer["result"]["results"]
                    assert "ok" in result, result
                    stored_ok.add(turn_id)
                else:
                    err = answer["error"]
                    assert err["code"] == protocol.INTERNAL_ERROR, err
                    assert err["data"]["code"] == "internal" and err["data"]["reason"] == "overloaded", err
                    assert err["data"]["retry"] is True and err["data"]["retry_after_ms"] > 0, err
                    pushed_back.add(turn_id)
        assert len(stored_ok) + len(pushed_back) == CONNECTIONS * PER_CONNECTION
        assert pushed_back, "the flood never filled the queue: the bound was not exercised"
        assert stored_ok

        with RemoteService(sock) as remote:
            info = remote.stats()["hub"]
        assert info["counters"]["overloaded_requests"] == len(pushed_back)
        assert info["write_pending"]["peak_pending_bytes"] <= limit + FRAME_LIMIT
        assert info["write_pending"]["pending_bytes"] == 0

        growth = peak - rss_before
        print(
            f"offered {offered / 2**20:.0f} MiB over {CONNECTIONS} connections; "
            f"hub RSS {rss_before / 2**20:.0f} -> peak {peak / 2**20:.0f} MiB; "
            f"{len(stored_ok)} stored, {len(pushed_back)} pushed back"
        )
        # The queue bound, plus what each connection holds of a frame (its read buffer of up to
        # two frame limits, the frame read and its parse), plus room for the allocator; the hub
        # before the bound grew by ~650 MiB under this same flood (docs/benchmarks.md).
        assert growth < limit + CONNECTIONS * 4 * FRAME_LIMIT + 64 * 2**20, (growth, offered)

    # what was acknowledged is stored; what was pushed back is not (the sender still has it)
    db = sqlite3.connect(f"file:{paths.db_path(home)}?mode=ro", uri=True)
    try:
        stored = {row[0] for row in db.execute("SELECT id FROM turns WHERE id LIKE 't-flood-%'")}
    finally:
        db.close()
    assert stored == stored_ok


def _raw_publish(sock: Path, commands: list[dict[str, Any]], req_id: int) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(sock))
        s.sendall(protocol.request(protocol.PUBLISH, {"commands": commands}, req_id))
        s.settimeout(30)
        with s.makefile("rb") as rfile:
            return json.loads(rfile.readline())


def test_a_pushed_back_publisher_keeps_its_batch_and_delivers_it(service, settings, tmp_path) -> None:  # noqa: ANN001
    """The writer is held, so the queue stays full: a raw publish gets ``overloaded`` and
    nothing of it is stored; a real ``Publisher`` pushed back the same way keeps its turns
    and delivers every one of them once the writer moves again."""
    from memviewer.client import Publisher
    from memviewer.wire.hub import Hub
    from memviewer.wire.hub_limits import HubLimits

    sock = settings.socket_path
    padding = {"note": "p" * 3000}

    async def main() -> None:
        hub = Hub(
            service,
            sock,
            start_indexer=False,
            limits=HubLimits(max_pending_bytes=4096, max_pending_commands=1000),
        )
        await hub.start()
        gate = threading.Event()
        held = asyncio.ensure_future(hub.write(gate.wait, 60))  # the one writer thread waits
        try:
            first = asyncio.ensure_future(
                asyncio.to_thread(
                    _raw_publish,
                    sock,
                    [{"op": "open_session", "session_id": "s-first", "meta": padding}],
                    1,
                )
            )
            await asyncio.to_thread(wait_for, lambda: hub.info()["write_pending"]["pending_commands"] == 1)
            refused = await asyncio.to_thread(
                _raw_publish,
                sock,
                [{"op": "open_session", "session_id": "s-refused", "meta": padding}],
                2,
            )
            assert refused["id"] == 2 and refused["error"]["code"] == protocol.INTERNAL_ERROR, refused
            data = refused["error"]["data"]
            assert data["code"] == "internal" and data["reason"] == "overloaded" and data["retry"] is True
            assert data["limit_bytes"] == 4096 and data["pending_commands"] == 1

            pub = Publisher(sock, tmp_path / "agent-spool", home=service.home, max_backoff=0.2)
            sid = pub.open_session(agent="pushed-back")
            eid = pub.start_episode(sid, "write the report")
            turn_ids = [pub.add_turn(eid, "assistant", f"part {i}: " + "r" * 200) for i in range(40)]
            await asyncio.to_thread(wait_for, lambda: hub.info()["counters"]["overloaded_requests"] >= 2)
            gate.set()
            await held
            answer = await first
            assert [r.get("ok", {}).get("session_id") for r in answer["result"]["results"]] == ["s-first"], (
                answer
            )
            assert await asyncio.to_thread(pub.flush, 30)
            assert pub.errors == 0, list(pub.error_log)
            await asyncio.to_thread(pub.close, 10)
            stored = await asyncio.to_thread(service.session, sid)
            assert {t["turn_id"] for t in stored["turns"]} >= set(turn_ids)
            sessions = {s["session_id"] for s in (await asyncio.to_thread(service.sessions))["sessions"]}
            assert "s-first" in sessions and "s-refused" not in sessions
            assert hub.info()["write_pending"]["pending_bytes"] == 0
        finally:
            gate.set()
            await hub.close()

    asyncio.run(main())
