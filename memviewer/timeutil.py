"""Time helpers: epoch seconds inside, ISO 8601 (UTC, ``Z``) at the edges.

Stored times are epoch seconds between 1970 and 9999 (``parse_ts`` refuses
anything else on the way in). The display helpers never raise on a stored
value: a store written by an older version may hold an out-of-range time, and
one bad row must not take down a listing, a search or an export of the home.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

EARLIEST = 0.0  # 1970-01-01T00:00:00Z
LATEST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()  # exact in a float
# A bare number is read in the coarsest unit that gives a date up to 9999: seconds, then
# milliseconds, microseconds, nanoseconds (so ``time.time_ns()`` values work too).
_UNITS = (1.0, 1e3, 1e6, 1e9)


class TimestampRangeError(ValueError):
    """A number or date that is well-formed but no time memviewer stores (NaN, year 58413)."""


def now() -> float:
    return time.time()


def to_datetime(ts: float | None) -> datetime | None:
    """``ts`` as an aware UTC datetime; None when absent or not representable."""
    if ts is None or isinstance(ts, bool):
        return None
    try:
        return datetime.fromtimestamp(ts, tz=UTC)
    except (ValueError, OverflowError, OSError, TypeError):
        return None


def invalid_marker(ts: object) -> str:
    """What the display helpers show for a stored time no calendar can hold."""
    return f"<invalid time {_show(ts)}>"


_DAY_PREFIX: dict[int, str] = {}  # days since 1970 -> "2023-05-30T" (a few thousand at most)
# "HH:MM:" per minute of the day and "SS" per second: joining table entries is a third of the
# cost of four ``:02d`` format specs (a search formats ~80 stamps: ~1.2 against ~3 µs each).
_HOUR_MINUTE = [f"{h:02d}:{m:02d}:" for h in range(24) for m in range(60)]
_SECOND = [f"{s:02d}" for s in range(60)]
_modf = math.modf


def iso(ts: float | None) -> str | None:
    """``2023-05-30T21:24:00Z`` (microseconds only when present); never raises."""
    if ts is None:
        return None
    if (type(ts) is float or type(ts) is int) and EARLIEST <= ts < LATEST:
        # The text ``datetime.fromtimestamp(ts, UTC).isoformat()`` gives, built from the day's
        # date (formatted once per day) and integer arithmetic: a search formats ~80 stamps.
        # Microseconds are rounded as ``fromtimestamp`` rounds them (half to even).
        frac, whole = _modf(ts)
        us = round(frac * 1e6)
        secs = int(whole)
        if us >= 1_000_000:
            us -= 1_000_000
            secs += 1
        day, sec = divmod(secs, 86400)
        prefix = _DAY_PREFIX.get(day)
        if prefix is None:
            if len(_DAY_PREFIX) > 100_000:
                _DAY_PREFIX.clear()
            prefix = _DAY_PREFIX[day] = time.strftime("%Y-%m-%dT", time.gmtime(day * 86400))
        minute, second = divmod(sec, 60)
        if us:  # str(us + 10**6)[1:]: the six digits, zero-padded
            return prefix + _HOUR_MINUTE[minute] + _SECOND[second] + "." + str(us + 1_000_000)[1:] + "Z"
        return prefix + _HOUR_MINUTE[minute] + _SECOND[second] + "Z"
    dt = to_datetime(ts)
    if dt is None:
        return invalid_marker(ts)
    if dt.year >= 1000:  # isoformat is the same text, several times faster (search builds many)
        return dt.isoformat()[:-6] + "Z"
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ").replace(".000000Z", "Z")


def utc_minutes(ts: float) -> str:
    """``2023-05-30 21:24``: a UTC time for people, to the minute; never raises."""
    dt = to_datetime(ts)
    return invalid_marker(ts) if dt is None else dt.strftime("%Y-%m-%d %H:%M")


def _show(value: object) -> str:
    """A short repr for error messages (a 5000-digit int cannot even be repr'd)."""
    try:
        text = repr(value)
    except ValueError:
        return "a huge integer"
    return text if len(text) <= 40 else text[:39] + "…"


def _epoch(value: object, v: float) -> float:
    if not math.isfinite(v):
        raise TimestampRangeError(f"not a timestamp: {_show(value)} (not a finite number)")
    for unit in _UNITS:
        if v <= LATEST * unit:
            seconds = v / unit
            break
    else:
        seconds = v  # beyond nanoseconds of year 9999: refused just below
    if not EARLIEST <= seconds <= LATEST:
        raise TimestampRangeError(f"timestamp {_show(value)} is outside the years 1970..9999")
    return seconds


def parse_ts(value: object) -> float | None:
    """Epoch seconds from epoch s/ms/µs/ns (int, float or numeric str) or ISO 8601; None when absent.

    Raises ValueError naming the value for anything else, including NaN, the
    infinities and dates outside the years 1970..9999.
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"not a timestamp: {_show(value)}")
    if isinstance(value, int | float):
        try:
            v = float(value)
        except OverflowError:
            raise TimestampRangeError(f"timestamp {_show(value)} is outside the years 1970..9999") from None
        return _epoch(value, v)
    if isinstance(value, str):
        s = value.strip()
        try:
            v = float(s)
        except (ValueError, OverflowError):
            pass
        else:
            return _epoch(value, v)
        if s.endswith(("Z", "z")):
            s = s[:-1] + "+00:00"
        try:
            dt = datetime.fromisoformat(s)
        except ValueError:
            raise ValueError(
                f"not a timestamp: {_show(value)} (epoch seconds or ISO 8601 expected)"
            ) from None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        try:
            seconds = dt.timestamp()
        except (OverflowError, OSError, ValueError):
            raise TimestampRangeError(f"timestamp {_show(value)} is outside the years 1970..9999") from None
        if not EARLIEST <= seconds <= LATEST:
            raise TimestampRangeError(f"timestamp {_show(value)} is outside the years 1970..9999")
        return seconds
    raise ValueError(f"not a timestamp: {_show(value)}")
