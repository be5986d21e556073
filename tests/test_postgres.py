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


def test_keyword_search_uses_the_tsvector_index_on_postgres(pg_store, tmp_path):
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
    assert svc.keyword().mode == "postgres"
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


def test_migrations_run_once_when_three_processes_start_together():
    """``migrate`` holds a transaction-scoped advisory lock on PostgreSQL: three processes
    migrating one fresh database at once apply each version exactly once, none fails (without
    the lock they race on ``CREATE TABLE`` and on the version rows)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from sqlalchemy import create_engine
    from store_backends import fresh_pg_database

    from memviewer.store.migrations import MIGRATIONS

    worker = Path(__file__).with_name("pg_migrate_worker.py")
    with fresh_pg_database() as url:
        procs = [
            subprocess.Popen(
                [sys.executable, str(worker), url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            for _ in range(3)
        ]
        try:
            assert [p.stdout.readline().strip() for p in procs] == ["ready"] * 3  # all connected
            for p in procs:  # the start line, as close together as three writes go
                p.stdin.write("go\n")
                p.stdin.flush()
            outs = [p.communicate(timeout=120)[0].strip() for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        assert [p.returncode for p in procs] == [0, 0, 0], outs
        applied = sorted(v for out in outs for v in json.loads(out))
        assert applied == sorted(m.version for m in MIGRATIONS)  # each once, in one process
        engine = create_engine(url)
        with engine.connect() as conn:
            rows = conn.exec_driver_sql("SELECT version, COUNT(*) FROM schema_migrations GROUP BY version")
            assert {v: n for v, n in rows} == {m.version: 1 for m in MIGRATIONS}
        engine.dispose()


def test_the_tsvector_follows_every_write_and_status_reports_it(pg_store):
    """A generated column: an insert, a content update and a delete change what is found, in
    the write's own transaction."""
    from memviewer.recall.keyword import KeywordSearch, pg_index_status
    from memviewer.session.manager import SessionManager

    mgr = SessionManager(pg_store)
    mgr.open_session(session_id="s1", agent="bot")
    mgr.start_episode("s1", "the pelican contract", episode_id="e1")
    ks = KeywordSearch(pg_store)
    assert ks.search("pelican")["total_found"] == 1
    with pg_store.write() as tx:
        tx.conn.exec_driver_sql("UPDATE turns SET content = 'the heron contract' WHERE session_id = 's1'")
    assert ks.search("pelican")["total_found"] == 0 and ks.search("herons")["total_found"] == 1
    status = pg_index_status(pg_store)
    assert status["ok"] and "tsvector" in status["detail"] and "pg_trgm index" in status["detail"]
    mgr.delete_session("s1")
    assert ks.search("heron")["total_found"] == 0


def test_without_rights_to_create_pg_trgm_cjk_search_still_answers():
    """A role that may not ``CREATE EXTENSION`` migrates all the same (the trigram index is
    left out, in a savepoint); CJK queries run unindexed and ``status`` says so."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from store_backends import fresh_pg_database

    from memviewer.recall.keyword import KeywordSearch, pg_index_status
    from memviewer.session.manager import SessionManager
    from memviewer.store.db import Store

    role = f"mv_plain_{uuid.uuid4().hex[:8]}"
    with fresh_pg_database() as url:
        admin = create_engine(url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE ROLE {role} LOGIN")
            conn.exec_driver_sql(f"GRANT CREATE, USAGE ON SCHEMA public TO {role}")
            conn.exec_driver_sql(f"REVOKE CREATE ON DATABASE {make_url(url).database} FROM PUBLIC")
        store = Store(make_url(url).set(username=role).render_as_string(hide_password=False))
        try:
            mgr = SessionManager(store)
            mgr.open_session(session_id="s1", agent="bot")
            mgr.start_episode("s1", "我们下周讨论数据库迁移计划", episode_id="e1")
            ks = KeywordSearch(store)
            assert ks.mode == "postgres"
            assert [h["session_id"] for h in ks.search("迁移计划")["results"]] == ["s1"]
            status = pg_index_status(store)
            assert status["ok"] and "no pg_trgm" in status["detail"]
        finally:
            store.close()
            store.engine.dispose()
            with admin.connect() as conn:
                conn.exec_driver_sql(f"REASSIGN OWNED BY {role} TO postgres")
                conn.exec_driver_sql(f"DROP OWNED BY {role}")
            admin.dispose()
            drop = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
            with drop.connect() as conn:
                conn.exec_driver_sql(f"DROP ROLE IF EXISTS {role}")
            drop.dispose()
