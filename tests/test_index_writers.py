"""One vector-index writer at a time, across processes (audit §2), and a safe reindex (§6).

Two services on one home stand in for two processes: each has its own LanceIndex and
so its own flock descriptor, and flock locks conflict between descriptors.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memviewer.errors import MemviewerError, ModelLoadError, ModelNotFoundError
from memviewer.index import owner_wait, runner
from memviewer.index.embedder import HashEmbedder
from memviewer.index.indexer import index_status
from memviewer.index.lance import STAGING_DIR, SUMMARIES, TURNS, WRITE_LOCK
from memviewer.service import MemoryService


def add_session(svc: Any, sid: str, n: int) -> None:
    svc.open_session(session_id=sid, agent="a", scope="user", scope_id="u1")
    ep = svc.start_episode(sid, f"{sid} question zero")
    for i in range(1, n):
        svc.add_turn(ep["episode_id"], "assistant", f"{sid} answer {i}")


def turn_ids(svc: Any) -> list[str]:
    return [r["turn_id"] for r in svc.parts.lance.rows(TURNS, None, ["turn_id"])]


@pytest.fixture
def two(settings: Any) -> Any:
    a = MemoryService(settings, embedder=HashEmbedder())
    b = MemoryService(settings, embedder=HashEmbedder())
    yield a, b
    a.close()
    b.close()


def test_a_second_writer_waits_for_the_lock_and_embeds_nothing_twice(two: Any) -> None:
    a, b = two
    add_session(a, "s1", 5)
    b.sync_index()  # b has done a pass: its "tail checked once" flag is set
    add_session(a, "s2", 7)
    done: dict[str, Any] = {}
    with a.parts.lance.write_lock():
        thread = threading.Thread(target=lambda: done.update(b.sync_index()))
        thread.start()
        time.sleep(0.3)
        assert thread.is_alive() and not done  # b waits while a holds the lock
        a.sync_index()  # a writes s2 (the lock is re-entrant for its holder)
    thread.join(10)
    assert done["added_turns"] == 0  # b re-read the watermark under the lock
    ids = turn_ids(a)
    assert len(ids) == len(set(ids)) == 12


def test_rows_left_by_a_pass_that_died_in_another_process_are_dropped(two: Any) -> None:
    a, b = two
    add_session(a, "s1", 3)
    b.sync_index()
    add_session(a, "s2", 3)
    a.sync_index()
    index = a.parts.lance
    state = index.load_state()
    # a died after appending s2's rows but before saving the watermark past them
    index.save_state({**state, "turn_num": state["turn_num"] - 3, "appending": True})
    assert b.sync_index()["added_turns"] == 3
    ids = turn_ids(b)
    assert len(ids) == len(set(ids)) == 6


def test_a_writer_in_another_process_blocks_this_one(settings: Any) -> None:
    with MemoryService(settings, embedder=HashEmbedder()) as svc:
        add_session(svc, "s1", 3)
        folder = svc.parts.lance.folder
        folder.mkdir(parents=True, exist_ok=True)
        code = (
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(folder / WRITE_LOCK)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(0.8)\n"
        )
        holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
            started = time.monotonic()
            assert svc.sync_index()["added_turns"] == 3
            assert time.monotonic() - started > 0.4  # it waited for the other process
        finally:
            holder.wait(10)


def test_sync_leaves_the_writing_to_a_background_indexer(two: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "POLL_S", 0.05)
    hub, cli = two
    hub.indexer().start_background()
    try:
        assert hub.indexer().wait_idle(10)
        add_session(cli, "imp", 6)  # committed by "another process": the hub's bus never sees it

        def must_not_write(*_a: Any, **_k: Any) -> Any:
            raise AssertionError("the CLI process wrote the index")

        monkeypatch.setattr(cli.indexer(), "_guarded_catch_up", must_not_write)
        report = cli.sync_index(["imp"])
        assert "background indexer" in report["indexed_by"]
        ids = turn_ids(cli)
        assert len(ids) == len(set(ids)) == 6
        assert cli.parts.lance.count(SUMMARIES) == 1  # the summary is written too
    finally:
        hub.indexer().close()
    assert cli.parts.lance.owner() is None  # closing releases the claim


def test_when_the_owner_goes_away_the_waiting_process_writes_itself(two: Any) -> None:
    a, b = two
    add_session(b, "s1", 4)
    owner = a.parts.lance
    assert owner.claim_owner()  # an indexer that claims the index but never writes
    timer = threading.Timer(0.3, owner.release_owner)
    timer.start()
    assert b.sync_index()["added_turns"] == 4
    timer.join()


def test_a_failing_owner_is_reported_not_waited_for_forever(
    two: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(owner_wait, "OWNER_ERROR_GRACE_S", 0.2)
    a, b = two
    add_session(b, "s1", 2)
    owner = a.parts.lance
    assert owner.claim_owner()
    owner.set_owner_note({"pid": 1234, "error": "ModelNotFoundError: no model"})
    try:
        with pytest.raises(MemviewerError, match="pid 1234.*no model"):
            b.sync_index()
    finally:
        owner.release_owner()


def test_doctor_reports_duplicated_rows(service: Any) -> None:
    add_session(service, "s1", 4)
    service.sync_index()
    assert index_status(service.settings)["ok"]
    index = service.parts.lance
    rows = index.rows(
        TURNS,
        None,
        [
            "turn_id",
            "num",
            "session_id",
            "episode_id",
            "scope",
            "scope_id",
            "role",
            "archived",
            "is_summary",
            "timestamp",
            "text",
            "text_hash",
            "vector",
        ],
    )
    index.add_turns(rows[:2])  # what two unlocked writers used to do
    status = index_status(service.settings)
    assert not status["ok"]
    assert "2 duplicated turn rows" in status["detail"] and "memviewer reindex" in status["detail"]
    service.indexer().rebuild()
    assert index_status(service.settings)["ok"]


class BrokenEmbedder(HashEmbedder):
    def __init__(self, fail_after: int) -> None:
        super().__init__()
        self.calls = 0
        self.fail_after = fail_after

    def embed(self, texts: Any) -> Any:
        self.calls += 1
        if self.calls > self.fail_after:
            raise KeyboardInterrupt if self.fail_after else RuntimeError("EOF while parsing")
        return super().embed(texts)


def _snapshot(svc: Any) -> tuple[int, int, dict[str, Any]]:
    index = svc.parts.lance
    return index.count(TURNS), index.count(SUMMARIES), index.load_state()


def test_reindex_keeps_the_index_when_the_model_cannot_embed(settings: Any) -> None:
    with MemoryService(settings, embedder=HashEmbedder()) as svc:
        add_session(svc, "s1", 5)
        svc.sync_index()
        before = _snapshot(svc)
    with MemoryService(settings, embedder=BrokenEmbedder(fail_after=0)) as svc:
        with pytest.raises(ModelLoadError, match="cannot embed a probe text.*EOF while parsing"):
            svc.indexer().rebuild()
        assert _snapshot(svc) == before


def test_an_interrupted_reindex_leaves_the_old_index(settings: Any) -> None:
    with MemoryService(settings, embedder=HashEmbedder()) as svc:
        for i in range(3):
            add_session(svc, f"s{i}", 4)
        svc.sync_index()
        before = _snapshot(svc)
    with MemoryService(settings, embedder=BrokenEmbedder(fail_after=2)) as svc:  # probe + 1 batch
        with pytest.raises(KeyboardInterrupt):
            svc.indexer().rebuild()
        assert _snapshot(svc) == before
        assert not (svc.parts.lance.folder / STAGING_DIR).exists()
        assert svc.sync_index()["added_turns"] == 0  # the old index is still in use


def test_reindex_checks_embed_batch_before_touching_the_index(settings: Any) -> None:
    with MemoryService(settings, embedder=HashEmbedder()) as svc:
        add_session(svc, "s1", 2)
        svc.sync_index()
        before = _snapshot(svc)
        svc.indexer().settings = type("S", (), {"embed_batch": 0})()
        with pytest.raises(ModelNotFoundError, match="embed_batch must be >= 1"):
            svc.indexer().rebuild()
        assert _snapshot(svc) == before


def test_reindex_replaces_the_tables_and_the_state(service: Any) -> None:
    add_session(service, "s1", 3)
    service.sync_index()
    report = service.indexer().rebuild()
    assert report["added_turns"] == 3
    folder: Path = service.parts.lance.folder
    assert not (folder / STAGING_DIR).exists() and not (folder / ".old").exists()
    status = service.indexer().status()
    assert status["indexed_turns"] == status["sql_turns"] == 3 and status["lag"] == 0
    add_session(service, "s2", 2)  # the swapped-in tables take new rows
    assert service.sync_index()["added_turns"] == 2


def test_doctor_loads_the_model_so_a_corrupt_folder_fails(settings: Any, tmp_path: Path) -> None:
    from memviewer import doctor

    folder = tmp_path / "badmodel"
    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"\x08\x07")
    (folder / "tokenizer.json").write_text('{"version": ', encoding="utf-8")
    check = doctor._model(settings.with_overrides(model_dir=str(folder)))
    assert check["ok"] is False and "tokenizer.json" in check["detail"]


def test_an_indexer_whose_claim_raced_a_probe_claims_the_index_on_its_idle_tick(
    two: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the retry, a doctor run at the hub's start left the hub never owning its index,
    and CLI imports embedded beside it instead of leaving that to the hub."""
    monkeypatch.setattr(runner, "IDLE_TICK_S", 0.1)
    monkeypatch.setattr(runner, "POLL_S", 0.05)
    a, b = two
    probe = b.parts.lance
    assert probe.claim_owner()  # held at the moment a's indexer starts
    indexer = a.indexer()
    indexer.start_background()
    try:
        assert not indexer.index.owns()
        probe.release_owner()
        deadline = time.monotonic() + 10
        while not indexer.index.owns() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert indexer.index.owns()
        assert probe.owner() is not None  # b now sees a serving the index
    finally:
        indexer.close()
