"""Merging the keyword index's segments (``store.fts.merge_step``): same answers, fewer
b-trees per lookup; the hub does it while idle, at start and when segments pile up."""

from __future__ import annotations

import asyncio
import time

from memviewer.recall.keyword import KeywordSearch
from memviewer.service import MemoryService
from memviewer.store import fts
from memviewer.wire.hub import Hub
from memviewer.wire.hub_jobs import KEYWORD_SEGMENTS_MAX
from memviewer.wire.hub_limits import HubLimits

QUERIES = ["pelican contract", "rollback plan", "数据库迁移", "kiwi", "pelican rollback plan 12"]


def _fragment(service: MemoryService, n: int, start: int = 0) -> None:
    """``n`` sessions, each written in transactions of its own, FTS5's automerge off: every
    commit leaves segments of its own, as an import in batches or a live agent does."""
    with service.store.write() as tx:
        for table in (fts.WORD_TABLE, fts.CJK_TABLE):
            tx.conn.exec_driver_sql(f"INSERT INTO {table}({table}, rank) VALUES ('automerge', 0)")
    for i in range(start, start + n):
        sid = service.open_session(agent="ops", session_id=f"s-{i}")["session_id"]
        ep = service.start_episode(sid, f"what is the rollback plan for release {i}?")["episode_id"]
        service.add_turn(ep, "assistant", f"the pelican contract {i}: roll back with the kiwi script")
        service.add_turn(ep, "user", "数据库迁移什么时候完成" if i % 3 == 0 else f"thanks, plan {i} noted")


def _segments(service: MemoryService) -> dict[str, int]:
    with service.store.read() as conn:
        return {
            t: int(conn.exec_driver_sql(f"SELECT COUNT(DISTINCT segid) FROM {t}_idx").scalar() or 0)
            for t in (fts.WORD_TABLE, fts.CJK_TABLE)
        }


def _answers(service: MemoryService) -> list[dict]:
    ks = KeywordSearch(service.store)
    try:
        return [ks.search(q, limit=5, window=2) for q in QUERIES]
    finally:
        ks.close()


def test_merge_steps_leave_one_segment_per_index_and_the_same_answers(service: MemoryService) -> None:
    _fragment(service, 12)
    assert sum(_segments(service).values()) > 8
    before = _answers(service)
    assert all(a["success"] for a in before) and before[0]["results"]
    n = sum(_segments(service).values())
    assert service.merge_keyword_index(above=n) == (n, n, False)  # not more than ``above``: nothing
    for _ in range(50):
        _, _, worked = service.merge_keyword_index()
        if not worked:
            break
    assert _segments(service) == {fts.WORD_TABLE: 1, fts.CJK_TABLE: 1}
    assert _answers(service) == before


def test_the_hub_merges_at_start_and_again_when_segments_pile_up(service: MemoryService, settings) -> None:  # noqa: ANN001
    _fragment(service, 12)
    assert sum(_segments(service).values()) > 8

    async def main() -> None:
        hub = Hub(
            service,
            settings.socket_path,
            start_indexer=False,
            limits=HubLimits(keyword_upkeep_interval=0.2),
        )
        await hub.start()
        try:
            deadline = time.monotonic() + 20
            while hub.info()["keyword_segments"] != 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert hub.info()["keyword_segments"] == 2  # one per index
            # 12 more sessions, automerge off: 13+ segments per index unless the hub merges them
            # (it may already be at it while they are written)
            await asyncio.to_thread(_fragment, service, 12, 100)
            # merged again (down to one if the pass came after the last write; a pass that ran
            # while they were written leaves what came after it, at most KEYWORD_SEGMENTS_MAX)
            deadline = time.monotonic() + 20
            while sum(_segments(service).values()) > KEYWORD_SEGMENTS_MAX and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert sum(_segments(service).values()) <= KEYWORD_SEGMENTS_MAX
        finally:
            await hub.close()

    asyncio.run(main())
    ks = KeywordSearch(service.store)
    try:
        got = ks.search("pelican contract 105", limit=3)
    finally:
        ks.close()
    assert got["results"][0]["session_id"] == "s-105"


def test_no_merge_on_a_disk_without_room_for_the_rewrite(service: MemoryService, monkeypatch) -> None:  # noqa: ANN001
    """The final merge rewrites the whole index; with less free disk than the store's size the
    index is left as it is, so a publish never finds the disk filled by a merge."""
    import shutil
    from collections import namedtuple

    _fragment(service, 10)
    before = _segments(service)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: usage(10**9, 10**9 - 1000, 1000))
    n = sum(before.values())
    assert service.merge_keyword_index() == (n, n, False)
    assert _segments(service) == before
    monkeypatch.undo()
    assert service.merge_keyword_index()[2]  # with room it merges
