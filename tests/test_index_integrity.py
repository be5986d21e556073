"""The vector index knows what it should hold, heals when behind, says so when ahead.

In-process with the hash embedder (fast) on a real LanceDB folder, damaged the way the
audit did it: the newest manifest of the turns table deleted (a roll-back), summaries of
some sessions gone, the ``_indices`` folder deleted, and an index ahead of its store.
The real-process counterparts (hub, CLI, real model) are in
``test_index_integrity_cli.py``.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import jsonschema
import pytest

from memviewer import paths
from memviewer.config import Settings, load_settings
from memviewer.index.embedder import HashEmbedder
from memviewer.index.indexer import index_status
from memviewer.index.integrity import (
    INDEX_AHEAD,
    INDEX_DAMAGED,
    INDEX_INCOMPLETE,
    exact_check,
    quick_check,
)
from memviewer.index.lance import SUMMARIES, TURNS, LanceIndex
from memviewer.mcp.tools import RECALL_OUTPUT
from memviewer.recall.lagging import INDEX_LAGGING
from memviewer.recall_log import RecordAs
from memviewer.service import MemoryService

TOPICS = ["heron", "walrus", "ocelot", "narwhal", "axolotl"]
PER_SESSION = 12


def _session(svc: MemoryService, k: int) -> None:
    sid, word = f"s{k}", TOPICS[k]
    svc.import_session(
        {"id": sid, "title": f"notes {k}", "started_at": 1_700_000_000.0 + k * 1000},
        [
            {
                "id": f"{sid}-t{i:02d}",
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"the {word} project, step {i}: we discussed the {word} migration plan",
                "timestamp": 1_700_000_000.0 + k * 1000 + i,
            }
            for i in range(PER_SESSION)
        ],
    )


def _build(settings: Settings, sessions: int = 5) -> int:
    """``sessions`` sessions, each embedded by its own pass (so each is its own table version)."""
    svc = MemoryService(settings, embedder=HashEmbedder())
    try:
        for k in range(sessions):
            _session(svc, k)
            svc.sync_index()
    finally:
        svc.close()
    return sessions * PER_SESSION


def _lance(settings: Settings) -> LanceIndex:
    return LanceIndex(paths.lance_dir(settings.home_path), readonly=True)


def drop_newest_manifest(home: Path, table: str) -> Path:
    """Delete the newest ``_versions/*.manifest`` of a table (what the audit did)."""
    manifests = list((paths.lance_dir(home) / f"{table}.lance" / "_versions").glob("*.manifest"))
    stems = [int(p.stem) for p in manifests]
    # V2 names count down from u64::MAX (the newest is the smallest); V1 names count up
    newest = min(stems) if min(stems) > 2**63 else max(stems)
    path = next(p for p in manifests if int(p.stem) == newest)
    path.unlink()
    return path


def _turn_ids(settings: Settings) -> list[str]:
    index = _lance(settings)
    rows = index.rows(TURNS, None, ["turn_id"])
    index.close()
    return [r["turn_id"] for r in rows]


def _recall(settings: Settings, query: str) -> dict:
    svc = MemoryService(settings, readonly=True, embedder=HashEmbedder())  # the viewer beside a hub
    try:
        return svc.recall(query)
    finally:
        svc.close()


def _heal(settings: Settings) -> dict:
    svc = MemoryService(settings, embedder=HashEmbedder())
    try:
        return svc.sync_index()
    finally:
        svc.close()


def test_a_rolled_back_turns_table_fails_doctor_escalates_and_heals_exactly(settings: Settings) -> None:
    n = _build(settings)
    drop_newest_manifest(settings.home_path, TURNS)
    left = len(_turn_ids(settings))
    assert left == n - PER_SESSION  # the newest version held the last session's turns

    status = index_status(settings)
    assert status["ok"] is False
    assert f"{PER_SESSION} of {n} embedded turns are missing" in status["detail"]
    assert "reindex" in status["detail"]
    turns = status["integrity"]["turns"]
    assert (turns["expected"], turns["indexed"], turns["missing"]) == (n, left, PER_SESSION)
    assert all(t.startswith("s4-") for t in turns["missing_sample"])

    out = _recall(settings, "axolotl migration plan")
    d = out["diagnostics"]
    assert INDEX_INCOMPLETE in d["escalations"] and INDEX_LAGGING not in d["escalations"]
    assert d["index_integrity"]["turns"]["missing"] == PER_SESSION
    # the lost session is still found: its turns come back as keyword results
    lost = [r for r in out["results"] if r["session_id"] == "s4"]
    assert lost and all("keyword_only" in r["score_breakdown"] for r in lost)

    report = _heal(settings)
    assert report["healed"]["turns"] == PER_SESSION and report["added_turns"] == 0
    ids = _turn_ids(settings)
    assert len(ids) == len(set(ids)) == n  # back to N, nothing indexed twice
    assert index_status(settings)["ok"] is True
    again = _recall(settings, "axolotl migration plan")
    assert not {INDEX_INCOMPLETE, INDEX_DAMAGED} & set(again["diagnostics"]["escalations"])
    assert again["results"][0]["session_id"] == "s4"
    assert "keyword_only" not in again["results"][0]["score_breakdown"]  # a vector hit again


def test_missing_summaries_are_detected_by_count_and_id_and_rewritten(settings: Settings) -> None:
    _build(settings)
    writer = LanceIndex(paths.lance_dir(settings.home_path))
    writer.delete_where("session_id IN ('s1', 's3')", SUMMARIES)  # summaries lost for two sessions
    writer.close()

    status = index_status(settings)
    assert status["ok"] is False
    assert "2 of 5 sessions have no summary (e.g. s1, s3)" in status["detail"]
    svc = MemoryService(settings, readonly=True, embedder=HashEmbedder())
    try:
        quick = quick_check(svc.parts.lance, svc.store)
        assert quick.summaries is not None and quick.summaries.missing == 2 and quick.turns.missing == 0
        exact = exact_check(svc.parts.lance, svc.store)
        assert exact.summaries is not None and exact.summaries.missing_ids == ["s1", "s3"]
        assert INDEX_INCOMPLETE in svc.recall("walrus migration")["diagnostics"]["escalations"]
    finally:
        svc.close()

    report = _heal(settings)
    assert report["healed"]["summaries"] == 2 and report["healed"]["turns"] == 0
    index = _lance(settings)
    assert sorted(r["session_id"] for r in index.rows(SUMMARIES, None, ["session_id"])) == [
        "s0",
        "s1",
        "s2",
        "s3",
        "s4",
    ]
    index.close()
    assert index_status(settings)["ok"] is True


def test_deleted_indices_fall_back_to_keyword_results_and_are_rebuilt(settings: Settings) -> None:
    n = _build(settings)
    shutil.rmtree(paths.lance_dir(settings.home_path) / f"{TURNS}.lance" / "_indices")

    status = index_status(settings)
    assert status["ok"] is False and "turns: the files of indexes" in status["detail"]
    assert "text_idx" in status["detail"]

    out = _recall(settings, "narwhal migration plan")
    d = out["diagnostics"]
    assert INDEX_DAMAGED in d["escalations"]
    assert d["index_damage"]["fallback"] == "keyword" and "reindex" in d["index_damage"]["hint"]
    assert "Not found" in d["index_damage"]["error"] and "/rustc/" not in d["index_damage"]["error"]
    assert out["results"] and all("keyword_only" in r["score_breakdown"] for r in out["results"])
    assert out["results"][0]["session_id"] == "s3"
    assert len(out["results"]) <= 10
    jsonschema.validate(out, RECALL_OUTPUT)  # the MCP tool's output contract still holds

    report = _heal(settings)
    assert "turns.text" in report["healed"]["indexes"]
    assert index_status(settings)["ok"] is True
    again = _recall(settings, "narwhal migration plan")
    assert INDEX_DAMAGED not in again["diagnostics"]["escalations"]
    assert "keyword_only" not in again["results"][0]["score_breakdown"]
    assert len(_turn_ids(settings)) == n


def test_an_index_ahead_of_its_store_is_reported_not_healed(
    settings: Settings, tmp_path: Path, short_tmp: Path
) -> None:
    """The store restored from an older copy: the index holds a session SQLite lacks."""
    n = _build(settings)
    older = load_settings(
        tmp_path / "none.toml", env={}, home=str(tmp_path / "older"), socket=str(short_tmp / "o.sock")
    )
    _build(older, sessions=4)
    shutil.rmtree(paths.lance_dir(older.home_path))
    shutil.copytree(paths.lance_dir(settings.home_path), paths.lance_dir(older.home_path))
    logged = MemoryService(older, readonly=True, embedder=HashEmbedder())
    try:  # a recall in the recall log appends an event: that must not hide the verdict
        logged.recall("walrus", record=RecordAs("cli"))
    finally:
        logged.close()

    status = index_status(older)
    assert status["ok"] is False
    assert f"{PER_SESSION} turn rows that SQLite does not have (ahead)" in status["detail"]
    assert "1 summaries of sessions SQLite does not have" in status["detail"]
    assert "run `memviewer reindex`" in status["detail"]
    out = _recall(older, "heron migration plan")
    assert INDEX_AHEAD in out["diagnostics"]["escalations"]
    assert out["diagnostics"]["index_integrity"]["turns"]["extra"] == PER_SESSION

    report = _heal(older)
    assert report["healed"]["foreign_turns"] == PER_SESSION and report["healed"]["turns"] == 0
    assert len(_turn_ids(older)) == n  # reported, never deleted behind the user's back
    svc = MemoryService(older, embedder=HashEmbedder())
    try:
        svc.indexer().rebuild()  # what the hint says: `memviewer reindex`
    finally:
        svc.close()
    assert index_status(older)["ok"] is True
    assert len(_turn_ids(older)) == n - PER_SESSION


def test_a_healthy_index_passes_and_recall_is_unchanged(service: MemoryService) -> None:
    for k in range(3):
        _session(service, k)
    service.sync_index()
    status = index_status(service.settings)
    assert status["ok"] is True and status["integrity"]["ok"] is True
    assert status["integrity"]["exact"] is True and status["integrity"]["problems"] == []
    out = service.recall("ocelot migration")
    assert not [e for e in out["diagnostics"]["escalations"] if e.startswith("index:")]
    assert "index_integrity" not in out["diagnostics"] and "index_damage" not in out["diagnostics"]


@pytest.mark.parametrize("what", ["manifest", "indices"])
def test_the_json_form_of_doctor_carries_the_verdict(settings: Settings, what: str) -> None:
    from memviewer.doctor import run_checks

    _build(settings, sessions=2)
    if what == "manifest":
        drop_newest_manifest(settings.home_path, TURNS)
    else:
        shutil.rmtree(paths.lance_dir(settings.home_path) / f"{TURNS}.lance" / "_indices")
    check = next(c for c in run_checks(settings) if c["name"] == "vector index")
    assert check["ok"] is False
    integrity = check["integrity"]
    assert integrity["ok"] is False and integrity["problems"] and "reindex" in integrity["hint"]
    if what == "manifest":
        assert integrity["turns"]["missing"] == PER_SESSION
    else:
        assert integrity["indexes"]


def test_a_running_background_indexer_finds_and_heals_a_loss(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hub's indexer re-checks on its idle tick, against what is on disk."""
    from memviewer.index import integrity, runner

    monkeypatch.setattr(integrity, "VERIFY_EVERY_S", 0.2)
    monkeypatch.setattr(runner, "IDLE_TICK_S", 0.2)
    _build(settings, sessions=3)
    svc = MemoryService(settings, embedder=HashEmbedder())
    try:
        idx = svc.indexer()
        idx.start_background()
        assert idx.wait_idle()
        other = LanceIndex(paths.lance_dir(settings.home_path))  # another process's writer
        with other.write_lock():
            other.delete_where("session_id = 's1'", SUMMARIES)
        other.close()
        deadline = time.monotonic() + 30
        healthy, healed = False, None
        while time.monotonic() < deadline and not (healthy and healed):
            reader = LanceIndex(paths.lance_dir(settings.home_path), readonly=True)
            healthy = quick_check(reader, svc.store).ok
            reader.close()
            healed = idx.status()["healed"]  # set once the repair pass has finished
            time.sleep(0.05)
        assert healthy and healed is not None
        assert healed["summaries"] == 1 and healed["turns"] == 0
    finally:
        svc.close()
