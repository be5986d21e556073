"""``as_of``: recall as of that moment. Turns said later are not known yet (excluded in
both modes), relative dates count from it, and "N days ago" is accepted as the moment."""

from __future__ import annotations

import time

import pytest
from dated import ASKED, DAY_S, add_dated_session, cooking_sessions

from memviewer.contract.timeref import AS_OF_FORMS, parse_as_of
from memviewer.errors import MemviewerError
from memviewer.timeutil import parse_ts, utc_minutes


@pytest.fixture
def cooked(service):
    cooking_sessions(service)
    add_dated_session(
        service,
        "s-later",
        [
            (ASKED + 2 * DAY_S, "user", "I cooked sushi for dinner tonight"),
            (ASKED + 2 * DAY_S + 30, "assistant", "Sushi!"),
        ],
    )
    service.sync_index()
    return service


@pytest.mark.parametrize("mode", ["hierarchical", "flat"])
def test_turns_after_as_of_are_not_recalled(cooked, mode) -> None:
    now = cooked.recall("what did I cook for dinner?", mode=mode, scope_id="u1", top_k=20)
    assert "s-later" in {r["session_id"] for r in now["results"]}  # default: as of now
    then = cooked.recall("what did I cook for dinner?", mode=mode, scope_id="u1", top_k=20, as_of=ASKED)
    assert then["results"], "the earlier sessions are still recalled"
    assert all(r["session_id"] != "s-later" for r in then["results"])
    assert all(parse_ts(r["timestamp"]) <= ASKED for r in then["results"])
    assert then["diagnostics"]["index"]["scope_turns"] == 6  # the 6 turns said by then


@pytest.mark.parametrize("mode", ["hierarchical", "flat"])
def test_hide_later_false_keeps_later_turns_and_the_clock(cooked, mode) -> None:
    """The evaluators' switch: as_of still sets the clock for relative dates, but turns said
    later stay in the memory."""
    out = cooked.recall(
        "what did I cook for dinner?", mode=mode, scope_id="u1", top_k=20, as_of=ASKED, hide_later=False
    )
    assert "s-later" in {r["session_id"] for r in out["results"]}
    assert out["diagnostics"]["index"]["scope_turns"] == 8
    dated = cooked.recall(
        "what did I cook yesterday?", mode=mode, scope_id="u1", as_of=ASKED, hide_later=False
    )
    window = dated["diagnostics"]["time_window"]
    assert window["phrase"] == "yesterday"
    assert window["end"] <= utc_minutes(ASKED) < utc_minutes(time.time())  # counted from as_of
    with pytest.raises(MemviewerError, match="hide_later must be true or false"):
        cooked.recall("dinner", scope_id="u1", as_of=ASKED, hide_later="no")


def test_as_of_reads_days_ago() -> None:
    before = time.time()
    assert before - 6 * DAY_S - 1 <= parse_as_of("6 days ago") <= time.time() - 6 * DAY_S
    assert abs(parse_as_of("a week ago") - (time.time() - 7 * DAY_S)) < 5
    with pytest.raises(ValueError, match="as_of must be epoch seconds, an ISO 8601 date or time"):
        parse_as_of("6 days")


def test_a_bad_as_of_names_every_form_that_is_accepted(tmp_path) -> None:
    """The refusal lists each form ``parse_as_of`` reads, and each example it gives parses."""
    from click.testing import CliRunner

    from memviewer.cli import cli

    with pytest.raises(ValueError) as refused:
        parse_as_of("next tuesday")
    assert str(refused.value) == f"as_of must be {AS_OF_FORMS}, not 'next tuesday'"
    for form in ("epoch seconds", "ISO 8601", "2024/05/30 (Thu) 14:00", "days|weeks|months|years ago"):
        assert form in AS_OF_FORMS
    for example in ("2024-05-30", "2024-05-30T14:00Z", "2024/05/30 (Thu) 14:00", "6 days ago", "a week ago"):
        assert example in AS_OF_FORMS
        parse_as_of(example)  # the examples the message gives are read
    for other in ("1717077600", "3 months ago", "two years ago", "1 day ago"):
        parse_as_of(other)
    res = CliRunner().invoke(
        cli,
        [
            "--home",
            str(tmp_path / "h"),
            "--socket",
            str(tmp_path / "s"),
            "recall",
            "x",
            "--as-of",
            "next tuesday",
        ],
    )
    assert res.exit_code == 1 and res.stderr.splitlines()[0] == f"error: {refused.value}"


def test_readme_example_on_the_demo_data(service) -> None:
    """The README's replay example answers from the support session of a week ago, and
    nothing said after its as-of moment comes back."""
    from memviewer.demo.scenario import build_scenario

    service.apply_batch(build_scenario())
    service.sync_index()
    as_of = parse_as_of("6 days ago")
    out = service.recall("which token did the staging deploy reject yesterday?", as_of="6 days ago")
    rows = out["results"]
    assert rows and "XZ99" in rows[0]["content"]
    assert out["diagnostics"]["time_window"]["phrase"] == "yesterday"
    assert all(parse_ts(r["timestamp"]) <= as_of + 1 for r in rows)
