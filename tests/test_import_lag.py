"""Import does not wait for embeddings; a lagging index is reported and recall says so.

In-process with the hash embedder (fast): a lagging index escalates in recall and still
answers with keyword results for the turns not embedded yet. Real processes and the
real model (marked): ``import praisonai`` returns with the lag, a detached
``reindex --catch-up`` embeds the rest, and ``doctor`` reports the lag with an ETA.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runs import run_cli

from memviewer.index.lance import WRITE_LOCK
from memviewer.index.progress import catch_up_pid, eta_seconds, index_lag, read_state
from memviewer.recall.lagging import INDEX_LAGGING

FIXTURES = Path(__file__).parent / "fixtures" / "praisonai"


def _seed(service, sid: str, texts: list[str]) -> None:
    service.import_session(
        {"id": sid, "title": sid, "started_at": 1_700_000_000.0},
        [
            {"id": f"{sid}-t{i}", "role": "user", "content": t, "timestamp": 1_700_000_000.0 + i}
            for i, t in enumerate(texts)
        ],
    )


def test_eta_from_the_measured_rate() -> None:
    assert eta_seconds(0, None) == 0.0
    assert eta_seconds(500, 100.0) == 5.0
    assert eta_seconds(500, None) is None and eta_seconds(500, 0) is None and eta_seconds(5, True) is None


def test_recall_on_a_lagging_index_escalates_and_adds_keyword_results(service) -> None:
    _seed(service, "s-old", ["the heron migration plan is ready", "we ship the heron plan on friday"])
    service.sync_index()
    assert INDEX_LAGGING not in service.recall("heron migration")["diagnostics"]["escalations"]
    _seed(service, "s-new", ["zanzibar rollout checklist for the heron team"])  # stored, not embedded
    with service.store.read() as conn:
        assert index_lag(service.home, conn)["lag"] == 1
    out = service.recall("zanzibar rollout")
    d = out["diagnostics"]
    assert INDEX_LAGGING in d["escalations"]
    assert d["index_lag"]["lag"] == 1 and d["index_lag"]["keyword_results"] == 1
    extra = [r for r in out["results"] if "keyword_only" in r["score_breakdown"]]
    assert [(r["session_id"], r["index"]) for r in extra] == [("s-new", 0)]
    assert "zanzibar" in extra[0]["content"]
    service.sync_index()
    again = service.recall("zanzibar rollout")
    assert (
        INDEX_LAGGING not in again["diagnostics"]["escalations"] and "index_lag" not in again["diagnostics"]
    )
    assert again["results"][0]["session_id"] == "s-new"  # now found by the vector index


def test_status_reports_rate_and_eta_after_a_pass(service) -> None:
    _seed(service, "s-a", [f"turn number {i} about kiwis" for i in range(5)])
    service.sync_index()
    status = service.indexer().status()
    assert status["lag"] == 0 and status["eta_s"] == 0.0
    assert isinstance(status["rate_turns_s"], float) and status["rate_turns_s"] > 0
    _seed(service, "s-b", ["one more"])
    status = service.indexer().status()
    assert status["lag"] == 1 and status["eta_s"] == round(1 / status["rate_turns_s"], 1)


@pytest.mark.integration
@pytest.mark.model
def test_import_returns_before_embedding_and_a_background_catch_up_finishes(
    tmp_path: Path, short_tmp: Path
) -> None:
    home = tmp_path / "home"
    sock = short_tmp / "none.sock"  # no hub: the import starts the background indexer
    proc = run_cli(home, "import", "praisonai", str(FIXTURES), "--json", socket=sock)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    turns = sum(r["turns"] for r in report["imported"])
    assert report["index"]["lag"] == turns > 0  # returned with nothing embedded yet
    assert report["index"]["indexer"] == "background" and report["index"]["pid"] > 0
    # keyword search works at once
    found = run_cli(home, "search", "refund", "--json", socket=sock)
    assert found.returncode == 0 and json.loads(found.stdout)["total_found"] > 0
    deadline = time.monotonic() + 180
    while catch_up_pid(home) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert catch_up_pid(home) is None, (home / "indexer.log").read_text(errors="replace")
    doctor = run_cli(home, "doctor", "--json", socket=sock)
    assert "lag 0 turns" in doctor.stdout, doctor.stdout
    assert "embedded" in (home / "indexer.log").read_text()


@pytest.mark.integration
@pytest.mark.model
def test_import_wait_returns_once_embedded_and_doctor_shows_lag_and_eta(
    tmp_path: Path, short_tmp: Path
) -> None:
    home = tmp_path / "home"
    sock = short_tmp / "none.sock"
    proc = run_cli(home, "import", "praisonai", str(FIXTURES), "--wait", "--json", socket=sock)
    assert proc.returncode == 0, proc.stderr
    assert "index" not in json.loads(proc.stdout)  # nothing left to report
    extra = tmp_path / "more"
    extra.mkdir()
    (extra / "late.json").write_text(
        json.dumps({"session_id": "late", "messages": [{"role": "user", "content": "a late kiwi"}]})
    )
    # --no-index: stored, never embedded here, so the lag stays for doctor to see
    assert run_cli(home, "import", "praisonai", str(extra), "--no-index", socket=sock).returncode == 0
    doctor = run_cli(home, "doctor", socket=sock)
    assert "lag 1 turn, ETA" in doctor.stdout, doctor.stdout


@pytest.mark.integration
@pytest.mark.model
def test_recall_without_a_hub_answers_at_once_on_a_big_backlog_and_leaves_it_to_an_indexer(
    tmp_path: Path, short_tmp: Path
) -> None:
    from memviewer.commands.recall import INLINE_CATCH_UP_TURNS

    home = tmp_path / "home"
    sock = short_tmp / "none.sock"
    folder = tmp_path / "big"
    folder.mkdir()
    n = INLINE_CATCH_UP_TURNS + 44
    then = time.time() - 3600  # stored an hour ago: past the indexer's grace for fresh turns
    msgs = [
        {"role": "user", "content": f"note {i}: the ledger of crate {i % 17}", "timestamp": then + i}
        for i in range(n - 1)
    ]
    msgs.append(
        {"role": "user", "content": "the quokka vaccine schedule moved to march", "timestamp": then + n}
    )
    (folder / "big.json").write_text(json.dumps({"session_id": "big", "agent_name": "a", "messages": msgs}))
    # --no-index: stored, nothing embeds it, so recall meets the whole backlog
    assert run_cli(home, "import", "praisonai", str(folder), "--no-index", socket=sock).returncode == 0
    # The test holds the index's write lock while recall answers, so the catch-up that recall
    # starts cannot finish first (on a fast machine it could, and the lag would be gone).
    lance = home / "lance"
    lance.mkdir(parents=True, exist_ok=True)
    fd = os.open(lance / WRITE_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        proc = run_cli(home, "recall", "quokka vaccine schedule", "--json", socket=sock)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    d = out["diagnostics"]
    assert INDEX_LAGGING in d["escalations"] and d["index_lag"]["lag"] == n  # nothing embedded inline
    assert "quokka" in out["results"][0]["content"] and "keyword_only" in out["results"][0]["score_breakdown"]
    assert "a background indexer embeds them (pid" in proc.stderr, proc.stderr
    deadline = time.monotonic() + 180  # the watermark covers every turn and the indexer is gone
    while (read_state(home).get("turn_num", 0) < n or catch_up_pid(home)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert read_state(home).get("turn_num", 0) >= n, (home / "indexer.log").read_text(errors="replace")
    again = json.loads(run_cli(home, "recall", "quokka vaccine schedule", "--json", socket=sock).stdout)
    assert INDEX_LAGGING not in again["diagnostics"]["escalations"]
    top = again["results"][0]
    assert "quokka" in top["content"] and "keyword_only" not in top["score_breakdown"]


def _hostile_package(folder: Path, marker: Path) -> None:
    """A ``memviewer/`` package that, if ever imported, leaves ``marker`` behind."""
    pkg = folder / "memviewer"
    pkg.mkdir(parents=True)
    code = f"open({str(marker)!r}, 'a').write('imported from the cwd\\n')\n"
    (pkg / "__init__.py").write_text(code)
    (pkg / "__main__.py").write_text(code)
    (pkg / "cli.py").write_text(code + "def main():\n    pass\n")


def test_python_dash_m_memviewer_runs_the_installed_cli_from_a_checkouts_parent(tmp_path: Path) -> None:
    parent = Path(__file__).resolve().parents[2]  # the folder that holds this checkout
    proc = subprocess.run(
        [sys.executable, "-I", "-m", "memviewer", "--version"], cwd=parent, capture_output=True, text=True
    )
    assert proc.returncode == 0 and "memviewer" in proc.stdout, proc.stderr


@pytest.mark.integration
@pytest.mark.model
def test_the_background_indexer_never_imports_a_memviewer_folder_in_the_cwd(
    tmp_path: Path, short_tmp: Path
) -> None:
    hostile = tmp_path / "cwd"
    marker = tmp_path / "marker"
    _hostile_package(hostile, marker)
    # control: a plain interpreter in that folder does pick the hostile package up
    subprocess.run([sys.executable, "-c", "import memviewer"], cwd=hostile, check=True)
    assert marker.exists()
    marker.unlink()
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVIEWER_")}
    env.update({"MEMVIEWER_CONFIG": os.devnull, "MEMVIEWER_SOCKET": str(short_tmp / "none.sock")})
    proc = subprocess.run(
        [
            sys.executable,
            "-I",
            "-m",
            "memviewer",
            "--home",
            str(home),
            "import",
            "praisonai",
            str(FIXTURES),
            "--json",
        ],
        cwd=hostile,
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["index"]["indexer"] == "background"
    log_file = home / "indexer.log"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:  # the detached indexer's last line, or its failure
        log = log_file.read_text(errors="replace") if log_file.exists() else ""
        if "embedded" in log or "Error" in log or marker.exists():
            break
        time.sleep(0.2)
    assert "embedded" in log, log
    assert not marker.exists(), marker.read_text()
