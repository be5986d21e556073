"""The indexer's memory and files stay bounded however the turns arrive (HashEmbedder, real LanceDB).

* Many small batches: every append, update or merge is a new LanceDB version with its own
  fragment; the indexer compacts after ``OPTIMIZE_AFTER_VERSIONS`` so a table never
  holds more than about that many fragments.
* A re-import that changes a huge session is reconciled ``RECONCILE_PAGE`` turns at a time,
  and every page is brought in step (changed text, moved flags, removed turns).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lancedb
import pytest

from memviewer.index import compaction, reconcile
from memviewer.index.embedder import HashEmbedder
from memviewer.index.lance import INDEX_CACHE_BYTES, METADATA_CACHE_BYTES, TURNS
from memviewer.service import MemoryService

#: A smaller trigger than the shipped one keeps the test fast; the bound is relative to it.
VERSIONS = 20
#: Fragments a table may hold at any time: the compacted ones plus one per version since.
FRAGMENT_BOUND = VERSIONS + 5


def _fragments(home: Path, table: str) -> int:
    tbl = lancedb.connect(str(home / "lance")).open_table(table)
    return int(tbl.stats()["fragment_stats"]["num_fragments"])


def test_many_small_batches_keep_the_fragment_count_bounded(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compaction, "OPTIMIZE_AFTER_VERSIONS", VERSIONS)
    svc = MemoryService(settings.with_overrides(active_window=8), embedder=HashEmbedder())
    try:
        home = settings.home_path
        sid = svc.open_session(agent="a", scope="user", scope_id="u1")["session_id"]
        most = 0
        batches = 2 * VERSIONS  # ~3 versions a batch: several compactions' worth
        for b in range(batches):
            ep = svc.start_episode(sid, f"question {b} about the deploy cache")["episode_id"]
            svc.add_turn(ep, "assistant", f"answer {b} names the cron job {b * 7}")
            svc.sync_index()  # one small pass, as a hub's indexer sees a trickle of turns
            most = max(most, _fragments(home, TURNS))
        total = svc.indexer().status()
        # Without the version trigger this grew by ~2 fragments a batch (append + compaction).
        assert most <= FRAGMENT_BOUND, f"{most} fragments after {batches} small batches"
        assert total["sql_turns"] > 2 * batches  # and the compaction summaries
        assert total["indexed_turns"] == total["sql_turns"] and total["lag"] == 0
        cached = svc.parts.lance.cache_bytes()  # the connection's bounded LanceDB caches
        assert 0 < cached <= INDEX_CACHE_BYTES + METADATA_CACHE_BYTES
        hit = svc.recall(f"cron job {(batches - 1) * 7}", scope="user", scope_id="u1", top_k=3)
        assert any("answer" in r["content"] for r in hit["results"])
    finally:
        svc.close()


def _turns(n: int, changed: dict[int, str] | None = None, prefix: str = "t") -> list[dict[str, Any]]:
    changed = changed or {}
    return [
        {
            "id": f"{prefix}{i:04d}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": changed.get(i, f"turn {i} of the long import"),
            "timestamp": 1.0 + i,
        }
        for i in range(n)
    ]


def _index_rows(svc: Any, sid: str) -> dict[str, dict[str, Any]]:
    rows = svc.parts.lance.rows(TURNS, f"session_id = '{sid}'", ["turn_id", "text", "archived", "scope_id"])
    return {r["turn_id"]: r for r in rows}


def test_a_reimport_of_a_changed_session_is_reconciled_page_by_page(
    service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reconcile, "RECONCILE_PAGE", 7)  # 60 turns: nine pages
    n = 60
    service.import_session({"id": "big", "scope": "user", "scope_id": "u1"}, _turns(n))
    service.sync_index()
    assert len(_index_rows(service, "big")) == n
    changed = {
        0: "the first page mentions zebras",
        30: "a middle page mentions okapis",
        59: "the last quokka",
    }
    turns = _turns(n, changed)
    turns[12] = {**turns[12], "archived": True}
    del turns[45]  # removed from the file: its index row must go
    service.import_session({"id": "big", "scope": "user", "scope_id": "u2"}, turns)
    report = service.sync_index()
    assert report["updated_turns"] >= n - 1  # the scope moved on every turn
    rows = _index_rows(service, "big")
    assert set(rows) == {t["id"] for t in turns}
    for i, text in changed.items():
        assert rows[f"t{i:04d}"]["text"] == text
    assert rows["t0012"]["archived"] is True
    assert {r["scope_id"] for r in rows.values()} == {"u2"}
    top = service.recall("okapis", scope="user", scope_id="u2", top_k=1)["results"]
    assert top and top[0]["turn_id"] == "t0030"
    again = service.sync_index(["big"])  # a forced reconcile of an unchanged session: nothing
    assert again["updated_turns"] == 0


def test_deleting_a_session_larger_than_a_page_drops_all_its_rows(
    service: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reconcile, "RECONCILE_PAGE", 5)
    service.import_session({"id": "gone", "scope": "user", "scope_id": "u1"}, _turns(23))
    service.import_session({"id": "kept", "scope": "user", "scope_id": "u1"}, _turns(3, prefix="k"))
    service.sync_index()
    assert len(_index_rows(service, "gone")) == 23
    service.delete_session("gone")
    service.sync_index()
    assert _index_rows(service, "gone") == {}
    assert len(_index_rows(service, "kept")) == 3


def _rss_anon_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    raise AssertionError("no RssAnon")


def test_free_heap_pages_are_given_back_after_a_burst() -> None:
    import ctypes
    import ctypes.util

    from memviewer.index.heap import release_free_memory

    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    if libc is None or not hasattr(libc, "malloc_trim") or not Path("/proc/self/status").exists():
        pytest.skip("needs glibc and /proc")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    blocks = [libc.malloc(1024) for _ in range(120_000)]  # ~120 MB of small blocks, as a burst
    for b in blocks:
        libc.memset(b, 1, 1024)
    for b in blocks[:-1]:  # the last block pins the top of the heap: nothing shrinks on its own
        libc.free(b)
    before = _rss_anon_kb()
    release_free_memory()
    after = _rss_anon_kb()
    libc.free(blocks[-1])
    assert before - after > 50_000, f"RssAnon {before} -> {after} kB"
