"""Big PraisonAI files are read incrementally: the same session as a whole-file read, progress
in bytes, and Ctrl-C stops a real `memviewer import praisonai` promptly with whole sessions."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from praisonai_big import write_big_session

import memviewer.store.fts  # noqa: F401 - registers migration 3
from memviewer.praisonai import stream as praisonai_stream
from memviewer.praisonai.format import ForeignFileError, load_file
from memviewer.praisonai.importer import import_paths
from memviewer.session.manager import SessionManager
from memviewer.store import repos
from memviewer.store.db import Store


def _small(path: Path, sid: str, n: int = 5) -> Path:
    msgs = [{"role": "user", "content": f"{sid} {i}", "timestamp": 1714557600 + i} for i in range(n)]
    path.write_text(json.dumps({"session_id": sid, "messages": msgs}), encoding="utf-8")
    return path


def test_streaming_reads_the_same_session_as_a_whole_read(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    doc = {
        "session_id": "s1",
        "user_id": "u",
        "metadata": {"title": "T", "n": [1, 2.5, None, True, 10**30]},  # a big int too
        "archived_messages": [{"role": "user", "content": "old ü", "timestamp": 1690000000}],
        "messages": [
            {"role": "assistant", "content": f"m{i}", "timestamp": 1700000000 + i / 3, "metadata": {"i": i}}
            for i in range(300)
        ],
        "custom": {"kept": "verbatim"},
    }
    p.write_text(json.dumps(doc), encoding="utf-8")
    seen: list[tuple[int, int]] = []
    assert praisonai_stream.load_file_streaming(p, lambda d, t, _: seen.append((d, t))) == load_file(p)
    assert seen and seen[-1][0] == seen[-1][1] == p.stat().st_size


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ('{"messages": [NaN]}', "not valid JSON"),
        ('{"messages": [', "not valid JSON"),
        ("[" * 300 + "]" * 300, "nested deeper"),
        ('{"other": 1}', "no 'messages'"),
    ],
)
def test_bad_big_files_fail_with_a_reason(tmp_path: Path, body: str, reason: str) -> None:
    p = tmp_path / "bad.json"
    p.write_text(body, encoding="utf-8")
    with pytest.raises(ForeignFileError, match=reason):
        praisonai_stream.load_file_streaming(p)


def test_import_paths_streams_big_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(praisonai_stream, "STREAM_MIN_BYTES", 10_000)
    big = tmp_path / "big.json"
    n = write_big_session(big, 200_000)
    small = _small(tmp_path / "small.json", "small")
    progress: list[str] = []
    store = Store.open(tmp_path / "m.db")
    try:
        report = import_paths(
            SessionManager(store).import_session,
            [small, big],
            file_progress=lambda d, t, p: progress.append(p),
        )
        assert not report.failed and sorted(report.session_ids) == ["big", "small"]
        assert set(progress) == {str(big)}  # only the big file is streamed
        with store.read() as conn:
            assert len(repos.session_turns(conn, "big")) == n
    finally:
        store.close()


@pytest.mark.integration
def test_ctrl_c_during_a_big_import_stops_promptly_with_whole_sessions(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = _small(tmp_path / "a-first.json", "first")
    big = tmp_path / "b-big.json"
    write_big_session(big, 60_000_000)
    last = _small(tmp_path / "c-last.json", "last")
    exe = Path(sys.executable).with_name("memviewer")
    proc = subprocess.Popen(
        [str(exe), "--home", str(home), "import", "praisonai", "--no-index", str(first), str(big), str(last)],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        # As at a terminal: a test runner started in the background (CI, nohup) has SIGINT
        # ignored, the child would inherit that, and Python then never raises KeyboardInterrupt.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stderr is not None
    try:
        line = proc.stderr.readline()  # blocks until the big file is being read (or exit)
        assert line.startswith(f"reading {big}"), line
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    assert took < 1.5, f"Ctrl-C took {took:.2f} s"
    store = Store.open(home / "memviewer.db")
    try:
        with store.read() as conn:
            assert len(repos.session_turns(conn, "first")) == 5  # whole
            assert repos.get_session(conn, "big") is None  # nothing of the interrupted file
            assert repos.get_session(conn, "last") is None
    finally:
        store.close()
