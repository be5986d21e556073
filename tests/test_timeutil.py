"""Timestamps: what ``parse_ts`` accepts, and display code that survives a bad stored time."""

from __future__ import annotations

import io
import math

import pytest
from sqlalchemy import text

from memviewer.index.summarizer import _day
from memviewer.timeutil import LATEST, TimestampRangeError, iso, parse_ts, to_datetime, utc_minutes

INSTANT = 1_781_172_800.123456  # 2026-06-11T10:13:20.123456Z


@pytest.mark.parametrize(
    "value",
    [
        1_781_172_800_123_456,  # microseconds: was read as ms, i.e. the year 58413
        1_781_172_800_123_456_000,  # nanoseconds (time.time_ns())
        1_781_172_800_123.456,  # milliseconds
        INSTANT,
        str(INSTANT),
        "2026-06-11T10:13:20.123456Z",
        "2026-06-11T12:13:20.123456+02:00",
    ],
)
def test_every_epoch_unit_and_iso_give_the_same_instant(value: object) -> None:
    assert parse_ts(value) == pytest.approx(INSTANT, abs=1e-5)


def test_the_range_ends_are_kept() -> None:
    assert parse_ts(0) == 0.0 and parse_ts("9999-12-31T23:59:59Z") == LATEST
    assert iso(LATEST) == "9999-12-31T23:59:59Z"
    assert parse_ts(None) is None and parse_ts("") is None


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (math.nan, "nan"),
        (math.inf, "inf"),
        (-math.inf, "-inf"),
        ("NaN", "'NaN'"),
        ("inf", "'inf'"),
        (1e300, "1e+300"),
        (-1e12, "-1000000000000.0"),
        (-1, "-1"),
        ("1e400", "'1e400'"),
        ("0001-01-01T00:00:00", "'0001-01-01T00:00:00'"),
        ("9999-12-31T23:59:59-05:00", "9999"),
        pytest.param(10**5000, "a huge integer", id="huge-int"),
    ],
)
def test_out_of_range_times_are_refused_naming_the_value(value: object, named: str) -> None:
    with pytest.raises(TimestampRangeError) as err:
        parse_ts(value)
    assert named in str(err.value) and len(str(err.value)) < 120


@pytest.mark.parametrize("value", [True, [1], {"t": 1}, "soon", "notatime"])
def test_values_that_are_no_time_at_all_are_value_errors(value: object) -> None:
    with pytest.raises(ValueError, match="not a timestamp"):
        parse_ts(value)


@pytest.mark.parametrize("bad", [1e300, -1e15, math.inf, -math.inf, pytest.param(10**5000, id="huge-int")])
def test_display_helpers_never_raise(bad: float) -> None:
    assert to_datetime(bad) is None
    assert iso(bad).startswith("<invalid time ") and utc_minutes(bad).startswith("<invalid time ")
    assert _day(bad) is None


def test_one_bad_stored_time_does_not_break_listing_search_or_export(service) -> None:
    """A store written before the import checks may hold such a row: everything else still works."""
    for sid in ("good", "bad"):
        service.import_session(
            {"id": sid, "title": f"{sid} one", "started_at": 1.7e9},
            [{"id": f"{sid}-t", "role": "user", "content": f"hello {sid}", "timestamp": 1.7e9}],
        )
    with service.store.write() as tx:
        tx.conn.execute(text("UPDATE turns SET timestamp = 1e300 WHERE session_id = 'bad'"))
        tx.conn.execute(text("UPDATE sessions SET last_seen_at = 1e300, started_at = -1e12 WHERE id = 'bad'"))
    listing = {s["session_id"]: s for s in service.sessions()["sessions"]}
    assert listing["bad"]["last_seen_at"] == "<invalid time 1e+300>"
    assert listing["good"]["last_seen_at"] == iso(1.7e9)
    assert {r["session_id"] for r in service.search("hello")["results"]} == {"good", "bad"}
    assert service.search(session_id="bad")["messages"][0]["timestamp"] == "<invalid time 1e+300>"
    for fmt in ("json", "jsonl", "md"):
        buf = io.StringIO()
        service.export(None, fmt, buf)
        assert "hello bad" in buf.getvalue() and "hello good" in buf.getvalue()
