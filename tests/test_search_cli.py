"""`memviewer search`: tables for people, the §5.1 contract under --json, non-zero exits on errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runs import invoke

from memviewer.praisonai.importer import import_paths
from memviewer.session.manager import SessionManager
from memviewer.store.db import Store

FIXTURES = Path(__file__).parent / "fixtures" / "praisonai"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    store = Store.open(h / "memviewer.db")
    assert not import_paths(SessionManager(store).import_session, [FIXTURES]).failed
    store.close()
    return h


def _run(home: Path, *args: str):
    return invoke(home, "search", *args, catch_exceptions=False)


def test_discovery_json_and_table(home: Path) -> None:
    r = _run(home, "deploy token XZ99", "--json", "--window", "1")
    assert r.exit_code == 0
    data = json.loads(r.stdout)
    assert data["success"] and data["mode"] == "discovery" and data["total_found"] == 1
    hit = data["results"][0]
    assert hit["session_id"] == "billing-review-8c1e" and len(hit["messages"]) == 3
    table = _run(home, "deploy token XZ99")
    assert table.exit_code == 0
    header, row = table.stdout.strip().split("\n")
    assert header.split("\t") == ["id", "title", "score", "snippet", "when", "anchor"]
    assert row.startswith("billing-review-8c1e\tBilling migration review\t") and "XZ99" in row
    assert "--session billing-review-8c1e --around" in table.stderr


def test_scroll_and_browse(home: Path) -> None:
    r = _run(home, "--session", "billing-review-8c1e", "--around", "4", "--window", "1")
    lines = r.stdout.strip().split("\n")
    assert r.exit_code == 0 and len(lines) == 4
    assert lines[1].split("\t")[:3] == ["3", "archived", "assistant"]
    assert lines[1].split("\t")[4] == "→ vault_lookup(…)"  # a bare tool call shows the call
    assert lines[3].split("\t")[:3] == ["5", "archived", "assistant"]
    near = json.loads(_run(home, "--session", "billing-review-8c1e", "--around", "4", "--json").stdout)
    bare = next(m for m in near["messages"] if m["index"] == 3)
    assert bare["content"] == "" and "tool_calls" not in bare  # the §5.1 shape is unchanged
    data = json.loads(_run(home, "--session", "billing-review-8c1e", "--json").stdout)
    assert data["around_message_id"] == "10" and data["messages"][-1]["archived"] is False
    browse = json.loads(_run(home, "--limit", "2", "--json").stdout)
    assert browse["mode"] == "browse" and browse["total_found"] == 5
    assert [r["session_id"] for r in browse["results"]] == ["cjk-planning-77", "refund-policy-a2"]
    assert _run(home, "--scope-id", "bob", "--json").stdout.count("refund-policy") == 2


@pytest.mark.parametrize(
    "args",
    [
        ("--session", "ghost"),
        ("--session", "billing-review-8c1e", "--around", "x"),
        ("--session", "billing-review-8c1e", "--around", "99"),
        ("***",),
    ],
)
def test_errors_exit_non_zero(home: Path, args: tuple[str, ...]) -> None:
    r = _run(home, *args, "--json")
    assert r.exit_code != 0
    data = json.loads(r.stdout)
    assert data["success"] is False and data["error"] and data["hint"]
    human = _run(home, *args)
    assert human.exit_code != 0 and human.stderr.startswith("error: ") and "hint: " in human.stderr


@pytest.mark.parametrize(
    ("args", "bound"), [(("--limit", "0"), "1<=x<=1000"), (("--window", "-1"), "0<=x<=500")]
)
def test_out_of_range_numbers_are_usage_errors(home: Path, args: tuple[str, ...], bound: str) -> None:
    """``--limit`` and ``--window`` take their range from ``SearchParams`` (as recall's
    options do): refused by click before anything runs, in search's JSON error shape."""
    r = _run(home, "x", *args, "--json")
    assert r.exit_code == 2
    data = json.loads(r.stdout)
    assert data["success"] is False and data["mode"] is None and data["code"] == "invalid_argument"
    assert bound in data["error"] and data["hint"]
