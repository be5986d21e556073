"""A search's recall log entry is built where it is written: a hub builds it on its loop
thread after the answer is written (off the request's path); every other route builds it at
once. The entry is the same either way, and a failure to build it never costs the answer."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from dated import cooking_sessions

from memviewer import recall_log
from memviewer.recall_log import RecordAs
from memviewer.wire.hub import Hub
from memviewer.wire.remote import RemoteService

PARAMS = {"session_id": None, "around": None, "limit": 5, "window": 5, "scope": None, "scope_id": None}


def _comparable(cmd: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in cmd.items() if k not in ("recall_id", "ts")}


def test_the_sink_gets_a_builder_whose_entry_matches_the_answer(service) -> None:  # noqa: ANN001
    cooking_sessions(service)
    got: list[recall_log.Entry] = []
    service.record_sink = got.append
    t0 = time.time()
    out = service.search("paella", record=RecordAs("mcp", session_id="s-caller"))
    t1 = time.time()
    assert out["results"] and len(got) == 1 and callable(got[0])
    cmd = recall_log.built(got[0])
    assert t0 <= cmd["ts"] <= t1  # when the search ran, not when the entry was built
    want = recall_log.search_command("paella", PARAMS, out, RecordAs("mcp", session_id="s-caller"))
    assert _comparable(cmd) == _comparable(want)
    assert [r["session_id"] for r in cmd["results"]] == [h["session_id"] for h in out["results"]]
    assert cmd["session_id"] == "s-caller" and cmd["source"] == "mcp"


def test_without_a_sink_the_entry_is_written_at_once(service) -> None:  # noqa: ANN001
    cooking_sessions(service)
    out = service.search("paella", record=RecordAs("cli"))
    logged = service.recalls(kind="search")["recalls"]
    assert [(r["query"], r["source"]) for r in logged] == [("paella", "cli")]
    entry = service.recall_entry(logged[0]["recall_id"])
    assert [r["session_id"] for r in entry["results"]] == [h["session_id"] for h in out["results"]]


def test_not_recorded_when_asked_not_to(service) -> None:  # noqa: ANN001
    cooking_sessions(service)
    got: list[recall_log.Entry] = []
    service.record_sink = got.append
    service.search("paella")
    assert got == []


def test_the_hub_builds_it_on_its_loop_after_the_answer(service, settings, monkeypatch) -> None:  # noqa: ANN001
    """Built on the loop thread (not the thread that ran the search and wrote the answer), and
    a builder that fails costs the entry only: the answer arrives, ``recall_log_failed``
    counts it, and the next search is logged."""
    cooking_sessions(service)
    real = recall_log.search_command
    built_on: list[str] = []
    fail = {"next": False}

    def spying(*args: Any, **kwargs: Any) -> dict[str, Any]:
        built_on.append(threading.current_thread().name)
        if fail["next"]:
            fail["next"] = False
            raise RuntimeError("a bug in building the entry")
        return real(*args, **kwargs)

    monkeypatch.setattr(recall_log, "search_command", spying)

    async def main() -> None:
        hub = Hub(service, settings.socket_path, start_indexer=False)
        await hub.start()
        loop_thread = threading.current_thread().name
        remote = RemoteService(settings.socket_path)

        async def built(n: int) -> None:
            deadline = time.monotonic() + 10
            while len(built_on) < n and time.monotonic() < deadline:
                await asyncio.sleep(0.01)

        try:
            first = await asyncio.to_thread(remote.search, "paella")
            await built(1)
            fail["next"] = True
            second = await asyncio.to_thread(remote.search, "risotto")
            await built(2)
            third = await asyncio.to_thread(remote.search, "paella")
            await built(3)
            assert first["results"] and second["success"] and third == first
            assert built_on == [loop_thread] * 3
        finally:
            remote.close()
            await hub.close(grace=10)
        assert hub.counters["recall_log_failed"] == 1
        assert hub.counters["recall_log_written"] == 2

    asyncio.run(main())
    assert [r["query"] for r in service.recalls(kind="search")["recalls"]] == ["paella", "paella"]
