"""Relative dates in recall queries (``memviewer.contract.timeref``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memviewer.contract import timeref
from memviewer.contract.timeref import DAY

# Tuesday 2023-02-07 09:00 UTC
NOW = datetime(2023, 2, 7, 9, 0, tzinfo=UTC).timestamp()


def day(y: int, m: int, d: int, h: int = 12) -> float:
    return datetime(y, m, d, h, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("query", "inside", "outside"),
    [
        ("Which book did I finish a week ago?", day(2023, 1, 31), day(2023, 1, 24)),
        ("What did I buy 10 days ago?", day(2023, 1, 28), day(2023, 2, 6)),
        ("what did I cook two weeks ago", day(2023, 1, 24), day(2023, 2, 5)),
        ("the concert a couple of months ago", day(2022, 12, 8), day(2023, 2, 1)),
        ("Who did I meet yesterday?", day(2023, 2, 6), day(2023, 2, 3)),
        ("Where did I go last Saturday?", day(2023, 2, 4), day(2023, 2, 5)),
        ("Where did I go last Tuesday?", day(2023, 1, 31), day(2023, 2, 7, 8)),
        ("what did we do last weekend", day(2023, 2, 5), day(2023, 2, 3)),
        ("How many books did I read in the past three months?", day(2022, 11, 20), day(2022, 10, 1)),
        ("What happened last month?", day(2023, 1, 5), day(2023, 2, 6)),
        ("what did I eat in the last week", day(2023, 2, 6), day(2023, 1, 25)),  # trailing 7 days
        ("my runs over the past month", day(2023, 1, 20), day(2022, 12, 20)),
    ],
)
def test_phrases_become_windows_before_the_moment_of_asking(
    query: str, inside: float, outside: float
) -> None:
    window = timeref.parse(query, NOW)
    assert window is not None
    assert window.closeness(inside) == 1.0
    assert window.closeness(outside) < 1.0
    assert window.end <= NOW + 1


@pytest.mark.parametrize(
    "query",
    [
        "What is my dog's name?",
        "the last time I went skiing",
        "a week",
        "ago I said",
        "what did you recommend for breakfast",
        "two weeks later",
    ],
)
def test_queries_without_a_relative_date_have_no_window(query: str) -> None:
    assert timeref.parse(query, NOW) is None


def test_closeness_decays_with_distance_and_counts_span_overlap() -> None:
    window = timeref.parse("a week ago", NOW)
    assert window is not None
    near, far = window.closeness(window.start - DAY), window.closeness(window.start - 5 * DAY)
    assert 1.0 > near > far > 0.0
    # A session that started before the window and ran into it overlaps it.
    assert window.closeness(window.start - 10 * DAY, window.start + 60) == 1.0


def test_public_form_names_the_phrase_and_dates() -> None:
    window = timeref.parse("Which book did I finish a week ago?", NOW)
    assert window is not None
    pub = window.public()
    assert pub["phrase"] == "a week ago"
    assert pub["start"].startswith("2023-01-") and pub["end"].startswith("2023-02-0")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1_675_760_400, NOW),
        (1_675_760_400.0, NOW),
        ("1675760400", NOW),
        ("2023-02-07T09:00:00Z", NOW),
        ("2023-02-07T10:00:00+01:00", NOW),
        ("2023-02-07 09:00", NOW),
        ("2023-02-07", NOW - 9 * 3600),
        ("2023/02/07 (Tue) 09:00", NOW),
        ("2023/2/7", NOW - 9 * 3600),
        (1_675_760_400_000, NOW),  # epoch milliseconds, as everywhere else in memviewer
    ],
)
def test_as_of_forms(value: object, expected: float) -> None:
    assert timeref.parse_as_of(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "next tuesday",
        "",
        "nan",
        "inf",
        "-inf",
        "1e30",
        float("nan"),
        -5,
        True,
        None,
        [1],
        "2023/13/40",
        "10000-01-01",
        10**400,
        "1" + "0" * 400,
    ],
)
def test_bad_as_of_is_a_clear_value_error(value: object) -> None:
    with pytest.raises(ValueError, match="as_of must be"):
        timeref.parse_as_of(value)
