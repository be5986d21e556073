"""Relative time references in a recall query ("a week ago", "last Saturday").

People ask memory about *when*: "which book did I finish a week ago?" names no
topic word that the session shares, but it names a date relative to the moment
of asking. ``parse`` turns such a phrase into a ``TimeWindow`` around
``as_of`` (the time of the question; "now" for a live agent, the question date
in an evaluation), and ``TimeWindow.closeness`` scores a session's or turn's
time against it: 1 inside the window, decaying with the distance outside it.

Only unambiguous, common English forms are read; anything else returns None and
recall scores as if no date were named. The window is deliberately wide (a
quarter of the distance back, at least a day and a half each side) because
people round: "a month ago" may mean 24 or 40 days. "in the last week" is the
trailing seven days; a bare "last week" the week before this one. Weekdays
("last Saturday") are counted in UTC, like every time memviewer shows.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime

# Every form ``parse_as_of`` reads, named in its error (CLI, viewer, hub, MCP alike).
from memviewer.contract.checks import AS_OF_FORMS

DAY = 86_400.0
UNITS = {"day": DAY, "week": 7 * DAY, "month": 30 * DAY, "year": 365 * DAY}
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "a couple": 2,
    "couple of": 2,
    "a few": 3,
    "few": 3,
    "several": 4,
}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUM = (
    r"(\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
    r"a\s+couple(?:\s+of)?|couple\s+of|a\s+few|few|several)"
)
_AGO = re.compile(rf"\b{_NUM}\s+(day|week|month|year)s?\s+ago\b", re.IGNORECASE)
_PAST = re.compile(
    rf"\b(?:in\s+|over\s+|during\s+)?the\s+(?:past|last)\s+(?:{_NUM}\s+)?(day|week|month|year)s?\b",
    re.IGNORECASE,
)
_LAST = re.compile(r"\blast\s+(week|month|year|weekend|" + "|".join(_WEEKDAYS) + r")\b", re.IGNORECASE)
_YESTERDAY = re.compile(r"\byesterday\b", re.IGNORECASE)
MIN_SLACK = 1.5 * DAY


@dataclass(frozen=True)
class TimeWindow:
    """``[start, end]`` (epoch seconds) plus ``slack``, the decay length outside it."""

    start: float
    end: float
    slack: float
    phrase: str

    def closeness(self, lo: float, hi: float | None = None) -> float:
        """1.0 if ``[lo, hi]`` overlaps the window, else ``exp(-gap / slack)``."""
        hi = lo if hi is None else hi
        if hi >= self.start and lo <= self.end:
            return 1.0
        gap = self.start - hi if hi < self.start else lo - self.end
        return math.exp(-gap / self.slack)

    def public(self) -> dict[str, object]:
        from memviewer.timeutil import utc_minutes

        return {
            "phrase": self.phrase,
            "start": utc_minutes(self.start),
            "end": utc_minutes(self.end),
            "slack_days": round(self.slack / DAY, 2),
        }


_LME_DATE = re.compile(r"^(\d{4})/(\d{1,2})/(\d{1,2})(?:\s*\([A-Za-z]{3}\))?(?:\s+(\d{1,2}):(\d{2}))?$")
_EARLIEST, _LATEST = 0.0, 253_402_300_799.0  # 1970-01-01 … 9999-12-31 23:59:59 UTC


def parse_as_of(value: object) -> float:
    """Epoch seconds of "the moment of asking": what ``timeutil.parse_ts`` reads (epoch
    seconds or milliseconds, ISO 8601 with naive dates as UTC), LongMemEval's
    ``2023/05/30 (Tue) 23:40``, and "N days/weeks/months/years ago" counted from now.

    Raises ValueError with a message fit for the user for anything else, including
    NaN, infinities, overflowing numbers and dates outside the years 1970–9999.
    """
    import time

    from memviewer.timeutil import TimestampRangeError, parse_ts

    if isinstance(value, str) and (m := _AGO.fullmatch(value.strip())):
        return time.time() - _count(m.group(1)) * UNITS[m.group(2).lower()]  # "6 days ago"
    if isinstance(value, str) and (m := _LME_DATE.match(value.strip())):
        y, mo, d, hh, mm = m.groups()
        value = f"{y}-{int(mo):02d}-{int(d):02d}T{int(hh or 0):02d}:{mm or '00'}"
    try:
        epoch = parse_ts(value)
    except TimestampRangeError:
        epoch = math.nan  # a number, but no date: the range message below
    except (ValueError, OverflowError, TypeError):
        raise ValueError(f"as_of must be {AS_OF_FORMS}, not {value!r}") from None
    if epoch is None or not (math.isfinite(epoch) and _EARLIEST <= epoch <= _LATEST):
        raise ValueError(f"as_of must be a date between 1970 and 9999, not {value!r}")
    return epoch


def _count(word: str) -> int:
    w = " ".join(word.lower().split())
    return int(w) if w.isdigit() else _NUMBERS[w]


def _around(center: float, back: float, phrase: str) -> TimeWindow:
    half = max(MIN_SLACK, back / 4)
    return TimeWindow(center - half, center + half, half, phrase)


def parse(query: str, as_of: float) -> TimeWindow | None:
    """The first relative date named in ``query``, as a window before ``as_of``."""
    if m := _AGO.search(query):
        back = _count(m.group(1)) * UNITS[m.group(2).lower()]
        return _around(as_of - back, back, m.group(0))
    if m := _PAST.search(query):
        span = _count(m.group(1) or "one") * UNITS[m.group(2).lower()]
        return TimeWindow(as_of - span, as_of, max(MIN_SLACK, span / 4), m.group(0))
    if m := _YESTERDAY.search(query):
        return TimeWindow(as_of - 2 * DAY, as_of, DAY, m.group(0))
    if m := _LAST.search(query):
        what = m.group(1).lower()
        if what in UNITS:
            span = UNITS[what]
            return TimeWindow(as_of - 2 * span, as_of - span / 2, max(MIN_SLACK, span / 4), m.group(0))
        today = datetime.fromtimestamp(as_of, UTC)
        day_start = as_of - (today.hour * 3600 + today.minute * 60 + today.second)
        if what == "weekend":
            back = (today.weekday() - 5) % 7 or 7  # the most recent Saturday before today
            start = day_start - back * DAY
            return TimeWindow(start, start + 2 * DAY, DAY, m.group(0))
        back = (today.weekday() - _WEEKDAYS.index(what)) % 7 or 7
        start = day_start - back * DAY
        return TimeWindow(start, start + DAY, DAY, m.group(0))
    return None
