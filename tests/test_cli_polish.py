"""CLI output a new user meets first: whole session ids in recall's table, search marking
archived hits and saying "no matches", matched terms highlighted on a TTY, --help texts
without internal references, and demo counts that agree with each other."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from memviewer.cli import cli

LONG_ID = "s-demo-1aca1a5aa455892a77c4e0b1"


@pytest.fixture
def tty(monkeypatch, capsys):
    """Call it in the test: the captured stdout then acts as an 80-column colour terminal
    (what rich and print_table check)."""
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)
    return lambda: monkeypatch.setattr(sys.stdout, "isatty", lambda: True)


@pytest.fixture
def demo_home(tmp_path: Path, short_tmp: Path) -> list[str]:
    args = ["--home", str(tmp_path / "home"), "--socket", str(short_tmp / "none.sock")]
    r = CliRunner().invoke(cli, [*args, "demo", "--no-index"])
    assert r.exit_code == 0, r.output
    return args


def test_recall_table_keeps_whole_session_ids(tty, capsys) -> None:
    from memviewer.commands.recall import _human

    tty()
    result = {
        "scope": None,
        "scope_id": None,
        "results": [
            {
                "score": 0.5,
                "session_id": LONG_ID,
                "role": "assistant",
                "index": 130,
                "archived": True,
                "content": "a long answer " * 20,
            }
        ],
        "diagnostics": {
            "mode": "hierarchical",
            "stage1": [{"session_id": LONG_ID, "score": 0.7}],
            "stage2_candidates": 3,
            "post_filter": 1,
            "reranked": False,
            "timings_ms": {"total": 12.0},
            "escalations": [],
        },
    }
    _human(result)
    out = capsys.readouterr().out
    assert out.count(LONG_ID) == 2  # the table row and the stage-1 line, neither cut nor folded
    assert "1 result" in out and "1 results" not in out


def test_search_marks_archived_hits_and_says_no_matches(demo_home) -> None:
    r = CliRunner().invoke(cli, [*demo_home, "search", "server-side cursor"])
    assert r.exit_code == 0, r.output
    header, *rows = [ln for ln in r.stdout.splitlines() if ln.strip()]
    assert header.split("\t")[-1] == "anchor"
    assert rows and re.fullmatch(r"\d+ archived", rows[0].split("\t")[-1])
    none = CliRunner().invoke(cli, [*demo_home, "search", "zebra quantum marmalade"])
    assert none.exit_code == 0 and none.stdout.strip() == "no matches for 'zebra quantum marmalade'"


def test_search_that_matches_only_a_note_does_not_say_no_matches(demo_home) -> None:
    found = CliRunner().invoke(cli, [*demo_home, "search", "server-side cursor", "--json"])
    session_id = json.loads(found.stdout)["results"][0]["session_id"]
    noted = CliRunner().invoke(cli, [*demo_home, "note", session_id, "ask Priya about zanzibar"])
    assert noted.exit_code == 0, noted.output
    r = CliRunner().invoke(cli, [*demo_home, "search", "zanzibar"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith("kind\t") and lines[1].startswith(f"session\t{session_id}\t")
    assert lines[2:] == ["no turn matches 'zanzibar'; 1 tagged or noted item does (above)"]
    assert "no matches" not in r.stdout


def test_search_highlights_matched_terms_on_a_tty(tty, capsys) -> None:
    from memviewer.commands.search import _print_human

    tty()
    hit = {
        "session_id": LONG_ID,
        "title": "Orders export",
        "score": 1.0,
        "snippet": "use a Server-Side cursor for the export",
        "when": "2026-01-01T00:00:00Z",
        "anchor_index": 4,
        "messages": [{"index": 4, "archived": True}],
    }
    _print_human({"mode": "discovery", "query": "server-side cursor", "total_found": 1, "results": [hit]})
    out = capsys.readouterr().out
    assert "\x1b[1;33mServer-Side\x1b[0m" in out and "\x1b[1;33mcursor\x1b[0m" in out, out
    assert "\x1b[1;33mexport" not in out
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert "1 session matches" in plain and f"{LONG_ID}  score 1.000  at #4 (archived)" in plain


def _commands(group: click.Group, path: tuple[str, ...] = ()):
    for name, cmd in group.commands.items():
        yield (*path, name), cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*path, name))


def test_help_texts_cite_no_design_sections_and_no_rst() -> None:
    checked = 0
    for path, _cmd in [((), cli), *_commands(cli)]:
        r = CliRunner().invoke(cli, [*path, "--help"])
        assert r.exit_code == 0, (path, r.output)
        assert "DESIGN" not in r.output and "§" not in r.output, (path, r.output)
        assert "``" not in r.output, (path, r.output)
        checked += 1
    assert checked > 10


def test_demo_counts_agree_and_hints_are_runnable(tmp_path: Path, short_tmp: Path) -> None:
    args = ["--home", str(tmp_path / "home"), "--socket", str(short_tmp / "none.sock"), "demo", "--no-index"]
    out = CliRunner().invoke(cli, args).stdout
    planned = int(re.search(r"demo scenario: .*?(\d+) turns", out).group(1))
    created = int(re.search(r"created: .*?(\d+) turns", out).group(1))
    assert planned == created, out
    assert "plus 1 compaction summary turn" in out
    hints = [ln.strip() for ln in out.splitlines()[out.splitlines().index("try:") + 1 :]]
    assert hints and all(h.startswith("memviewer ") for h in hints)  # CliRunner: argv[0] is pytest
