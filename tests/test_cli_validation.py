"""Argument checks that need no model: demo --rate/--duration, recall's JSON errors and
the per-line checks of ``recall --batch``."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from cli_runs import invoke
from click.testing import CliRunner

from memviewer.cli import cli
from memviewer.commands.recall import _batch_params


def _run(tmp_path: Path, *args: str):
    return invoke(tmp_path / "h", *args, socket=tmp_path / "s")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--rate", "nan"), "--rate must be a positive number of turns per second, not nan"),
        (("--rate", "inf"), "--rate must be a positive number of turns per second, not inf"),
        (("--rate", "0"), "--rate must be a positive number"),
        (("--duration", "-5"), "--duration must be a positive number of seconds, not -5.0"),
        (("--duration", "nan"), "--duration must be a positive number of seconds, not nan"),
    ],
)
def test_live_demo_refuses_non_finite_or_non_positive_rate_and_duration(tmp_path, args, message) -> None:
    res = _run(tmp_path, "demo", "--live", *args)
    assert res.exit_code == 1 and res.stderr.startswith(f"error: {message}")
    assert not (tmp_path / "h" / "spool").exists()  # refused before anything was spooled


def test_recall_json_errors_are_json_objects(tmp_path) -> None:
    res = _run(tmp_path, "recall", "--json")
    assert res.exit_code == 1 and res.stderr == ""
    assert json.loads(res.stdout) == {
        "error": "give a QUERY or --batch FILE.jsonl",
        "code": "invalid_argument",
        "hint": "memviewer recall 'what did I say about X'",
    }
    res = _run(tmp_path, "recall", "x", "--batch", "-", "--json")
    assert json.loads(res.stdout)["error"] == "give either a QUERY or --batch, not both"
    res = _run(tmp_path, "recall", "--batch", str(tmp_path / "none.jsonl"))
    assert json.loads(res.stdout)["error"].startswith("batch file ")
    res = _run(tmp_path, "recall")  # without --json: the error line, stdout stays empty
    assert res.exit_code == 1 and res.stdout == "" and res.stderr.startswith("error: give a QUERY")


def test_recall_refuses_a_query_that_is_not_utf8(tmp_path) -> None:
    res = _run(tmp_path, "recall", "deploy \udcff")  # what Python makes of argv byte 0xff
    assert res.exit_code == 1 and "error: the query is not valid UTF-8 text: 'deploy \\xff'" in res.stderr
    res = _run(tmp_path, "recall", "deploy", "--scope-id", "\ud800", "--json")
    assert res.exit_code == 1 and json.loads(res.stdout)["error"].startswith("--scope-id is not valid UTF-8")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"\xff\xfe\n", "not valid UTF-8 (byte 0xff at column 1)"),
        (b'{"query": "caf\xe9"}\n', "not valid UTF-8 (byte 0xe9 at column 15)"),
        (
            b'{"query": "\\ud800 deploy"}\n',
            "the line holds a lone UTF-16 surrogate (not valid Unicode) at query",
        ),
        (b"[" * 100_000 + b"]" * 100_000 + b"\n", "invalid JSON: nested too deeply"),
        (b'{"query": ' + b"[" * 70 + b"]" * 70 + b"}\n", "nested deeper than 64 levels"),
    ],
)
def test_a_bad_batch_line_is_that_lines_error(raw: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _batch_params(raw)


def test_a_good_batch_line_still_parses() -> None:
    assert _batch_params('{"query": "café", "top_k": 3}\r\n'.encode()) == {"query": "café", "top_k": 3}


def _named(tmp_path: Path, *args: str):
    """``_run`` as the ``memviewer`` program (the name usage errors and hints show)."""
    home = ["--home", str(tmp_path / "h"), "--socket", str(tmp_path / "s")]
    return CliRunner().invoke(cli, [*home, *args], prog_name="memviewer")


def _json_commands(group: click.Group, path: tuple[str, ...] = ()):
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            yield from _json_commands(cmd, (*path, name))
        elif any(isinstance(p, click.Option) and "--json" in p.opts for p in cmd.params):
            yield (*path, name)


JSON_COMMANDS = list(_json_commands(cli))


def test_every_json_command_is_found() -> None:
    assert len(JSON_COMMANDS) >= 20 and ("recall",) in JSON_COMMANDS and ("eval", "golden") in JSON_COMMANDS


@pytest.mark.parametrize("path", JSON_COMMANDS, ids=" ".join)
def test_a_usage_error_with_json_is_the_json_error_object(tmp_path: Path, path: tuple[str, ...]) -> None:
    """An unknown option given with --json: one JSON object on stdout, nothing on stderr, exit 2."""
    res = _named(tmp_path, *path, "--json", "--no-such-option")
    assert res.exit_code == 2 and res.stderr == "", res.output
    out = json.loads(res.stdout)
    head = {"success": False, "mode": None} if path == ("search",) else {}  # search's own error shape
    assert out == {
        **head,
        "error": "No such option '--no-such-option'.",
        "code": "invalid_argument",
        "hint": f"see 'memviewer {' '.join(path)} --help'",
    }
    assert not (tmp_path / "h" / "memviewer.db").exists()  # refused before anything ran


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ("recall", "--limit", "-3", "--json", "x"),
            "Invalid value for '--top-k' / '--limit': -3 is not in the range 1<=x<=1000.",
        ),
        (
            ("search", "--json", "--limit", "abc", "x"),
            "Invalid value for '--limit': 'abc' is not a valid integer range.",  # IntRange's words
        ),
        (
            ("search", "--json", "--window", "501", "x"),
            "Invalid value for '--window': 501 is not in the range 0<=x<=500.",
        ),
        (("golden", "add", "q", "--json"), "Missing option '--turn'."),
        (("golden", "remove", "--json"), "Missing argument 'CASE_ID'."),
        (
            ("tail", "--from-seq", "x", "--json"),
            "Invalid value for '--from-seq': 'x' is not a valid integer.",
        ),
    ],
)
def test_bad_values_and_missing_arguments_with_json(
    tmp_path: Path, args: tuple[str, ...], error: str
) -> None:
    res = _run(tmp_path, *args)
    assert res.exit_code == 2 and res.stderr == "" and json.loads(res.stdout)["error"] == error


def test_a_usage_error_without_json_keeps_clicks_usage_text(tmp_path: Path) -> None:
    for args in (("recall", "--limit", "-3", "x"), ("search", "--bogus", "--", "--json"), ("eval", "--json")):
        res = _named(tmp_path, *args)
        assert res.exit_code == 2 and res.stdout == "", args
        assert res.stderr.startswith("Usage: memviewer ") and "\nError: " in res.stderr, args


def test_search_and_recall_share_one_query_length_bound(service) -> None:
    """One contract: the longest query is the same for keyword search and recall (and so for
    the CLI, --batch, the hub and MCP, which all call these), refused with the same error."""
    from memviewer.errors import MemviewerError
    from memviewer.params import MAX_QUERY_CHARS

    service.import_session(
        {"id": "s-q", "title": "q", "started_at": 1_700_000_000.0},
        [{"id": "t-q", "role": "user", "content": "refund the card", "timestamp": 1_700_000_000.0}],
    )
    longest = ("refund " * MAX_QUERY_CHARS)[:MAX_QUERY_CHARS]
    assert service.search(longest)["success"]
    assert "results" in service.recall(longest)
    too_long = longest + "x"
    refused = service.search(too_long)
    assert refused["success"] is False and refused["code"] == "invalid_argument"
    with pytest.raises(MemviewerError) as err:
        service.recall(too_long)
    assert err.value.code == "invalid_argument" and err.value.message == refused["error"]
    assert (
        err.value.message
        == f"query is too long ({MAX_QUERY_CHARS + 1} characters, at most {MAX_QUERY_CHARS})"
    )
