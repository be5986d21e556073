"""The SQL store: pragmas, migrations, transactions and the gap-free event log."""

from __future__ import annotations

import json
import re
import sqlite3
import threading

import pytest
from sqlalchemy import inspect, text

from memviewer.errors import MemviewerError
from memviewer.session.manager import SessionManager
from memviewer.store import migrations
from memviewer.store.db import Store
from memviewer.store.tables import TABLES


def test_sqlite_runs_in_wal_with_busy_timeout(tmp_path):
    store = Store.open(tmp_path / "m.db")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 10000
    store.close()


def test_migrated_schema_matches_the_sqlmodel_tables(tmp_path):
    store = Store.open(tmp_path / "m.db")
    insp = inspect(store.engine)
    for model in TABLES:
        table = model.__table__
        have = {c["name"] for c in insp.get_columns(table.name)}
        assert have == {c.name for c in table.columns}, table.name
    assert store.schema_version() == migrations.latest_version()
    store.close()


def test_upgrade_from_version_1_keeps_data_and_flags_summaries(tmp_path):
    """A database written by the first release upgrades in place."""
    path = tmp_path / "old.db"
    old = Store.open(path, migrate=False)
    with old.engine.connect() as conn, conn.begin():
        migrations.migrate(conn, target=1)
        conn.execute(
            text(
                "INSERT INTO sessions (id, agent, scope, scope_id, title, started_at, last_seen_at,"
                " status) VALUES ('s1', 'bot', 'agent', 'bot', 'old one', 1.0, 2.0, 'closed')"
            )
        )
        for i, (role, content, meta) in enumerate(
            [
                ("user", "hello", None),
                ("system", "summary of 3", json.dumps({"compaction": True, "compacted_count": 3})),
                ("assistant", "hi", json.dumps({"k": [1, 2]})),
            ]
        ):
            conn.execute(
                text(
                    "INSERT INTO turns (id, session_id, idx, role, content, timestamp, archived, meta)"
                    " VALUES (:id, 's1', :i, :r, :c, 1.5, 0, :m)"
                ),
                {"id": f"t{i}", "i": i, "r": role, "c": content, "m": meta},
            )
    with old.engine.connect() as conn:
        cols = {c["name"] for c in inspect(conn).get_columns("turns")}
    assert "is_compaction_summary" not in cols
    old.close()

    store = Store.open(path)  # runs the pending migrations
    assert store.schema_version() == migrations.latest_version()
    mgr = SessionManager(store)
    with store.read() as conn:
        rows = conn.execute(
            text("SELECT id, is_compaction_summary, replaced_count, meta FROM turns ORDER BY idx")
        ).fetchall()
        session = conn.execute(text("SELECT retention, active_window FROM sessions")).one()
    assert [(r[0], bool(r[1]), r[2]) for r in rows] == [("t0", False, 0), ("t1", True, 3), ("t2", False, 0)]
    assert json.loads(rows[2][3]) == {"k": [1, 2]}
    assert tuple(session) == ("compact", 100)
    assert mgr.open_session(session_id="s1")["title"] == "old one"
    store.close()


def test_migrations_are_recorded_once(tmp_path):
    path = tmp_path / "m.db"
    Store.open(path).close()
    Store.open(path).close()
    with sqlite3.connect(path) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
    assert versions == sorted(set(versions)) == [m.version for m in migrations.MIGRATIONS]


def test_rolled_back_transaction_consumes_no_seq(tmp_path):
    store = Store.open(tmp_path / "m.db")
    mgr = SessionManager(store)
    mgr.open_session(session_id="s1")
    with pytest.raises(RuntimeError), store.write() as tx:
        tx.append_event("session.closed", "s1", None, {})
        raise RuntimeError("boom")
    mgr.open_session(session_id="s2")
    assert [e.seq for e in store.events_since(0)] == [1, 2]
    store.close()


def test_seq_is_gap_free_under_interleaved_writers(tmp_path):
    store = Store.open(tmp_path / "m.db")
    mgr = SessionManager(store)
    delivered = []
    mgr.bus.on_any(lambda e: delivered.append(e.seq))
    errors = []

    def worker(n: int) -> None:
        try:
            sid = f"s{n}"
            mgr.open_session(session_id=sid)
            eid = mgr.start_episode(sid, f"task {n}")["episode_id"]
            for i in range(25):
                mgr.add_turn(eid, "assistant", f"{n}-{i}")
            mgr.apply_batch(
                [
                    {"op": "add_turn", "episode_id": eid, "role": "tool", "content": "x"},
                    {"op": "add_turn", "episode_id": "bad", "role": "tool", "content": "x"},
                ]
            )
            mgr.finalize_episode(eid)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    seqs = [e.seq for e in store.events_since(0, limit=10_000)]
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(seqs) == 6 * (1 + 1 + 1 + 25 + 1 + 1)
    assert delivered == seqs  # the bus saw every committed event once, in order
    store.close()


def test_on_commit_listener_failure_does_not_undo_the_commit(tmp_path):
    store = Store.open(tmp_path / "m.db")
    mgr = SessionManager(store)
    store.on_commit(lambda events: 1 / 0)
    mgr.open_session(session_id="s1")
    assert store.events_since(0)[0].kind == "session.started"
    store.close()


def test_on_commit_returns_the_call_that_removes_the_listener(tmp_path):
    store = Store.open(tmp_path / "m.db")
    mgr = SessionManager(store)
    seen: list[int] = []
    off = store.on_commit(lambda events: seen.extend(e.seq for e in events))
    mgr.open_session(session_id="s1")
    assert seen == [1]
    off()
    off()  # idempotent
    mgr.open_session(session_id="s2")
    assert seen == [1]  # removed: the second commit is not seen
    assert [e.seq for e in store.events_since(0)] == [1, 2]
    store.close()


def test_readonly_store_refuses_writes_but_reads(tmp_path):
    path = tmp_path / "m.db"
    writer = Store.open(path)
    SessionManager(writer).open_session(session_id="s1")
    reader = Store.open(path, readonly=True)
    assert reader.last_seq == 1
    assert [e.kind for e in reader.events_since(0)] == ["session.started"]
    with pytest.raises(MemviewerError), reader.write():
        pass
    reader.close()
    writer.close()


def test_two_writer_processes_share_one_gap_free_log(tmp_path):
    """A CLI import while the hub runs: both stores append to the same log."""
    path = tmp_path / "m.db"
    a = Store.open(path)
    b = Store.open(path)
    ma, mb = SessionManager(a), SessionManager(b)
    ma.open_session(session_id="s1")
    mb.open_session(session_id="s2")  # b's counter started before a wrote
    ma.open_session(session_id="s3")
    assert [(e.seq, e.session_id) for e in a.events_since(0)] == [(1, "s1"), (2, "s2"), (3, "s3")]
    a.close()
    b.close()


def test_a_store_with_a_newer_schema_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "m.db"
    Store.open(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (99, 'future', 0)")
    before = path.read_bytes()
    message = f"this store was written by a newer memviewer (schema 99 > {migrations.latest_version()})"
    with pytest.raises(MemviewerError, match=re.escape(message)) as err:
        Store.open(path)  # read-write: migrate() checks first
    assert err.value.data["reason"] == "schema_newer" and "upgrade memviewer" in err.value.data["hint"]
    ro = Store.open(path, readonly=True)
    with ro.engine.connect() as conn, pytest.raises(MemviewerError, match="newer memviewer"):
        migrations.check_compatible(conn)
    ro.close()
    assert path.read_bytes() == before


def test_another_applications_sqlite_file_is_not_a_store(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE sessions (x)")
    with pytest.raises(migrations.NotAStoreError, match=r"it holds other tables \(sessions\)"):
        Store.open(path)
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()  # an empty database is a new store, not a foreign one
    store = Store.open(empty)
    with store.engine.connect() as conn:
        assert migrations.check_compatible(conn) == migrations.latest_version()
    store.close()


def test_a_store_from_before_the_recall_log_bounds_gets_them_with_its_entries_sized(tmp_path):
    """Migration 8 landed after 9: a store at 1–7 and 9 gets 8 on open, its entries sized."""
    from memviewer.store import recall_log

    path = tmp_path / "old.db"
    old = Store.open(path, migrate=False)
    with old.engine.connect() as conn, conn.begin():
        migrations.migrate(conn, target=7)
        v9 = next(m for m in migrations.MIGRATIONS if m.version == 9)
        v9.apply(conn)
        conn.execute(
            text("INSERT INTO schema_migrations (version, name, applied_at) VALUES (9, 'llm calls', 0)")
        )
        conn.execute(
            text(
                "INSERT INTO recall_log (id, ts, source, kind, query, results) "
                "VALUES ('r-old', 1.0, 'cli', 'search', 'billing', :r)"
            ),
            {"r": json.dumps([{"rank": 1, "text": "we chose Adyen"}])},
        )
    old.close()
    store = Store.open(path)
    try:
        assert store.schema_version() == migrations.latest_version()
        with store.read() as conn:
            counts = recall_log.counters(conn)
            entry = recall_log.record_public(recall_log.get(conn, "r-old") or {})
        assert entry["bytes"] == len("billing") + len(json.dumps([{"rank": 1, "text": "we chose Adyen"}]))
        assert counts["bytes"] == entry["bytes"] and counts["entries"] == 1 and entry["caller"] is None
    finally:
        store.close()
