"""MemviewerError's hint: an attribute for callers, inside ``data`` on the wire (docs/cli.md)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from memviewer.errors import INVALID_ARGUMENT, NOT_FOUND, MemviewerError
from memviewer.params import int_param


def test_a_hint_is_an_attribute_and_stays_inside_data_on_the_wire() -> None:
    exc = MemviewerError(NOT_FOUND, "no golden case 7", hint="`memviewer golden list` shows the ids")
    assert exc.hint == "`memviewer golden list` shows the ids"
    assert exc.to_dict() == {
        "code": NOT_FOUND,
        "message": "no golden case 7",
        "data": {"hint": "`memviewer golden list` shows the ids"},
    }
    plain = MemviewerError(NOT_FOUND, "gone")
    assert plain.hint is None and "data" not in plain.to_dict()


def test_an_error_rebuilt_from_a_hub_answer_has_its_hint() -> None:
    """The remote client rebuilds errors from ``data``; the hint comes back as the attribute."""
    wire = MemviewerError(INVALID_ARGUMENT, "bad", data={"reason": "r"}, hint="do this").to_dict()
    rebuilt = MemviewerError(wire["code"], wire["message"], data=json.loads(json.dumps(wire["data"])))
    assert rebuilt.hint == "do this" and rebuilt.data == {"reason": "r", "hint": "do this"}


def test_the_given_data_is_not_changed_by_adding_a_hint() -> None:
    shared = {"reason": "r"}
    MemviewerError(INVALID_ARGUMENT, "bad", data=shared, hint="h")
    assert shared == {"reason": "r"}


def test_a_raised_hint_reaches_the_cli_as_a_hint_line_and_a_json_field(tmp_path) -> None:
    try:
        int_param("limit", -1, None, 1, 100)
    except MemviewerError as exc:
        assert exc.hint == "pass limit as a whole number with 1 ≤ N ≤ 100"
    from memviewer.cli import cli

    home = str(tmp_path / "h")
    res = CliRunner().invoke(cli, ["--home", home, "recalls", "show", "999"])
    assert res.exit_code == 1
    assert "error: unknown recall '999'\nhint: list recorded recalls with `memviewer recalls`\n" in res.stderr
    res = CliRunner().invoke(cli, ["--home", home, "recalls", "show", "999", "--json"])
    assert json.loads(res.stdout)["hint"] == "list recorded recalls with `memviewer recalls`"
