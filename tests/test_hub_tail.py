"""``memviewer tail``: NDJSON / readable lines, from the store without a hub, live with one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runs import invoke_on
from waiting import wait_subscribed

from memviewer.client import Publisher
from memviewer.wire.testing import HubProcess, hub_env

KEYS = {"seq", "kind", "ts", "session_id", "episode_id", "payload"}


def _tail(settings, *args: str) -> list[str]:  # noqa: ANN001
    result = invoke_on(settings, "tail", *args)
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def test_no_follow_reads_the_store_without_a_hub(service, settings) -> None:  # noqa: ANN001
    sid = service.open_session(agent="tailer")["session_id"]
    for n in range(6):
        eid = service.start_episode(sid, f"task {n}: fix the build")["episode_id"]
        service.add_turn(eid, "tool", "compiler output …", metadata={"tool": "make"})
        service.finalize_episode(eid)
    last = service.last_seq
    expected = [e.to_dict() for e in service.events(0, 10_000)]
    service.close()  # no writer left: tail must open the store read-only by itself

    lines = _tail(settings, "--no-follow", "--json", "--from-seq", "0")
    objs = [json.loads(line) for line in lines]
    assert objs == json.loads(json.dumps(expected))
    assert all(set(o) == KEYS for o in objs) and [o["seq"] for o in objs] == list(range(1, last + 1))

    started = [
        json.loads(line)
        for line in _tail(settings, "--no-follow", "--json", "--from-seq", "0", "--kind", "episode.started")
    ]
    assert [o["payload"]["user_message"] for o in started] == [f"task {n}: fix the build" for n in range(6)]

    recent = _tail(settings, "--no-follow")  # default: the last 10, readable
    assert len(recent) == 10
    assert recent[-1].split()[0] == str(last) and "episode.finalized" in recent[-1]
    assert any("tool[make]: compiler output" in line for line in recent)


def test_readable_lines_show_tool_calls_and_lists_like_the_live_screen(service, settings) -> None:  # noqa: ANN001
    """A tool-call-only assistant turn prints its call, not an empty ``#1 assistant:``; a
    deleted session's turn ids are a count and the first ids, not a Python list; both are
    the summary the Live screen shows (one formatter)."""
    from memviewer.wire.event_summary import event_summary

    sid = service.open_session(agent="tailer")["session_id"]
    eid = service.start_episode(sid, "weather in Paris?")["episode_id"]
    fn = {"name": "get_weather", "arguments": '{"city":"Paris"}'}
    call = {"id": "c1", "type": "function", "function": fn}
    service.add_turn(eid, "assistant", "", tool_calls=[call])
    service.finalize_episode(eid)
    service.delete_session(sid)
    events = service.events(0, 100)
    service.close()

    lines = _tail(settings, "--no-follow", "--from-seq", "0")
    tool_line = next(line for line in lines if "#1 assistant:" in line)
    assert tool_line.endswith('#1 assistant: → get_weather(city="Paris")')
    deleted = next(line for line in lines if "session.deleted" in line)
    assert "deleted 1 episode, 2 turns: " in deleted and "['" not in deleted and "+" not in deleted
    for ev, line in zip(events, lines, strict=True):
        assert line.endswith(event_summary(ev.kind, ev.payload))


def test_unknown_kind_is_a_clear_error(settings) -> None:  # noqa: ANN001
    result = invoke_on(settings, "tail", "--no-follow", "--kind", "session.exploded")
    assert result.exit_code != 0 and "unknown event kind" in result.output


@pytest.mark.integration
def test_follow_prints_live_events_from_a_hub(tmp_path: Path, short_tmp: Path) -> None:
    home, sock = tmp_path / "home", short_tmp / "hub.sock"
    with HubProcess(home, sock):
        tail = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from memviewer.cli import main; main()",
                "tail",
                "--json",
                "--from-seq",
                "0",
            ],
            env=hub_env(home, sock),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_subscribed(sock)  # the tail is live before anything is published
            with Publisher(sock, tmp_path / "spool") as pub:
                sid = pub.open_session(agent="live-tail")
                eid = pub.start_episode(sid, "watch this")
                pub.add_turn(eid, "assistant", "you are watching")
                assert pub.flush(10)
            assert tail.stdout is not None
            seen = [json.loads(tail.stdout.readline()) for _ in range(4)]
        finally:
            tail.terminate()
            tail.wait(10)
    assert [o["kind"] for o in seen] == [
        "session.started",
        "episode.started",
        "episode.turn_added",
        "episode.turn_added",
    ]
    assert seen[-1]["payload"]["turn"]["content"] == "you are watching"
    assert [o["seq"] for o in seen] == [1, 2, 3, 4]


def test_a_running_hub_sees_what_another_process_writes(settings, short_tmp: Path) -> None:  # noqa: ANN001
    """A CLI import into the home of an idle hub: live subscribers get it, last_seq is true, and
    ``tail --no-follow`` prints all of it (it stopped at the hub's stale last_seq, ~1,000 of 1,401)."""
    import asyncio

    from memviewer.session.manager import SessionManager
    from memviewer.store.db import Store
    from memviewer.wire.remote import RemoteService
    from memviewer.wire.subscriber import Subscriber

    home, sock = settings.home_path, settings.socket_path
    with HubProcess(home, sock):
        with RemoteService(sock) as remote:
            assert remote.last_seq == 0

        async def first_events(n: int) -> list[int]:
            seqs: list[int] = []
            async for ev in Subscriber(sock, 0).stream():
                seqs.append(ev.seq)  # type: ignore[union-attr]
                if len(seqs) == n:
                    return seqs
            return seqs

        async def watch_while_importing() -> list[int]:
            task = asyncio.ensure_future(first_events(1400))
            await asyncio.to_thread(wait_subscribed, sock)  # live before the foreign writes
            store = Store.open(home / "memviewer.db")  # this process, not the hub's
            try:
                mgr = SessionManager(store)
                await asyncio.to_thread(
                    lambda: [
                        mgr.import_session(
                            {"id": f"imp-{i:03d}", "scope": "user", "scope_id": "u1", "title": f"import {i}"},
                            [
                                {
                                    "id": f"imp-{i:03d}-t0",
                                    "role": "user",
                                    "content": f"turn of {i}",
                                    "timestamp": 1e9,
                                }
                            ],
                        )
                        for i in range(700)
                    ]
                )
            finally:
                store.close()
            return await asyncio.wait_for(task, timeout=15)  # no publish ever wakes the hub

        seqs = asyncio.run(watch_while_importing())
        assert seqs == list(range(1, 1401))
        with RemoteService(sock) as remote:
            assert remote.last_seq == 1400
        lines = _tail(settings, "--no-follow", "--json", "--from-seq", "0")
        assert [json.loads(line)["seq"] for line in lines] == list(range(1, 1401))
        recent = _tail(settings, "--no-follow", "--json")  # the last 10 are the newest
        assert [json.loads(line)["seq"] for line in recent] == list(range(1391, 1401))


def test_no_follow_on_a_store_that_is_not_a_database_is_a_clear_error(settings) -> None:  # noqa: ANN001
    settings.home_path.mkdir(parents=True, exist_ok=True)
    (settings.home_path / "memviewer.db").write_bytes(b"not sqlite at all " * 100)
    result = invoke_on(settings, "tail", "--no-follow")
    assert result.exit_code == 1
    assert "is not a memviewer store" in result.output and "Traceback" not in result.output
