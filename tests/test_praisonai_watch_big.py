"""A big file in a watched PraisonAI folder goes through the chunked import: a real hub (in
this process, so the watcher's threshold can be lowered by its parameter), real watchfiles,
the real store, read back over the hub's socket."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_for

from memviewer.praisonai import chunked as praisonai_chunks
from memviewer.praisonai.watch import PraisonAIWatcher, child_session_id, sessions_from_file
from memviewer.wire.hub import Hub
from memviewer.wire.remote import RemoteService

BIG = 50_000  # bytes: the watcher's threshold for this test (the default is 16 MiB)


def _doc(n: int, *, edit: int | None = None) -> dict[str, Any]:
    msgs = [
        {
            "role": "assistant" if i % 2 else "user",
            "content": ("edited text" if i == edit else f"message {i % 40}"),  # repeats: occurrence ids
            "timestamp": 1714557600 + i // 3,
        }
        for i in range(n)
    ]
    return {
        "session_id": "big-1",
        "user_id": "u1",
        "agent_name": "bulk",
        "messages": msgs,
        "metadata": {
            "title": "a long one",
            "agent_histories": {
                "helper": [{"role": "user", "content": "sub-agent task", "timestamp": 1714557000}]
            },
        },
    }


def _write(path: Path, body: str) -> None:
    """As PraisonAI's store writes: a temp file, then ``os.replace``."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(body, encoding="utf-8")
    os.replace(tmp, path)


def _expected_ids(body: str) -> list[str]:
    (parent, turns), *_children = sessions_from_file(json.loads(body), "big-1", None)
    return [t["id"] for t in turns]


@pytest.mark.integration
def test_a_big_watched_file_is_stored_in_chunks_and_reconciled(service, settings, tmp_path: Path) -> None:  # noqa: ANN001
    folder = tmp_path / "sessions"
    folder.mkdir()
    watcher = PraisonAIWatcher(folder, big_file_bytes=BIG)
    path = folder / "big-1.json"
    n = 2 * praisonai_chunks.CHUNK_TURNS + 500  # three chunks
    body = json.dumps(_doc(n))
    assert len(body) > BIG

    def scenario(remote: RemoteService) -> None:
        """The client side, on its own thread (the hub runs on the event loop)."""
        wait_for(lambda: remote.stats()["hub"]["sources"][0]["connected"], 60.0, "the watcher")

        def counters() -> dict[str, int]:
            return remote.stats()["hub"]["sources"][0]["counters"]

        def imports(since: int) -> list[dict[str, Any]]:
            evs = remote.events(since, 1000, kinds=["session.imported"], session_id="big-1")
            return [e.payload for e in evs]

        def final(since: int) -> dict[str, Any] | None:
            done = [p for p in imports(since) if not p.get("partial")]
            return done[-1] if done else None

        # a bad big file (caught mid-write by a non-atomic writer) is reported, nothing stops
        broken = folder / "broken.json"
        broken.write_text(body[: len(body) // 2], encoding="utf-8")
        wait_for(lambda: counters()["invalid_json"] >= 1, 60.0, "the broken file counted")
        assert "broken.json" in remote.stats()["hub"]["sources"][0]["last_error"]

        # first write: three chunk-sized transactions (a partial event, then the final one)
        seq = remote.last_seq
        _write(path, body)
        done = wait_for(lambda: final(seq), 60.0, "the first import")
        assert (done["turns"], done["new_turns"], done["chunks"]) == (n, n, 3)
        assert [p.get("partial") for p in imports(seq)] == [True, None]
        turns = remote.session("big-1")["turns"]
        assert [t["turn_id"] for t in turns] == _expected_ids(body)  # each turn once, in order
        child = remote.session(child_session_id("big-1", "helper"))
        assert child["session"]["parent_session_id"] == "big-1"
        assert [t["content"] for t in child["turns"]] == ["sub-agent task"]
        meta = remote.session("big-1")["session"]["meta"]["metadata"]
        assert meta["agent_histories"] == {"child_sessions": ["big-1.agent.helper"]}
        c = counters()
        assert (c["chunked_files"], c["chunks_stored"], c["turns_added"]) == (1, 3, n + 1)
        # the chunks' segments merged right after the file, not at the next upkeep pass (a
        # few segments: the hub's own upkeep would leave them until more than 8 piled up)
        wait_for(lambda: remote.stats()["hub"]["keyword_segments"] == 1, 60.0, "the keyword index merged")

        # the same bytes again: hashed, found unchanged, nothing read or written
        seq = remote.last_seq
        unchanged = c["unchanged_files"]
        _write(path, body)
        wait_for(lambda: counters()["unchanged_files"] > unchanged, 60.0, "the rewrite seen")
        assert remote.last_seq == seq
        assert counters()["chunked_files"] == 1

        # the file grows: only the new turns are inserted, the old rows stay
        grown = json.dumps(_doc(n + 700))
        _write(path, grown)
        done = wait_for(lambda: final(seq), 60.0, "the grown file")
        assert (done["turns"], done["new_turns"], done["removed_turns"]) == (n + 700, 700, 0)
        after = remote.session("big-1")["turns"]
        assert [t["turn_id"] for t in after] == _expected_ids(grown)
        assert [t["turn_id"] for t in after[:n]] == [t["turn_id"] for t in turns]

        # a message edited in place: the new text is a new turn, none duplicated; the old
        # one is kept (a watched file never removes history), marked archived, with its tag
        old_id, kept_id = after[5]["turn_id"], after[6]["turn_id"]
        service.tag(old_id, ["check"])
        service.tag(kept_id, ["check"])
        seq = remote.last_seq
        edited = json.dumps(_doc(n + 700, edit=5))
        _write(path, edited)
        done = wait_for(lambda: final(seq), 60.0, "the edited file")
        assert (done["new_turns"], done["removed_turns"], done["kept_turns"]) == (1, 0, 1)
        assert done["turns"] == n + 700
        stored = remote.session("big-1")["turns"]
        ids = [t["turn_id"] for t in stored]
        assert [i for i in ids if i != old_id] == _expected_ids(edited) and len(set(ids)) == len(ids)
        assert old_id in ids and kept_id in ids
        old = next(t for t in stored if t["turn_id"] == old_id)
        assert old["archived"] is True and old["content"] == "message 5"
        assert sorted(a["target_id"] for a in service.annotations(tag="check")) == sorted([old_id, kept_id])
        assert counters()["chunked_files"] == 3
        assert counters()["turns_kept"] == 1

    async def main() -> None:
        hub = Hub(service, settings.socket_path, start_indexer=False, sources=[watcher])
        await hub.start()
        remote = RemoteService(settings.socket_path)
        try:
            await asyncio.to_thread(scenario, remote)
        finally:
            remote.close()
            await hub.close()

    asyncio.run(main())


@pytest.mark.integration
def test_a_hub_stopped_mid_import_leaves_whole_chunks_and_the_next_completes_it(
    service, settings, tmp_path: Path
) -> None:  # noqa: ANN001
    folder = tmp_path / "sessions"
    folder.mkdir()
    n = 20 * praisonai_chunks.CHUNK_TURNS
    body = json.dumps(_doc(n))
    _write(folder / "big-1.json", body)
    expected = _expected_ids(body)

    def stored_turns(remote: RemoteService) -> list[str]:
        try:
            return [t["turn_id"] for t in remote.session("big-1")["turns"]]
        except Exception:
            return []

    def imports(remote: RemoteService) -> list[dict[str, Any]]:
        return [e.payload for e in remote.events(0, 1000, kinds=["session.imported"], session_id="big-1")]

    kept: list[int] = []

    async def main() -> None:
        for run in (1, 2):
            watcher = PraisonAIWatcher(folder, big_file_bytes=BIG)
            hub = Hub(service, settings.socket_path, start_indexer=False, sources=[watcher])
            await hub.start()
            remote = RemoteService(settings.socket_path)
            try:
                if run == 1:  # stop as soon as the first chunk is in
                    await asyncio.to_thread(
                        wait_for, lambda r=remote: stored_turns(r), 60.0, "the first chunk"
                    )
                else:
                    await asyncio.to_thread(
                        wait_for,
                        lambda r=remote: [p for p in imports(r) if not p.get("partial")],
                        60.0,
                        "the final import",
                    )
            finally:
                remote.close()
                await hub.close()
            if run == 1:
                cut = [t["turn_id"] for t in service.session("big-1")["turns"]]
                assert 0 < len(cut) < n and len(cut) % praisonai_chunks.CHUNK_TURNS == 0  # whole chunks
                assert cut == expected[: len(cut)]
                assert all(
                    e.payload.get("partial") for e in service.events(0, 1000, ["session.imported"], "big-1")
                )
                kept.append(len(cut))

    asyncio.run(main())
    done = [
        e.payload
        for e in service.events(0, 1000, ["session.imported"], "big-1")
        if not e.payload.get("partial")
    ]
    assert len(done) == 1 and done[0]["new_turns"] == n - kept[0]  # the second run added only the rest
    ids = [t["turn_id"] for t in service.session("big-1")["turns"]]
    assert ids == expected  # every turn once, in order
