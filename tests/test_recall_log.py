"""The recall log: the record_recall op, retention, the recall.performed event, the route a
read-only front end takes, the CLI (recalls, recalls show --rerun) and the diff."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from cli_runs import invoke_on
from click.testing import CliRunner

from memviewer import recall_log
from memviewer.cli import cli
from memviewer.config import Settings
from memviewer.errors import MemviewerError
from memviewer.recall_log import RecordAs
from memviewer.service import MemoryService


def _seed(svc: MemoryService) -> str:
    sid = svc.open_session(agent="billing-bot", session_id="s-billing")["session_id"]
    ep = svc.start_episode(sid, "what did we decide about the billing migration?")["episode_id"]
    svc.add_turn(ep, "assistant", "We agreed to migrate billing from Stripe to Adyen in June.")
    svc.finalize_episode(ep)
    other = svc.open_session(agent="ops", session_id="s-ops")["session_id"]
    ep2 = svc.start_episode(other, "restart the staging deploy")["episode_id"]
    svc.add_turn(ep2, "assistant", "Staging deploy restarted; billing unaffected.")
    return sid


def _cmd(**over: object) -> dict:
    cmd = {
        "op": "record_recall",
        "recall_id": "r-agent-1",
        "ts": time.time(),
        "query": "billing decision",
        "results": [{"text": "we chose Adyen", "score": 0.9}, {"turn_id": "t-x", "score": 0.5}],
        "source": "agent",
        "session_id": "s-agent",
        "params": {"k": 2},
    }
    cmd.update(over)
    return cmd


def test_record_recall_is_idempotent_and_emits_one_event(service: MemoryService) -> None:
    before = service.last_seq
    results = service.apply_batch([_cmd(), _cmd()])  # a replay from a spool: same recall_id
    assert results == [{"ok": {"recall_id": "r-agent-1"}}, {"ok": {"recall_id": "r-agent-1"}}]
    events = [e for e in service.events(before) if e.kind == "recall.performed"]
    assert len(events) == 1
    assert events[0].session_id == "s-agent"
    assert events[0].payload["source"] == "agent" and events[0].payload["result_count"] == 2
    page = service.recalls()
    assert page["total"] == 1
    entry = service.recall_entry("r-agent-1")
    assert entry["results"][0]["text"] == "we chose Adyen" and entry["results"][0]["rank"] == 1
    assert entry["results"][1]["rank"] == 2 and entry["params"] == {"k": 2}


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"recall_id": ""}, "recall_id"),
        ({"query": 3}, "query must be a string"),
        ({"source": "robot"}, "source must be one of"),
        ({"results": "nope"}, "results must be a list"),
        ({"results": [{"score": 1.0}]}, "needs a turn_id or a text"),
        ({"results": [{"text": "x", "score": "high"}]}, "score must be a finite number"),
        ({"results": [{"text": "x", "rank": 1.5}]}, "rank must be an integer"),
        ({"params": [1]}, "params must be an object"),
        ({"ts": float("nan")}, ""),
        ({"extra": 1}, "unknown fields"),
    ],
)
def test_bad_record_recall_fails_alone(service: MemoryService, over: dict, message: str) -> None:
    bad = _cmd(recall_id="r-bad", **{k: v for k, v in over.items() if k != "recall_id"})
    if "recall_id" in over:
        bad["recall_id"] = over["recall_id"]
    results = service.apply_batch([bad, _cmd(recall_id="r-good")])
    assert results[0]["error"]["code"] == "invalid_argument"
    assert message in results[0]["error"]["message"]
    assert results[1] == {"ok": {"recall_id": "r-good"}}
    assert [r["recall_id"] for r in service.recalls()["recalls"]] == ["r-good"]


def test_retention_by_count_and_age(settings: Settings) -> None:
    from memviewer.index.embedder import HashEmbedder

    svc = MemoryService(settings.with_overrides(recall_log_max=3), embedder=HashEmbedder())
    try:
        now = time.time()
        svc.apply_batch([_cmd(recall_id=f"r-{i}", ts=now + i) for i in range(5)])
        assert [r["recall_id"] for r in svc.recalls()["recalls"]] == ["r-4", "r-3", "r-2"]
        svc.manager.recall_log_days = 1.0
        svc.apply_batch([_cmd(recall_id="r-old", ts=now - 3 * 86400), _cmd(recall_id="r-new", ts=now + 9)])
        ids = [r["recall_id"] for r in svc.recalls()["recalls"]]
        assert "r-old" not in ids and ids[0] == "r-new" and len(ids) == 3
    finally:
        svc.close()


def test_retention_by_count_keeps_exactly_the_newest_with_a_hole_in_the_numbers(settings: Settings) -> None:
    """An agent may report a recall with an old time: it goes by age out of the middle of the
    log, leaving a hole in the insertion numbers. Retention by count still keeps exactly the
    newest ``recall_log_max`` entries (by insertion), not fewer."""
    from memviewer.index.embedder import HashEmbedder

    svc = MemoryService(settings.with_overrides(recall_log_max=4), embedder=HashEmbedder())
    try:
        now = time.time()
        svc.apply_batch([_cmd(recall_id="r-0", ts=now), _cmd(recall_id="r-late", ts=now - 3 * 86400)])
        svc.apply_batch([_cmd(recall_id="r-1", ts=now + 1)])
        svc.manager.recall_log_days = 1.0  # r-late goes by age on the next write: a hole
        svc.apply_batch([_cmd(recall_id="r-2", ts=now + 2)])
        assert [r["recall_id"] for r in svc.recalls()["recalls"]] == ["r-2", "r-1", "r-0"]
        svc.apply_batch([_cmd(recall_id="r-3", ts=now + 3)])  # four entries, four numbers over five
        assert [r["recall_id"] for r in svc.recalls()["recalls"]] == ["r-3", "r-2", "r-1", "r-0"]
        svc.apply_batch([_cmd(recall_id="r-4", ts=now + 4)])
        assert [r["recall_id"] for r in svc.recalls()["recalls"]] == ["r-4", "r-3", "r-2", "r-1"]
    finally:
        svc.close()


def test_the_sqlite_entry_writer_stores_what_the_portable_statements_store(service: MemoryService) -> None:
    """``store.recall_log.write_entry`` writes plain statements on SQLite: the row and the
    event must hold the same text as the SQLAlchemy statements (the portable path) write."""
    import sqlite3

    from memviewer.store import recall_log as rows

    def values(rid: str) -> dict:
        return {
            "id": rid,
            "ts": 1_700_000_000.25,
            "source": "hub",
            "kind": "search",
            "session_id": None,
            "episode_id": "ep-1",
            "query": "billing “migration” 数据库",
            "params": None,
            "results": [{"rank": 1, "text": "we chose Adyen\n", "score": 0.5, "index": None}],
            "diagnostics": {"mode": "discovery", "total_found": 3},
        }

    payload = {"recall_id": "x", "query": "billing “migration”", "top": [{"score": 1.5}], "n": None}
    with service.store.write() as tx:
        rows.insert_record(tx.conn, values("r-portable"))
        tx.append_event("recall.performed", None, "ep-1", payload, ts=1_700_000_000.25)

        def raw() -> bool:
            return rows.write_entry(
                tx,
                values("r-raw"),
                max_rows=100,
                max_age_s=None,
                now=time.time(),
                event_kind="recall.performed",
                event_payload=payload,
            )

        assert raw()
        assert not raw()  # a replay of the same id writes nothing
    db = sqlite3.connect(service.home / "memviewer.db")
    try:
        logged = db.execute(
            "SELECT ts, source, kind, session_id, episode_id, query, params, results, diagnostics "
            "FROM recall_log WHERE id IN ('r-portable', 'r-raw') ORDER BY num"
        ).fetchall()
        events = db.execute(
            "SELECT kind, ts, session_id, episode_id, payload FROM events "
            "WHERE kind = 'recall.performed' ORDER BY seq DESC LIMIT 3"
        ).fetchall()
    finally:
        db.close()
    assert len(logged) == 2 and logged[0] == logged[1]
    assert len(events) == 2 and events[0] == events[1]  # the replay appended no event
    assert service.recall_entry("r-raw")["results"] == values("r-raw")["results"]


def test_an_entry_is_kept_within_its_bounds_and_says_what_was_cut(service: MemoryService) -> None:
    huge = [{"text": "x" * 50_000, "score": 1.0 - i / 1000, "title": "t" * 900} for i in range(200)]
    service.apply_batch(
        [_cmd(recall_id="r-huge", query="q" * 1_000_000, results=huge, diagnostics={"d": "y" * 9000})]
    )
    entry = service.recall_entry("r-huge")
    assert len(entry["query"]) == recall_log.QUERY_CHARS and entry["query"].endswith("…")
    cut = entry["cut"]
    assert cut["query_chars"] == 1_000_000 and cut["result_strings"] > 0 and cut["results_dropped"] > 0
    assert 0 < entry["result_count"] < 200  # the first (best) results stay
    assert all(len(r["text"]) <= recall_log.TEXT_CHARS for r in entry["results"])
    assert 0 < entry["bytes"] <= recall_log.MAX_ENTRY_BYTES
    service.apply_batch([_cmd(recall_id="r-small")])
    small = service.recall_entry("r-small")
    assert small["cut"] is None and small["results"] == [
        {"text": "we chose Adyen", "score": 0.9, "rank": 1},
        {"turn_id": "t-x", "score": 0.5, "rank": 2},
    ]


def test_retention_by_size_drops_the_oldest_and_counts_it(settings: Settings) -> None:
    from memviewer.index.embedder import HashEmbedder
    from memviewer.store import recall_log as rows

    svc = MemoryService(settings.with_overrides(recall_log_mb=0.1), embedder=HashEmbedder())  # 104,857 bytes
    try:
        now = time.time()
        page = [{"text": "z" * 480, "score": 0.5}] * 40  # about 20 KB an entry
        for i in range(12):
            svc.apply_batch([_cmd(recall_id=f"r-{i}", ts=now + i, results=page)])
        with svc.store.read() as conn:
            counts = rows.counters(conn)
            kept = conn.exec_driver_sql("SELECT COALESCE(SUM(bytes), 0), COUNT(*) FROM recall_log").one()
        assert counts["bytes"] == kept[0] <= 0.1 * 1024 * 1024  # the running total is the table's
        assert counts["entries"] == kept[1] and 3 <= kept[1] < 12
        assert counts["evicted_bytes"] == 12 - kept[1] and counts["evicted_count"] == 0
        page = svc.recalls(limit=50)
        ids = [r["recall_id"] for r in page["recalls"]]
        assert ids == [f"r-{i}" for i in range(11, 11 - len(ids), -1)]  # the newest stay
        assert (
            page["log"]["max_bytes"] == int(0.1 * 1024 * 1024)
            and page["log"]["evicted_bytes"] == 12 - kept[1]
        )
        shown = CliRunner().invoke(cli, ["--home", str(settings.home_path), "recalls"])
        assert f"removed: 0 over the count, 0 by age, {12 - kept[1]} over the size" in shown.stderr
    finally:
        svc.close()


def test_logging_off_records_nothing(settings: Settings) -> None:
    from memviewer.index.embedder import HashEmbedder

    svc = MemoryService(settings.with_overrides(recall_log_max=0), embedder=HashEmbedder())
    try:
        _seed(svc)
        svc.search("billing", record=RecordAs("cli"))
        assert svc.apply_batch([_cmd()]) == [{"ok": {"recall_id": "r-agent-1", "recorded": False}}]
        assert svc.recalls()["total"] == 0
    finally:
        svc.close()


def test_search_and_recall_are_recorded_with_their_source(service: MemoryService) -> None:
    _seed(service)
    service.sync_index()
    out = service.search("billing migration", record=RecordAs("tui", session_id="s-caller"))
    assert out["success"]
    rec = service.recall("billing migration", top_k=2, record=RecordAs("cli"))
    page = service.recalls()
    assert [(r["source"], r["kind"]) for r in page["recalls"]] == [("cli", "recall"), ("tui", "search")]
    assert service.recalls(session_id="s-caller")["total"] == 1
    assert service.recalls(source="cli")["recalls"][0]["params"]["top_k"] == 2
    logged = service.recall_entry(page["recalls"][0]["recall_id"])
    assert [r["turn_id"] for r in logged["results"]] == [r["turn_id"] for r in rec["results"]]
    assert logged["diagnostics"]["mode"] == "hierarchical"
    search = service.recall_entry(page["recalls"][1]["recall_id"])
    assert search["results"][0]["session_id"] == out["results"][0]["session_id"]
    assert search["results"][0]["index"] == out["results"][0]["anchor_index"]
    service.search("billing")  # no RecordAs: a caller that is not a front end (the evaluators)
    assert service.recalls()["total"] == 2


def test_a_read_only_service_without_a_hub_writes_the_entry_itself(
    service: MemoryService, settings: Settings
) -> None:
    _seed(service)
    ro = MemoryService(settings, readonly=True)
    try:
        assert ro.search("billing", record=RecordAs("mcp")).get("success")
        assert [r["source"] for r in ro.recalls()["recalls"]] == ["mcp"]
        assert [e.kind for e in service.events(0)][-1] == "recall.performed"  # gap-free, in the one log
        seqs = [e.seq for e in service.events(0)]
        assert seqs == list(range(1, len(seqs) + 1))
    finally:
        ro.close()


def test_unknown_recall_is_not_found(service: MemoryService) -> None:
    with pytest.raises(MemviewerError) as err:
        service.recall_entry("r-nope")
    assert err.value.code == "not_found" and "memviewer recalls" in err.value.data["hint"]


def test_diff_names_new_dropped_and_moved() -> None:
    before = [{"turn_id": "a"}, {"turn_id": "b"}, {"text": "Some  Text"}]
    after = [{"turn_id": "b"}, {"turn_id": "c"}, {"text": "some text"}]
    d = recall_log.diff(before, after)
    assert [x["key"] for x in d["new"]] == ["turn:c"]
    assert [x["key"] for x in d["dropped"]] == ["turn:a"]
    assert [(x["key"], x["from"], x["to"]) for x in d["moved"]] == [("turn:b", 2, 1)]
    assert [x["key"] for x in d["same"]] == ["text:some text"] and d["changed"]
    assert recall_log.diff(before, before)["changed"] is False


def test_record_as_refuses_an_unknown_source() -> None:
    with pytest.raises(MemviewerError):
        RecordAs("robot")
    assert RecordAs.from_param(None) == RecordAs("hub")
    assert RecordAs.from_param(False) is None
    assert RecordAs.from_param({"source": "mcp", "session_id": "s"}) == RecordAs("mcp", "s")
    with pytest.raises(MemviewerError):
        RecordAs.from_param({"source": "mcp", "who": "x"})


# -- the CLI --------------------------------------------------------------------------------
def _run(settings: Settings, *args: str) -> tuple[int, str]:
    result = invoke_on(settings, *args)
    return result.exit_code, result.stdout if "--json" in args else result.output


def test_cli_search_is_logged_and_listed(service: MemoryService, settings: Settings) -> None:
    _seed(service)
    service.close()
    code, _ = _run(settings, "search", "billing", "--json")
    assert code == 0
    code, out = _run(settings, "recalls", "--json")
    assert code == 0
    page = json.loads(out)
    assert page["total"] == 1 and page["recalls"][0]["source"] == "cli"
    assert page["recalls"][0]["kind"] == "search" and page["recalls"][0]["query"] == "billing"
    assert "results" not in page["recalls"][0]  # the list is light; show has the results
    code, out = _run(settings, "recalls", "--source", "mcp", "--json")
    assert json.loads(out)["total"] == 0


def test_cli_show_rerun_reports_what_changed(service: MemoryService, settings: Settings) -> None:
    _seed(service)
    # What an agent got yesterday: the billing session second, and a session since deleted.
    service.apply_batch(
        [
            _cmd(
                recall_id="r-then",
                kind="search",
                query="billing",
                params={"limit": 5, "window": 1, "k": 3},
                results=[
                    {"session_id": "s-gone", "index": 0, "text": "gone"},
                    {"session_id": "s-billing", "index": 0, "text": "billing"},
                ],
            )
        ]
    )
    service.close()
    code, out = _run(settings, "recalls", "show", "r-then", "--rerun", "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["recall"]["recall_id"] == "r-then"
    rerun = data["rerun"]
    assert rerun["ignored_params"] == ["k"] and rerun["params"]["window"] == 1
    diff = rerun["diff"]
    assert [d["key"] for d in diff["dropped"]] == ["at:s-gone#0"]
    assert diff["changed"] is True
    now_keys = [recall_log.result_key(r) for r in rerun["results"]]
    assert "at:s-billing#0" in now_keys
    code, out = _run(settings, "recalls", "show", "r-then", "--rerun")
    assert code == 0 and "dropped: #1" in out and "not memviewer parameters" in out


def test_cli_show_unknown_id(settings: Settings, tmp_path: Path) -> None:
    code, out = _run(settings, "recalls", "show", "r-missing", "--json")
    assert code == 1
    assert json.loads(out)["code"] == "not_found"
    code, out = _run(settings, "recalls", "show", "r-missing")
    assert code == 1 and "unknown recall" in out


def test_a_relative_as_of_is_logged_as_the_instant_it_meant(service: MemoryService) -> None:
    """`recalls show --rerun` of a recall asked "as of 6 days ago" must ask about the same
    moment days later: the log keeps the instant, and the caller's words beside it."""
    _seed(service)
    service.sync_index()
    asked = time.time()
    service.recall("billing migration", as_of="6 days ago", record=RecordAs("cli"))
    entry = service.recall_entry(service.recalls()["recalls"][0]["recall_id"])
    assert isinstance(entry["params"]["as_of"], float)
    assert abs(entry["params"]["as_of"] - (asked - 6 * 86400)) < 60
    assert entry["diagnostics"]["as_of_text"] == "6 days ago"
    service.recall("billing migration", as_of=1_700_000_000.0, record=RecordAs("cli"))
    latest = service.recall_entry(service.recalls()["recalls"][0]["recall_id"])
    assert latest["params"]["as_of"] == 1_700_000_000.0 and "as_of_text" not in latest["diagnostics"]
