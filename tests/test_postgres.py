"""The SQL layer on PostgreSQL (the scale-out path of docs/architecture.md, "The store").

Runs when ``MEMVIEWER_TEST_PG_URL`` points at a server (``.ci/run`` starts a
throwaway cluster when the PostgreSQL binaries exist); skipped otherwise.
"""

from __future__ import annotations

import os
import uuid

import pytest

PG_URL = os.environ.get("MEMVIEWER_TEST_PG_URL")
pytestmark = pytest.mark.skipif(not PG_URL, reason="MEMVIEWER_TEST_PG_URL not set (no PostgreSQL)")


@pytest.fixture
def pg_store():
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from memviewer.store.db import Store

    name = f"mv_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    store = Store(url)
    try:
        yield store
    finally:
        store.close()
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE "{name}"'))
        admin.dispose()


def test_manager_lifecycle_compaction_and_batches_on_postgres(pg_store):
    from memviewer.errors import MemviewerError
    from memviewer.session.manager import SessionManager
    from memviewer.store import repos
    from memviewer.store.migrations import latest_version

    assert pg_store.schema_version() == latest_version()
    mgr = SessionManager(pg_store, active_window=4)
    mgr.open_session(session_id="s1", agent="bot", meta={"k": [1, "two"]})
    mgr.start_episode("s1", "fix the bug", episode_id="e1")
    for i in range(10):
        mgr.add_turn("e1", "assistant", f"m{i}", metadata={"i": i})
    results = mgr.apply_batch(
        [
            {"op": "add_turn", "episode_id": "nope", "role": "user", "content": "x"},
            {"op": "add_turn", "episode_id": "e1", "role": "user", "content": "y"},
        ]
    )
    assert results[0]["error"]["code"] == "episode_not_found" and "ok" in results[1]
    mgr.finalize_episode("e1")
    with pytest.raises(MemviewerError) as err:
        mgr.add_turn("e1", "user", "late")
    assert err.value.code == "conflict"
    with pg_store.read() as conn:
        turns = repos.session_turns(conn, "s1")
        session = repos.get_session(conn, "s1")
    assert [t["idx"] for t in turns] == list(range(len(turns)))
    assert sum(t["is_compaction_summary"] for t in turns) == 1
    assert turns[0]["archived"] and turns[0]["content"] == "fix the bug"
    assert session["meta"] == {"k": [1, "two"]}
    seqs = [e.seq for e in pg_store.events_since(0)]
    assert seqs == list(range(1, len(seqs) + 1))


def test_keyword_search_falls_back_to_a_scan_on_postgres(pg_store, tmp_path):
    from memviewer.config import load_settings
    from memviewer.index.embedder import HashEmbedder
    from memviewer.service import MemoryService

    svc = MemoryService(
        load_settings(env={}, home=str(tmp_path / "h")), embedder=HashEmbedder(), store_url=pg_store.url
    )
    svc.open_session(session_id="s1", agent="a", active_window=4)
    e = svc.start_episode("s1", "we decided the billing migration goes to Adyen")["episode_id"]
    for i in range(6):
        svc.add_turn(e, "assistant", f"step {i} 部署令牌 XZ99")
    svc.open_session(session_id="s2", agent="cronbot", source="cron")
    svc.start_episode("s2", "billing report")
    hits = svc.search("billing migration")
    assert [h["session_id"] for h in hits["results"]] == ["s1", "s2"]  # cron session demoted
    assert hits["results"][0]["messages"][0]["archived"] is True  # the hit is an archived turn
    assert svc.search("令牌")["total_found"] == 1
    assert [m["index"] for m in svc.search(session_id="s1", around=2, window=1)["messages"]] == [1, 2, 3]
    assert {r["session_id"]: r["message_count"] for r in svc.search()["results"]} == {"s1": 8, "s2": 1}
    svc.close()


def test_recall_log_bounds_and_size_retention_on_postgres(pg_store):
    """The recall log's portable path: cut entries, the byte counter and size retention."""
    import time

    from memviewer.session.manager import SessionManager
    from memviewer.store import recall_log as rows

    mgr = SessionManager(pg_store)
    mgr.recall_log_mb = 0.05  # 52,428 bytes
    page = [{"text": "z" * 480, "score": 0.5}] * 40
    for i in range(8):
        mgr.record_recall(recall_id=f"r-{i}", query="q" * 9000, results=page, ts=time.time() + i)
    mgr.record_recall(recall_id="r-7", query="a replay", results=[])  # a no-op
    with pg_store.read() as conn:
        counts = rows.counters(conn)
        kept, total = conn.exec_driver_sql("SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM recall_log").one()
        newest = rows.record_public(rows.get(conn, "r-7") or {})
    assert counts["bytes"] == total <= 0.05 * 1024 * 1024 and counts["entries"] == kept < 8
    assert counts["evicted_bytes"] == 8 - kept and counts["entries_cut"] == 8
    assert newest["cut"] == {"query_chars": 9000} and len(newest["query"]) == 4096
