"""Exports that cannot be used against their reader: inert Markdown, unique safe file names,
and one bad session that never stops the rest (through the real CLI)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from cli_runs import invoke

import memviewer.store.fts  # noqa: F401 - registers migration 3
from memviewer.praisonai.export import file_name
from memviewer.session.manager import SessionManager
from memviewer.store.db import Store

T0 = 1_781_000_000.0
HOSTILE = (
    "<script>alert(1)</script> <img src=x onerror=alert(2)> &amp; "
    "\x1b]0;pwned\x07\x1b[31mred\x1b[0m \x9b2J bell\x07 nul\x00 tab\tkept"
)
TOOL = "evil</code><script>x()</script>`"


def _session(sid: str, title: str = "t") -> dict[str, Any]:
    return {
        "id": sid,
        "agent": "a",
        "scope": "user",
        "scope_id": "u",
        "title": title,
        "started_at": T0,
        "last_seen_at": T0 + 1,
        "status": "closed",
    }


def _turn(sid: str, i: int, content: str, **kw: Any) -> dict[str, Any]:
    return {
        "id": f"{sid}:{i}",
        "role": "user",
        "content": content,
        "timestamp": T0 + i,
        "archived": False,
        **kw,
    }


IDS = ["a/b", "a_b-c14cddc033", "x" * 302, "s-ok", ".hidden", "ab`c", "bad-one"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    store = Store.open(h / "memviewer.db")
    mgr = SessionManager(store)
    call = {"id": "c`1", "type": "function", "function": {"name": TOOL, "arguments": '{"q": "\\u001b[2J"}'}}
    mgr.import_session(
        _session("hostile", HOSTILE[:40]),
        [_turn("hostile", 0, HOSTILE), _turn("hostile", 1, "", tool_calls=[call])],
    )
    for sid in IDS:
        mgr.import_session(_session(sid), [_turn(sid, 0, f"hello from {sid[:20]}")])
    store.close()
    return h


def test_markdown_has_no_live_html_and_no_control_bytes(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.md"
    r = invoke(home, "export", "hostile", "--format", "md", "-o", str(out))
    assert r.exit_code == 0, r.output
    md = out.read_text(encoding="utf-8")
    assert "<script" not in md and "<img" not in md and "</code><" not in md
    assert "&lt;script>alert(1)&lt;/script>" in md and "&amp;amp;" in md  # shown, not run
    assert not any(ch in md for ch in "\x1b\x07\x00\x9b")
    assert "tab\tkept" in md and "red" in md
    # the only HTML is our own, balanced
    assert md.count("<code>") == md.count("</code>") == 1
    assert md.count("<details>") == md.count("</details>") == 1
    summary = next(line for line in md.splitlines() if line.startswith("<details>"))
    assert "evil&lt;/code>&lt;script>x()&lt;/script>`" in summary


def test_code_spans_cannot_be_closed_from_inside(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.md"
    assert invoke(home, "export", "ab`c", "--format", "md", "-o", str(out)).exit_code == 0
    assert "| session | ``ab`c`` |" in out.read_text(encoding="utf-8")


def test_file_names_are_unique_and_safe() -> None:
    names = [file_name(i) for i in IDS]
    assert len(set(names)) == len(names)
    assert file_name("s-ok") == "s-ok.json"  # plain ids keep their name
    assert all(len(n.encode()) <= 255 and "/" not in n and not n.startswith(".") for n in names)
    assert file_name("a/b") == file_name("a/b")  # stable


def test_praisonai_all_writes_every_session_once(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "p"
    r = invoke(home, "export", "--all", "--format", "praisonai", "-o", str(out))
    assert r.exit_code == 0, r.output
    files = sorted(out.glob("*.json"))
    assert len(files) == len(IDS) + 1  # hidden-looking ids do not become hidden files
    ids = {json.loads(p.read_text(encoding="utf-8"))["session_id"] for p in files}
    assert ids == {*IDS, "hostile"}


def _corrupt(home: Path, sid: str) -> None:
    """A session the store holds but no exporter can read (tool_calls not JSON)."""
    con = sqlite3.connect(home / "memviewer.db")
    with con:
        con.execute("UPDATE turns SET tool_calls = '{not json' WHERE session_id = ?", (sid,))
    con.close()


@pytest.mark.parametrize("fmt", ["json", "jsonl", "md", "praisonai"])
def test_one_bad_session_never_stops_the_rest(home: Path, tmp_path: Path, fmt: str) -> None:
    _corrupt(home, "bad-one")
    out = tmp_path / ("p" if fmt == "praisonai" else f"all.{fmt}")
    r = invoke(home, "export", "--all", "--format", fmt, "-o", str(out))
    assert r.exit_code == 1
    assert "failed: bad-one:" in r.stderr
    assert f"exported {len(IDS)} sessions" in r.output  # all the others
    if fmt == "praisonai":
        assert len(list(out.glob("*.json"))) == len(IDS)
    elif fmt == "json":
        doc = json.loads(out.read_text(encoding="utf-8"))  # still valid JSON
        assert "bad-one" not in {s["session"]["session_id"] for s in doc["sessions"]}
        assert len(doc["sessions"]) == len(IDS)
    else:
        assert "hello from s-ok" in out.read_text(encoding="utf-8")
