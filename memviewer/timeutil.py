"""Time helpers: epoch seconds inside, ISO 8601 (UTC, ``Z``) at the edges."""

from __future__ import annotations

import time
from datetime import UTC, datetime


def now() -> float:
    return time.time()


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ").replace(
        ".000000Z", "Z"
    )


def utc_minutes(ts: float) -> str:
    """``2023-05-30 21:24``: a UTC time for people, to the minute."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M")


def parse_ts(value: object) -> float | None:
    """Accept epoch seconds (int/float/numeric str) or ISO 8601; None when absent."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"not a timestamp: {value!r}")
    if isinstance(value, int | float):
        v = float(value)
        return v / 1000.0 if v > 1e12 else v  # tolerate epoch milliseconds
    if isinstance(value, str):
        s = value.strip()
        try:
            return parse_ts(float(s))
        except ValueError:
            pass
        if s.endswith("Z"):
            s = s[:-1] + "+00:00"
        dt = datetime.fromisoformat(s)
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return dt.timestamp()
    raise ValueError(f"not a timestamp: {value!r}")
