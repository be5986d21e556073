"""``memviewer doctor``: every check reports, a failing one sets the exit code, none crashes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memviewer import doctor
from memviewer.cli import cli

FIXTURES = Path(__file__).parent / "fixtures" / "praisonai"
NAMES = ["store", "keyword index", "model", "vector index", "disk", "permissions", "hub", "sources"]


def _doctor(home: Path) -> tuple[int, dict[str, Any]]:
    r = CliRunner().invoke(cli, ["--home", str(home), "doctor", "--json"])
    out = json.loads(r.stdout)
    return r.exit_code, {c["name"]: c for c in out["checks"]} | {"ok": out["ok"]}


@pytest.mark.integration
def test_a_healthy_home_passes_every_check_and_a_missing_index_fails_one(tmp_path: Path) -> None:
    home = tmp_path / "home"
    r = CliRunner().invoke(cli, ["--home", str(home), "import", "praisonai", "--no-index", str(FIXTURES)])
    assert r.exit_code == 0, r.stderr
    code, checks = _doctor(home)
    assert code == 1 and not checks["vector index"]["ok"]
    assert "memviewer reindex" in checks["vector index"]["detail"]

    r = CliRunner().invoke(cli, ["--home", str(home), "reindex"])  # the real model
    assert r.exit_code == 0, r.stderr
    code, checks = _doctor(home)
    assert [n for n in checks if n != "ok"] == NAMES
    assert code == 0 and checks["ok"] is True, checks
    assert "integrity ok" in checks["store"]["detail"]
    disk = checks["disk"]["detail"]
    assert " free of " in disk and "store " in disk and "vector index " in disk
    assert "vector index 0 KiB" not in disk  # the index is counted


def test_a_nearly_full_disk_fails_the_check_with_a_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=doctor.LOW_DISK_BYTES - 1))
    code, checks = _doctor(tmp_path / "home")
    assert code == 1 and checks["ok"] is False
    assert not checks["disk"]["ok"] and "free space before the hub runs out" in checks["disk"]["detail"]
    assert all(checks[n]["ok"] for n in NAMES if n != "disk")


def test_a_store_that_is_not_a_database_is_reported_not_raised(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "memviewer.db").write_bytes(b"this is not SQLite" * 100)
    code, checks = _doctor(home)
    assert code == 1 and not checks["store"]["ok"]
    assert "not a database" in checks["store"]["detail"]
    assert checks["disk"]["ok"] and checks["hub"]["ok"]  # the other checks still ran


def test_human_output_is_a_table_of_every_check(tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["--home", str(tmp_path / "home"), "doctor"])
    lines = r.stdout.splitlines()
    assert lines[0].split("\t") == ["check", "ok", "detail"]
    assert [ln.split("\t")[0] for ln in lines[1:]] == NAMES
