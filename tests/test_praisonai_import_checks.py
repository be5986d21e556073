"""``memviewer import praisonai`` refuses what is not a PraisonAI session, and says what it is:
a message whose content is a number, a memviewer export; and a session naming neither a user
nor an agent gets its own scope instead of the nameless ``agent`` + "" one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memviewer.cli import cli
from memviewer.praisonai.format import NAMELESS_SCOPE, ForeignFileError, parse_session


def run(home: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--home", str(home), *args])


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (5, "messages[0].content must be a string or a list of parts, not a number"),
        (True, "messages[0].content must be a string or a list of parts, not true/false"),
        (["ok", 7], "messages[0].content[1] must be a string or an object, not a number"),
    ],
)
def test_content_of_the_wrong_type_is_refused(content: Any, words: str) -> None:
    with pytest.raises(ForeignFileError, match=words.replace("[", r"\[").replace("]", r"\]")):
        parse_session({"messages": [{"role": "user", "content": content}]}, "f")


def test_text_parts_and_null_content_still_import() -> None:
    parts = [{"type": "text", "text": "hello"}, "world"]
    _session, turns = parse_session(
        {"messages": [{"role": "user", "content": parts}, {"role": "tool", "content": None}]}, "f"
    )
    assert [t["content"] for t in turns] == ["hello\nworld", ""]


def test_cli_refuses_a_number_as_content_and_stores_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "five.json"
    bad.write_text('{"messages":[{"role":"user","content":5}]}')
    res = run(tmp_path / "h", "import", "praisonai", "--no-index", "--json", str(bad))
    assert res.exit_code == 1, res.output
    report = json.loads(res.stdout)
    assert report["imported"] == []
    assert "content must be a string" in report["failed"][0]["error"]
    listed = json.loads(run(tmp_path / "h", "sessions", "--json").stdout)
    assert listed["sessions"] == []  # no session titled "5"


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_a_memviewer_export_offered_as_praisonai_names_its_format(tmp_path: Path, fmt: str) -> None:
    home = tmp_path / "h"
    src = tmp_path / "chat.json"
    src.write_text(
        json.dumps(
            {"session_id": "c1", "agent_name": "bot", "messages": [{"role": "user", "content": "hi there"}]}
        )
    )
    assert run(home, "import", "praisonai", "--no-index", str(src)).exit_code == 0
    out = tmp_path / f"export.{fmt}"
    res = run(home, "export", "--all", "--format", fmt, "--output", str(out))
    assert res.exit_code == 0, res.output
    target = tmp_path / "export.json"  # offered under a name PraisonAI would use
    if out != target:
        out.rename(target)
    res = run(tmp_path / "h2", "import", "praisonai", "--no-index", "--json", str(target))
    assert res.exit_code == 1
    error = json.loads(res.stdout)["failed"][0]["error"]
    assert "memviewer" in error and "export" in error and "no 'messages'" not in error
    if fmt == "json":
        assert "memviewer.export v1" in error and "memviewer import json" in error
    else:
        assert "JSONL" in error


def test_an_export_reformatted_into_one_object_is_named_too() -> None:
    with pytest.raises(ForeignFileError, match="memviewer export"):
        parse_session({"format": "memviewer.export", "version": 1, "sessions": []}, "f")


def test_a_session_without_user_or_agent_gets_its_own_scope(tmp_path: Path) -> None:
    session, _ = parse_session({"session_id": "anon-1", "messages": [{"role": "user", "content": "x"}]}, "f")
    assert (session["scope"], session["scope_id"]) == (NAMELESS_SCOPE, "anon-1") == ("session", "anon-1")
    named, _ = parse_session({"agent_name": "bot", "messages": []}, "f")
    assert (named["scope"], named["scope_id"]) == ("agent", "bot")
    user, _ = parse_session({"user_id": "u1", "agent_name": "bot", "messages": []}, "f")
    assert (user["scope"], user["scope_id"]) == ("user", "u1")

    # end to end: two nameless files do not share a scope
    for sid in ("anon-1", "anon-2"):
        (tmp_path / f"{sid}.json").write_text(
            json.dumps({"session_id": sid, "messages": [{"role": "user", "content": f"hello from {sid}"}]})
        )
    home = tmp_path / "h"
    assert run(home, "import", "praisonai", "--no-index", str(tmp_path)).exit_code == 0
    rows = json.loads(run(home, "sessions", "--json").stdout)["sessions"]
    scopes = {r["session_id"]: (r["scope"], r["scope_id"]) for r in rows}
    assert scopes == {"anon-1": ("session", "anon-1"), "anon-2": ("session", "anon-2")}
