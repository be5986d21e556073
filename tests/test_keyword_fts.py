"""The FTS5 index: migration 3 with backfill, triggers in the write transaction, fallback."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

import memviewer.store.fts as fts
from memviewer.recall.keyword import KeywordSearch, fts_status
from memviewer.session.manager import SessionManager
from memviewer.store import migrations, repos
from memviewer.store.db import Store

T0 = 1_781_000_000.0


def _v2_database(path: Path) -> None:
    """A database as release v2 left it: schema v2 with sessions and turns, no index."""
    store = Store.open(path, migrate=False)
    with store.engine.connect() as conn, conn.begin():
        assert migrations.migrate(conn, target=2) == [1, 2]
        repos.insert_session(
            conn,
            {
                "id": "old",
                "agent": "a",
                "scope": "agent",
                "scope_id": "a",
                "title": "old one",
                "started_at": T0,
                "last_seen_at": T0,
                "status": "closed",
                "retention": "compact",
                "active_window": 100,
                "meta": None,
            },
        )
        repos.insert_turns(
            conn,
            [
                {
                    "id": f"old-{i}",
                    "session_id": "old",
                    "episode_id": None,
                    "idx": i,
                    "role": "user",
                    "content": c,
                    "timestamp": T0 + i,
                    "archived": i == 0,
                    "is_compaction_summary": False,
                    "replaced_count": 0,
                    "tool_calls": None,
                    "tool_call_id": None,
                    "meta": None,
                }
                for i, c in enumerate(["the pelican contract was archived", "数据库迁移完成", "plain"])
            ],
        )
    store.close()


def test_migration_backfills_existing_turns(tmp_path: Path) -> None:
    db = tmp_path / "v2.db"
    _v2_database(db)
    store = Store.open(db)  # migrates 2 -> latest, through 3
    try:
        with store.read() as conn:
            applied = [r[0] for r in conn.exec_driver_sql("SELECT version FROM schema_migrations")]
        assert 3 in applied and store.schema_version() == migrations.latest_version()
        with store.read() as conn:
            assert fts.installed(conn) == {"word": True, "cjk": True}
            assert fts.counts(conn) == {"turns": 3, "word": 3, "cjk": 1}
        ks = KeywordSearch(store)
        hit = ks.search("pelican contract")["results"][0]
        assert hit["session_id"] == "old" and hit["messages"][0]["archived"] is True
        assert ks.search("迁移")["results"][0]["anchor_index"] == 1
    finally:
        store.close()


def test_index_follows_every_write_in_the_same_transaction(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "t.db")
    mgr = SessionManager(store, active_window=4)
    ks = KeywordSearch(store)
    try:
        mgr.open_session(session_id="s", ts=T0)
        ep = mgr.start_episode("s", "the albatross budget is due", ts=T0)["episode_id"]
        for i in range(9):  # crosses the window twice: compaction archives and rewrites the summary
            mgr.add_turn(ep, "assistant", f"step {i} of the 测试计划", ts=T0 + i + 1)
        with store.read() as conn:
            n = fts.counts(conn)
        assert n["word"] == n["turns"] == 11 and n["cjk"] == 9
        hit = ks.search("albatross budget")["results"][0]
        anchor = next(m for m in hit["messages"] if m["index"] == hit["anchor_index"])
        assert anchor["archived"] is True and anchor["role"] == "user"

        # a rolled-back write leaves no index rows behind
        with pytest.raises(RuntimeError), store.write() as tx:
            repos.update_turn(tx.conn, _turn_id(store, 0), content="puffin")
            raise RuntimeError("abort")
        assert ks.search("puffin")["total_found"] == 0

        with store.write() as tx:  # content update: old words gone, new ones found
            repos.update_turn(tx.conn, _turn_id(store, 0), content="the puffin budget is due")
        # only the compaction summary (which quotes the old text) still says albatross
        left = ks.search("albatross")["results"][0]
        summary = next(m for m in left["messages"] if m["index"] == left["anchor_index"])
        assert summary["role"] == "system" and left["anchor_index"] != 0
        assert ks.search("puffin")["results"][0]["anchor_index"] == 0
        with store.write() as tx:
            tx.conn.execute(text("DELETE FROM turns WHERE session_id = 's'"))
        assert ks.search("puffin")["total_found"] == 0 and ks.search("测试计划")["total_found"] == 0
        with store.read() as conn:
            assert fts.counts(conn) == {"turns": 0, "word": 0, "cjk": 0}
            integrity = f"INSERT INTO {fts.WORD_TABLE}({fts.WORD_TABLE}, rank) VALUES ('integrity-check', 0)"
        with store.write() as tx:
            tx.conn.exec_driver_sql(integrity)
    finally:
        store.close()


def _turn_id(store: Store, idx: int) -> str:
    with store.read() as conn:
        return conn.execute(text("SELECT id FROM turns WHERE idx = :i"), {"i": idx}).scalar()


def _corpus(mgr: SessionManager) -> None:
    topics = ["invoice export", "refund window", "webhook retries", "ledger close", "tax report"]
    for s in range(12):
        turns = [
            {
                "id": f"c{s}-{i}",
                "role": ("user", "assistant")[i % 2],
                "timestamp": T0 + s * 1000 + i * 60,
                "content": f"about the {topics[(s + i) % 5]} for account {s}, step {i}",
                "archived": i < 2,
            }
            for i in range(6)
        ]
        if s == 7:
            turns[1]["content"] = "the marmalade rollback plan lives in runbook 42"
        mgr.import_session({"id": f"c{s}", "title": f"c{s}", "started_at": T0 + s * 1000}, turns)


def test_forced_fallback_finds_the_same_top_hit(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "c.db")
    try:
        _corpus(SessionManager(store))
        with_fts, scan = KeywordSearch(store), KeywordSearch(store, use_fts=False)
        assert with_fts.mode == "fts5" and scan.mode == "scan"
        for q in ("marmalade rollback plan", '"rollback plan"', "runbook 42 marmalade"):
            a, b = with_fts.search(q), scan.search(q)
            assert a["results"][0]["session_id"] == b["results"][0]["session_id"] == "c7"
            assert a["results"][0]["anchor_index"] == b["results"][0]["anchor_index"] == 1
            assert a["results"][0]["messages"] == b["results"][0]["messages"]
        assert scan.search("account 3")["results"]  # generic words still work on the scan
    finally:
        store.close()


def test_env_flag_skips_the_index_and_ensure_installs_it_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(fts.FORCE_ENV, "1")
    store = Store.open(tmp_path / "f.db")
    try:
        _corpus(SessionManager(store))
        with store.read() as conn:
            assert fts.installed(conn) == {"word": False, "cjk": False}
        ks = KeywordSearch(store)
        assert ks.mode == "scan"
        assert ks.search("marmalade")["results"][0]["session_id"] == "c7"
        monkeypatch.delenv(fts.FORCE_ENV)
        ks = KeywordSearch(store)
        assert ks.mode == "fts5"  # installed and backfilled on first use of a writable store
        with store.read() as conn:
            assert fts.counts(conn)["word"] == 72
        assert ks.search("marmalade")["results"][0]["session_id"] == "c7"
    finally:
        store.close()


def test_read_only_store_without_index_scans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fts.FORCE_ENV, "1")
    store = Store.open(tmp_path / "r.db")
    _corpus(SessionManager(store))
    store.close()
    monkeypatch.delenv(fts.FORCE_ENV)
    ro = Store.open(tmp_path / "r.db", readonly=True)
    try:
        ks = KeywordSearch(ro)
        assert ks.mode == "scan" and ks.search("marmalade")["results"][0]["session_id"] == "c7"
    finally:
        ro.close()


def test_fts_status_for_doctor(tmp_path: Path, settings) -> None:
    assert fts_status(settings)["ok"] is True  # no store yet
    home = settings.home_path
    home.mkdir(parents=True)
    store = Store.open(home / "memviewer.db")
    _corpus(SessionManager(store))
    status = fts_status(settings)
    assert status["ok"] is True and "72/72 turns indexed" in status["detail"]
    with store.write() as tx:  # simulate a foreign writer that bypassed the triggers
        tx.conn.exec_driver_sql(f"INSERT INTO {fts.WORD_TABLE}({fts.WORD_TABLE}) VALUES ('delete-all')")
    status = fts_status(settings)
    assert status["ok"] is False and "reindex" in status["detail"]
    assert fts.reindex(store) == {"turns": 72, "word": 72, "cjk": 0}
    assert fts_status(settings)["ok"] is True
    store.close()


def _fts_triggers(store: Store) -> set[str]:
    with store.read() as conn:
        return {
            r[0]
            for r in conn.exec_driver_sql(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'turns_fts%'"
            )
        }


def test_build_without_fts5_detaches_triggers_and_a_later_build_reattaches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "t.db"
    store = Store.open(db)
    mgr = SessionManager(store)
    mgr.open_session(session_id="s", ts=T0)
    ep = mgr.start_episode("s", "the heron survey starts monday", ts=T0)["episode_id"]
    store.close()
    every = _fts_triggers(Store.open(db, readonly=True))
    assert every == set(fts._TRIGGERS) | set(fts._CJK_TRIGGERS)

    # A SQLite build without FTS5 opens the database: the triggers would make every insert
    # fail with "no such module: fts5", so they are detached and search scans.
    monkeypatch.setattr(fts, "sqlite_support", lambda: {"version": "test", "fts5": False, "trigram": False})
    store = Store.open(db)
    assert _fts_triggers(store) == set()
    mgr = SessionManager(store)
    mgr.add_turn(ep, "assistant", "the egret census moved to friday", ts=T0 + 1)
    ks = KeywordSearch(store)
    assert ks.mode == "scan"
    assert ks.search("egret census")["total_found"] == 1
    store.close()

    # A build with FTS5 opens it again: triggers back, every turn re-indexed.
    monkeypatch.undo()
    store = Store.open(db)
    try:
        assert _fts_triggers(store) == every
        with store.read() as conn:
            n = fts.counts(conn)
        assert n["word"] == n["turns"] == 2
        ks = KeywordSearch(store)
        assert ks.mode == "fts5"
        assert ks.search("egret census")["total_found"] == 1
        mgr = SessionManager(store)
        mgr.add_turn(ep, "user", "and the ibis count?", ts=T0 + 2)
        assert ks.search("ibis")["total_found"] == 1
    finally:
        store.close()
