"""One huge PraisonAI file is checked whole, then stored a chunk of turns per transaction:
the same rows as a whole-file import, bounded memory, re-runs that continue, and a Ctrl-C
that leaves whole chunks."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from praisonai_big import write_big_session

import memviewer.store.fts  # noqa: F401 - registers migration 3
from memviewer.praisonai import chunked as praisonai_chunks
from memviewer.praisonai import stream as praisonai_stream
from memviewer.praisonai.format import load_file
from memviewer.praisonai.importer import import_paths
from memviewer.session.manager import SessionManager
from memviewer.store import repos
from memviewer.store.db import Store


def _doc(n: int, *, drop: int | None = None, extra: str | None = None) -> dict:
    msgs = [
        # repeated (role, time, text) keys: the occurrence count must match the whole read
        {"role": "assistant" if i % 2 else "user", "content": f"m{i % 7}", "timestamp": 1700000000 + i % 3}
        for i in range(n)
        if i != drop
    ]
    if extra:
        msgs.append({"role": "user", "content": extra, "timestamp": 1700000100})
    return {  # the header after the messages, as PraisonAI writes it
        "messages": msgs,
        "session_id": "s1",
        "user_id": "u",
        "metadata": {"title": "T", "n": [1, 2.5, None, True]},
        "archived_messages": [{"role": "user", "content": "old", "timestamp": 1690000000}, 5],
        "custom": {"kept": "verbatim"},
    }


def _rows(store: Store, sid: str) -> list[dict]:
    with store.read() as conn:
        return [{k: v for k, v in r.items() if k != "num"} for r in repos.session_turns(conn, sid)]


def test_chunked_import_stores_what_a_whole_import_stores(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(praisonai_stream, "STREAM_MIN_BYTES", 1_000)
    monkeypatch.setattr(praisonai_chunks, "CHUNK_TURNS", 400)
    p = tmp_path / "s.json"
    p.write_text(json.dumps(_doc(1500)), encoding="utf-8")
    session, turns = load_file(p)
    chunked, whole = Store.open(tmp_path / "a.db"), Store.open(tmp_path / "b.db")
    try:
        m = SessionManager(chunked)
        handed: list[int] = []

        def watched(session: dict, chunks, **kw):  # noqa: ANN001, ANN003, ANN202
            """The store is handed a lazy stream of chunks, never the whole turn list."""
            assert not isinstance(chunks, list | tuple)

            def each():  # noqa: ANN202
                for chunk in chunks:
                    handed.append(len(chunk))
                    yield chunk

            return m.import_session_chunks(session, each(), **kw)

        report = import_paths(m.import_session, [p], import_chunks=watched)
        assert not report.failed
        (result,) = report.imported
        assert (result["turns"], result["new_turns"], result["chunks"]) == (1501, 1501, 4)
        assert handed == [400, 400, 400, 301]  # bounded: at most CHUNK_TURNS turns at a time
        SessionManager(whole).import_session(session, turns, origin=f"praisonai:{p.resolve()}")
        assert _rows(chunked, "s1") == _rows(whole, "s1")
        with chunked.read() as c1, whole.read() as c2:
            assert repos.get_session(c1, "s1") == repos.get_session(c2, "s1")

        again = import_paths(m.import_session, [p], import_chunks=m.import_session_chunks).imported[0]
        assert (again["new_turns"], again["updated_turns"], again["removed_turns"]) == (0, 0, 0)

        p.write_text(json.dumps(_doc(1500, drop=700, extra="a new message")), encoding="utf-8")
        edited = import_paths(m.import_session, [p], import_chunks=m.import_session_chunks).imported[0]
        assert edited["new_turns"] == 1 and edited["removed_turns"] == 1
        session, turns = load_file(p)
        assert [r["id"] for r in _rows(chunked, "s1")] == [t["id"] for t in turns]
        assert [r["idx"] for r in _rows(chunked, "s1")] == list(range(len(turns)))
    finally:
        chunked.close()
        whole.close()


def test_a_big_file_reimport_drops_the_tags_of_the_turns_it_removed(
    service, tmp_path: Path, monkeypatch
) -> None:  # noqa: ANN001
    """``memviewer import praisonai`` of a big file (the chunked path) keeps annotations in step
    with the turns, as a whole-file import does."""
    monkeypatch.setattr(praisonai_stream, "STREAM_MIN_BYTES", 1_000)
    monkeypatch.setattr(praisonai_chunks, "CHUNK_TURNS", 400)
    p = tmp_path / "s.json"
    p.write_text(json.dumps(_doc(1500)), encoding="utf-8")
    first = service.import_praisonai([p], index=False).imported[0]
    assert first["chunks"] == 4
    before = [r["id"] for r in _rows(service.store, "s1")]
    p.write_text(json.dumps(_doc(1500, drop=700)), encoding="utf-8")
    after = {t["id"] for t in load_file(p)[1]}
    (gone,) = [i for i in before if i not in after]  # turn ids count repeats: find the one dropped
    kept = next(i for i in before if i in after)
    service.tag(gone, ["check"])
    service.tag(kept, ["check"])
    again = service.import_praisonai([p], index=False).imported[0]
    assert again["removed_turns"] == 1 and again["chunks"] == 4
    assert gone not in {r["id"] for r in _rows(service.store, "s1")}
    assert [a["target_id"] for a in service.annotations(tag="check")] == [kept]


def test_a_bad_message_late_in_a_big_file_stores_nothing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(praisonai_stream, "STREAM_MIN_BYTES", 1_000)
    monkeypatch.setattr(praisonai_chunks, "CHUNK_TURNS", 100)
    doc = _doc(1000)
    doc["messages"][950]["metadata"] = "not an object"
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    store = Store.open(tmp_path / "m.db")
    try:
        m = SessionManager(store)
        report = import_paths(m.import_session, [p], import_chunks=m.import_session_chunks)
        assert report.failed and "messages[950].metadata must be an object" in report.failed[0][1]
        with store.read() as conn:
            assert repos.get_session(conn, "s1") is None
    finally:
        store.close()


def test_a_session_from_elsewhere_is_refused_before_anything_is_written(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(praisonai_stream, "STREAM_MIN_BYTES", 1_000)
    monkeypatch.setattr(praisonai_chunks, "CHUNK_TURNS", 100)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_doc(300)), encoding="utf-8")
    b.write_text(json.dumps(_doc(300, extra="only in b")), encoding="utf-8")
    store = Store.open(tmp_path / "m.db")
    try:
        m = SessionManager(store)
        assert not import_paths(m.import_session, [a], import_chunks=m.import_session_chunks).failed
        before = _rows(store, "s1")
        same = import_paths(m.import_session, [tmp_path / "a.json"], import_chunks=m.import_session_chunks)
        assert not same.failed
        report = import_paths(m.import_session, [b], import_chunks=m.import_session_chunks)
        assert report.failed and "already exists" in report.failed[0][1]
        assert _rows(store, "s1") == before
    finally:
        store.close()


# -- real processes ----------------------------------------------------------------------
#: About 17,000 messages: 17 chunks. The child lowers ``STREAM_MIN_BYTES`` to take the
#: chunked path on a file this small (the path is the same; only the size that selects it
#: differs). Peak memory on big files is measured in bench/bench_praisonai_chunked.py
#: (docs/benchmarks.md), not here: a file big enough to show it takes minutes on 2 cores.
BIG_BYTES = 3_000_000
CHILD = """
import sys
import memviewer.praisonai.stream as stream
stream.STREAM_MIN_BYTES = 100_000
from memviewer.cli import main
sys.argv = ["memviewer", *sys.argv[1:]]
main()
"""


def _cmd(home: Path, path: Path) -> list[str]:
    return [sys.executable, "-c", CHILD, "--home", str(home), "import", "praisonai", "--no-index", str(path)]


def _turns(home: Path) -> list[tuple[str, int]]:
    if not (home / "memviewer.db").exists():
        return []
    db = sqlite3.connect(f"file:{home / 'memviewer.db'}?mode=ro", uri=True, timeout=10)
    try:
        return [
            (r[0], r[1])
            for r in db.execute("SELECT id, idx FROM turns WHERE session_id = 'big' ORDER BY idx")
        ]
    except sqlite3.OperationalError:  # no tables yet
        return []
    finally:
        db.close()


@pytest.mark.integration
def test_ctrl_c_leaves_whole_chunks_and_the_rerun_completes(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    n = write_big_session(path, BIG_BYTES)
    assert n > 5 * praisonai_chunks.CHUNK_TURNS
    home = tmp_path / "home"
    proc = subprocess.Popen(
        _cmd(home, path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # The harness may run with SIGINT ignored, which the child would inherit.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while not _turns(home) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, "the import ended before it was interrupted"
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    assert took < 5.0, f"Ctrl-C took {took:.1f} s"
    kept = _turns(home)
    assert 0 < len(kept) < n and len(kept) % praisonai_chunks.CHUNK_TURNS == 0  # whole chunks
    assert [i for _, i in kept] == list(range(len(kept)))

    out = subprocess.run(_cmd(home, path), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    turns = _turns(home)
    assert len(turns) == n and len({t for t, _ in turns}) == n  # continued, nothing twice
    assert turns[: len(kept)] == kept
    assert [i for _, i in turns] == list(range(n))
