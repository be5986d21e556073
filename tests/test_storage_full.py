"""A full disk: a write is refused as a whole, nothing is acknowledged, nothing is lost.

The disk is made "full" by capping the SQLite file with ``PRAGMA max_page_count``
on every new connection: real SQLite then fails with SQLITE_FULL exactly as it
does when the filesystem has no room left.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text

from memviewer.errors import INTERNAL, MemviewerError
from memviewer.store.db import Store
from memviewer.wire.hub import Hub
from memviewer.wire.probe import hub_hello

UNCAPPED = 1_073_741_823


class DiskCap:
    """Caps (or frees) the SQLite file of ``store``: a stand-in for the filesystem filling up."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.pages = UNCAPPED
        event.listen(store.engine, "connect", self._on_connect)

    def _on_connect(self, dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute(f"PRAGMA max_page_count = {self.pages}")

    def fill(self, spare_pages: int = 2) -> None:
        with self.store.read() as conn:
            used = int(conn.execute(text("PRAGMA page_count")).scalar())
        self.set(used + spare_pages)

    def set(self, pages: int) -> None:
        self.pages = pages
        self.store.engine.dispose()  # pooled connections pick the new cap up on reconnect


def _counts(store: Store) -> tuple[int, int]:
    with store.read() as conn:
        turns = int(conn.execute(text("SELECT COUNT(*) FROM turns")).scalar())
        events = int(conn.execute(text("SELECT COUNT(*) FROM events")).scalar())
    return turns, events


def _turns(eid: str, prefix: str, n: int, size: int = 3000) -> list[dict[str, Any]]:
    return [
        {
            "op": "add_turn",
            "episode_id": eid,
            "role": "user",
            "turn_id": f"{prefix}-{i}",
            "content": f"{prefix} {i} " + "lorem ipsum " * (size // 12),
        }
        for i in range(n)
    ]


def test_a_full_disk_refuses_the_whole_batch_and_the_retry_stores_it_once(service) -> None:  # noqa: ANN001
    store = service.store
    service.apply_batch(
        [
            {"op": "open_session", "session_id": "s-1", "agent": "a"},
            {"op": "start_episode", "session_id": "s-1", "episode_id": "e-1", "user_message": "go"},
        ]
    )
    cap = DiskCap(store)
    before = _counts(store)
    last_seq = store.last_seq
    cap.fill()
    batch = _turns("e-1", "t", 12)
    with pytest.raises(MemviewerError) as err:
        service.apply_batch(batch)
    assert err.value.code == INTERNAL
    assert err.value.data == {"reason": "storage_full", "retry": True}
    assert "full" in err.value.message and "nothing of this write was stored" in err.value.message
    # all or nothing: no turn of the batch, no event, no gap in the log
    assert _counts(store) == before
    assert store.last_seq == last_seq
    # reads still work on a full disk
    assert len(service.session("s-1")["turns"]) == 1

    cap.set(UNCAPPED)  # room again: the very same batch goes in once, in order
    results = service.apply_batch(batch)
    assert all("ok" in r for r in results)
    turns = service.session("s-1")["turns"]
    assert [t["turn_id"] for t in turns[1:]] == [c["turn_id"] for c in batch]
    seqs = [e.seq for e in store.events_since(0, limit=10_000)]
    assert seqs == list(range(1, len(seqs) + 1))
    assert all("ok" in r for r in service.apply_batch(batch))  # a replay changes nothing
    assert _counts(store)[0] == before[0] + len(batch)


def test_a_bad_command_still_fails_alone(service) -> None:  # noqa: ANN001
    """The storage rule must not turn an ordinary bad command into a batch failure."""
    results = service.apply_batch(
        [
            {"op": "open_session", "session_id": "s-2", "agent": "a"},
            {"op": "add_turn", "episode_id": "nope", "role": "user", "content": "x"},
            {"op": "start_episode", "session_id": "s-2", "episode_id": "e-2", "user_message": "go"},
        ]
    )
    assert "ok" in results[0] and "ok" in results[2]
    assert results[1]["error"]["code"] == "episode_not_found"


@pytest.mark.integration
def test_a_publisher_keeps_its_turns_while_the_hub_disk_is_full(service, settings, tmp_path: Path) -> None:  # noqa: ANN001
    """Real socket, real publisher: a full disk is an error the publisher retries, never a loss."""
    from memviewer.client import Publisher

    sock = settings.socket_path
    cap = DiskCap(service.store)

    async def main() -> None:
        hub = Hub(service, sock, start_indexer=False)
        await hub.start()
        pub = Publisher(sock, tmp_path / "pub-spool", max_backoff=0.2)
        try:
            sid = pub.open_session(agent="filler", session_id="s-full")
            eid = pub.start_episode(sid, "write a lot")
            assert await asyncio.to_thread(pub.flush, 10)
            cap.fill()
            sent = [f"step {i} " + "lorem ipsum " * 250 for i in range(30)]
            for text_ in sent:
                pub.add_turn(eid, "assistant", text_)
            assert not await asyncio.to_thread(pub.flush, 1.5)  # refused, so not acknowledged
            assert pub.errors == 0  # ...and not given up on either
            assert await asyncio.to_thread(hub_hello, sock, 5) is not None  # the hub serves on
            # what was acknowledged is exactly what is stored (a small first batch may fit)
            stored = len(service.session("s-full")["turns"]) - 1
            assert stored == pub.acked_commands - 2 == hub.counters["published_commands"] - 2
            assert stored < len(sent)
            info = hub.info()  # what `stats` shows: refusals counted, the last one explained
            assert info["counters"]["refused_batches"] >= 1
            assert info["last_refusal"]["reason"] == "storage_full"
            assert "full" in info["last_refusal"]["message"]

            cap.set(UNCAPPED)  # space freed
            assert await asyncio.to_thread(pub.flush, 20)
            assert pub.errors == 0
            turns = service.session("s-full")["turns"]
            assert [t["content"] for t in turns[1:]] == sent
        finally:
            await asyncio.to_thread(pub.close, 2)
            await hub.close()

    t0 = time.monotonic()
    asyncio.run(main())
    assert time.monotonic() - t0 < 60


def test_cli_import_on_a_full_disk_is_a_clear_error_and_a_rerun_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from memviewer.cli import cli

    fixtures = Path(__file__).parent / "fixtures" / "praisonai"
    home = tmp_path / "home"
    args = ["--home", str(home), "import", "praisonai", "--no-index", "--json", str(fixtures)]
    Store.open(home / "memviewer.db").close()  # an existing, empty store
    real_init = Store.__init__

    def full_disk(self: Store, *a: Any, **k: Any) -> None:
        real_init(self, *a, **k)
        DiskCap(self).fill(spare_pages=0)

    monkeypatch.setattr(Store, "__init__", full_disk)
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 1
    assert "Traceback" not in r.output + r.stderr
    assert "error: the disk (or the database size limit) is full" in r.stderr
    assert "hint: free space on the disk holding" in r.stderr

    monkeypatch.setattr(Store, "__init__", real_init)  # space freed: the same command completes
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 0, r.stderr
    imported = json.loads(r.stdout)["imported"]
    assert len(imported) == len(list(fixtures.glob("*.json")))


def test_a_dead_publishers_spool_is_kept_until_the_disk_has_room(service, short_tmp: Path) -> None:  # noqa: ANN001
    from memviewer.client import Publisher
    from memviewer.wire import spool

    spool_dir = short_tmp / "spool"
    pub = Publisher(short_tmp / "no-hub.sock", spool_dir)
    sid = pub.open_session(agent="gone", session_id="s-gone")
    eid = pub.start_episode(sid, "left behind")
    for i in range(20):
        pub.add_turn(eid, "assistant", f"note {i} " + "lorem ipsum " * 250)
    assert pub.close(timeout=1) is False  # no hub: all 22 commands and the agent's shutdown stay spooled
    files = list(spool_dir.glob("*.ndjson"))
    assert len(files) == 1

    cap = DiskCap(service.store)
    cap.fill()
    with pytest.raises(MemviewerError):
        spool.ingest(spool_dir, service.apply_batch)
    assert list(spool_dir.glob("*.ndjson")) == files  # kept for the next attempt
    with pytest.raises(MemviewerError):
        service.session("s-gone")

    cap.set(UNCAPPED)
    report = spool.ingest(spool_dir, service.apply_batch)
    assert report["commands"] == 23 and report["errors"] == 0
    assert [t["content"].split(" ")[1] for t in service.session("s-gone")["turns"][1:]] == [
        str(i) for i in range(20)
    ]
    assert list(spool_dir.glob("*.ndjson")) == []


def test_a_write_lock_held_past_the_busy_timeout_is_a_retryable_storage_error(
    service, monkeypatch: pytest.MonkeyPatch
) -> None:  # noqa: ANN001
    """Another process holding the write lock too long: the same clear, retryable error as a
    full disk (it was a raw OperationalError from BEGIN IMMEDIATE, and a traceback in the CLI)."""
    import sqlite3

    store = service.store
    event.listen(store.engine, "connect", lambda conn, _rec: conn.execute("PRAGMA busy_timeout = 100"))
    store.engine.dispose()
    other = sqlite3.connect(store.engine.url.database, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # the other writer
        with pytest.raises(MemviewerError) as err:
            service.apply_batch([{"op": "open_session", "session_id": "s-busy", "agent": "a"}])
        assert err.value.code == INTERNAL
        assert err.value.data == {"reason": "storage_error", "retry": True}
        assert "busy" in err.value.message or "locked" in err.value.message
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert "ok" in service.apply_batch([{"op": "open_session", "session_id": "s-busy", "agent": "a"}])[0]
