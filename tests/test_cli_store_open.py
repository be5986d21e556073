"""A broken home or store: every command says what is wrong in one ``error:`` line and
changes nothing (no traceback, no WAL switch or migration of someone else's database)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from cli_runs import invoke

from memviewer.config import load_settings
from memviewer.errors import MemviewerError
from memviewer.service import MemoryService

COMMANDS = [
    ("sessions",),
    ("search", "x"),
    ("export", "--all", "--format", "json"),
    ("demo", "--no-index"),
    ("import", "json", "nothing.json"),
    ("serve", "--no-index"),
]


def _run(home: Path, short_tmp: Path, *args: str):
    return invoke(home, *args, socket=short_tmp / "s.sock")


def _check_refused(home: Path, short_tmp: Path, message: str) -> None:
    for args in COMMANDS:
        res = _run(home, short_tmp, *args)
        assert res.exit_code == 1, (args, res.output)
        assert res.stderr.startswith(f"error: {message}\nhint: "), (args, res.stderr)
        assert "Traceback" not in res.output


def test_a_home_that_is_a_file(tmp_path: Path, short_tmp: Path) -> None:
    home = tmp_path / "home"
    home.write_text("not a folder")
    _check_refused(home, short_tmp, f"{home} is not a memviewer store (it is a file, not a folder)")
    assert home.read_text() == "not a folder"
    hint = _run(home, short_tmp, "sessions").stderr.splitlines()[1]
    # no memviewer.db under a file to move aside: the hint names the file and another home
    assert hint == (
        "hint: the home must be a folder: pick another --home (or MEMVIEWER_HOME), "
        f"or move the file {home} aside"
    )
    res = _run(home, short_tmp, "doctor", "--json")
    store = next(c for c in json.loads(res.stdout)["checks"] if c["name"] == "store")
    assert res.exit_code == 1 and store["ok"] is False and "is a file" in store["detail"]


def test_a_database_file_that_is_not_a_database(tmp_path: Path, short_tmp: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = home / "memviewer.db"
    db.write_bytes(b"\x8f garbage " * 400)
    before = db.read_bytes()
    _check_refused(home, short_tmp, f"{db} is not a memviewer store (file is not a database)")
    assert db.read_bytes() == before


def test_another_applications_sqlite_file_is_left_untouched(tmp_path: Path, short_tmp: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = home / "memviewer.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE sessions (x)")
        conn.execute("CREATE TABLE notes (y)")
    before = db.read_bytes()
    _check_refused(
        home,
        short_tmp,
        f"{db} is not a memviewer store (it holds other tables (notes, sessions) and no memviewer schema)",
    )
    assert db.read_bytes() == before  # not even switched to WAL mode
    assert sorted(p.name for p in home.iterdir()) == ["memviewer.db"]


def test_a_store_written_by_a_newer_version_is_neither_read_nor_written(
    tmp_path: Path, short_tmp: Path
) -> None:
    home = tmp_path / "home"
    MemoryService(load_settings(env={}, home=str(home))).close()
    db = home / "memviewer.db"
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (99, 'future', 0)")
    before = db.read_bytes()
    for args in COMMANDS:
        res = _run(home, short_tmp, *args)
        assert res.exit_code == 1, args
        assert res.stderr.startswith("error: this store was written by a newer memviewer (schema 99 > "), args
    assert db.read_bytes() == before
    for readonly in (True, False):
        with pytest.raises(MemviewerError, match="newer memviewer"):
            MemoryService(load_settings(env={}, home=str(home)), readonly=readonly)


def test_recall_json_reports_a_broken_store_as_json(tmp_path: Path, short_tmp: Path) -> None:
    home = tmp_path / "home"
    home.write_text("")
    res = _run(home, short_tmp, "recall", "anything", "--json")
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    assert out["error"] == f"{home} is not a memviewer store (it is a file, not a folder)" and out["hint"]
