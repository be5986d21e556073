"""A damaged vector index in real processes: the hub, the CLI and the real model.

The home is built in this process with the real ONNX model (one pass per session, so
each session is its own table version), then damaged on disk as the audit did it. What
a user sees: ``doctor`` exits 1 naming the gap, ``recall --json`` (through a hub that does
not index) escalates or falls back to keyword results and always prints one JSON object,
a hub that indexes heals the index when it starts, ``reindex --catch-up`` heals it too.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memviewer import paths
from memviewer.config import load_settings
from memviewer.index.integrity import INDEX_DAMAGED, INDEX_INCOMPLETE, quick_check
from memviewer.index.lance import TURNS, LanceIndex
from memviewer.service import MemoryService
from memviewer.store.db import Store
from memviewer.wire.testing import HubProcess, hub_env

pytestmark = [pytest.mark.integration, pytest.mark.model]

TOPICS = ["sourdough starter feeding", "kayak rudder repair", "tax return deadline", "violin bow rehair"]
PER_SESSION = 10


def _build(home: Path, sock: Path) -> int:
    settings = load_settings(env={}, home=str(home), socket=str(sock))
    svc = MemoryService(settings)  # the real model
    try:
        for k, topic in enumerate(TOPICS):
            sid = f"s{k}"
            svc.import_session(
                {"id": sid, "title": topic, "started_at": 1_700_000_000.0 + k * 1000},
                [
                    {
                        "id": f"{sid}-t{i:02d}",
                        "role": "user" if i % 2 == 0 else "assistant",
                        "content": f"About the {topic}: note {i} on the {topic}.",
                        "timestamp": 1_700_000_000.0 + k * 1000 + i,
                    }
                    for i in range(PER_SESSION)
                ],
            )
            svc.sync_index()
    finally:
        svc.close()
    return len(TOPICS) * PER_SESSION


def _cli(home: Path, sock: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memviewer.cli", *args],
        capture_output=True,
        text=True,
        env=hub_env(home, sock),
        timeout=240,
    )


def _drop_newest_manifest(home: Path) -> None:
    manifests = list((paths.lance_dir(home) / f"{TURNS}.lance" / "_versions").glob("*.manifest"))
    stems = [int(p.stem) for p in manifests]
    newest = min(stems) if min(stems) > 2**63 else max(stems)
    next(p for p in manifests if int(p.stem) == newest).unlink()


def _turn_ids(home: Path) -> list[str]:
    index = LanceIndex(paths.lance_dir(home), readonly=True)
    try:
        return [r["turn_id"] for r in index.rows(TURNS, None, ["turn_id"])]
    finally:
        index.close()


def _healthy(home: Path) -> bool:
    store = Store.open(paths.db_path(home), readonly=True)
    try:
        return quick_check(LanceIndex(paths.lance_dir(home), readonly=True), store).ok
    finally:
        store.close()


def _vector_check(proc: subprocess.CompletedProcess[str]) -> dict:
    report = json.loads(proc.stdout)
    return next(c for c in report["checks"] if c["name"] == "vector index")


def test_a_rolled_back_index_fails_doctor_escalates_in_recall_and_heals_at_hub_start(
    tmp_path: Path, short_tmp: Path
) -> None:
    home, sock = tmp_path / "home", short_tmp / "hub.sock"
    n = _build(home, sock)
    _drop_newest_manifest(home)
    lost = n - len(_turn_ids(home))
    assert lost == PER_SESSION

    doctor = _cli(home, sock, "doctor", "--json")
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    check = _vector_check(doctor)
    assert check["ok"] is False and f"{lost} of {n} embedded turns are missing" in check["detail"]
    assert check["integrity"]["turns"]["missing"] == lost and "reindex" in check["integrity"]["hint"]

    with HubProcess(home, sock, args=("--no-index",)):  # a hub that does not index: nothing heals
        proc = _cli(home, sock, "recall", TOPICS[-1], "--json")
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert INDEX_INCOMPLETE in out["diagnostics"]["escalations"]
        assert out["diagnostics"]["index_integrity"]["turns"]["missing"] == lost
        assert any(r["session_id"] == "s3" for r in out["results"])  # keyword hits on the lost turns

    with HubProcess(home, sock, args=()) as hub:  # the hub's indexer heals the index at start
        deadline = time.monotonic() + 120
        while not _healthy(home) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _healthy(home), hub.log()
        assert "re-embedding them" in hub.log()
        ids = _turn_ids(home)
        assert len(ids) == len(set(ids)) == n

    # the same loss again, healed by `reindex --catch-up` (what an import starts without a hub)
    before = len(_turn_ids(home))
    _drop_newest_manifest(home)
    lost = before - len(_turn_ids(home))
    assert lost > 0
    proc = _cli(home, sock, "reindex", "--catch-up", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["healed"]["turns"] == lost and "repaired the index" in report["message"]
    ids = _turn_ids(home)
    assert len(ids) == len(set(ids)) == n


def test_deleted_indices_never_give_a_traceback(tmp_path: Path, short_tmp: Path) -> None:
    home, sock = tmp_path / "home", short_tmp / "hub.sock"
    n = _build(home, sock)
    shutil.rmtree(paths.lance_dir(home) / f"{TURNS}.lance" / "_indices")

    with HubProcess(home, sock, args=("--no-index",)):
        proc = _cli(home, sock, "recall", TOPICS[1], "--json")
        assert proc.returncode == 0, proc.stderr  # documented: a keyword fallback is an answer
        assert "Traceback" not in proc.stderr
        out = json.loads(proc.stdout)
        d = out["diagnostics"]
        assert INDEX_DAMAGED in d["escalations"] and d["index_damage"]["fallback"] == "keyword"
        assert out["results"] and all("keyword_only" in r["score_breakdown"] for r in out["results"])
        assert out["results"][0]["session_id"] == "s1"
        human = _cli(home, sock, "recall", TOPICS[1])
        assert human.returncode == 0 and "Traceback" not in human.stderr
        assert "index damaged" in human.stdout and "reindex" in human.stdout
        # --why runs recall's stages in this process: a clear error object, exit 1
        why = _cli(home, sock, "recall", TOPICS[1], "--why", "s1-t00", "--json")
        assert why.returncode == 1 and "Traceback" not in why.stderr
        err = json.loads(why.stdout)
        assert err["code"] == "internal" and "vector index" in err["error"] and "reindex" in err["hint"]

    doctor = _cli(home, sock, "doctor")
    assert doctor.returncode == 1 and "are gone" in doctor.stdout
    # without a hub, recall catches the index up first: that rebuilds the indexes
    proc = _cli(home, sock, "recall", TOPICS[1], "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert INDEX_DAMAGED not in out["diagnostics"]["escalations"]
    assert out["results"][0]["session_id"] == "s1"
    assert _healthy(home) and len(_turn_ids(home)) == n
