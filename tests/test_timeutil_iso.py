"""``timeutil.iso`` formats stored times with integer arithmetic; the text must be exactly what
``datetime.fromtimestamp(ts, UTC).isoformat()`` gives (search answers are compared byte for byte)."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

from memviewer.timeutil import LATEST, iso


def _reference(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat()[:-6] + "Z"


def test_iso_is_the_datetime_text_for_every_kind_of_stored_time() -> None:
    rng = random.Random(17)
    values: list[float] = [rng.uniform(0, LATEST) for _ in range(20_000)]
    values += [float(rng.randint(0, 2**33)) for _ in range(2_000)]
    base = [math.floor(rng.uniform(0, 4e9)) for _ in range(500)]
    # half-microsecond ties (rounded half to even), the carry into the next second, day ends
    values += [b + r / 1e6 for b in base for r in (0.5, 1.5, 2.5, 999_999.4, 999_999.5, 999_999.6)]
    values += [b * 86400 - 1e-7 for b in range(1, 400)] + [0.0, 1e-7, 5e-7, 1.5e-6, LATEST - 1, LATEST - 0.4]
    assert [iso(v) for v in values] == [_reference(v) for v in values]
    ints = [rng.randint(0, 2**33) for _ in range(2_000)]
    assert [iso(v) for v in ints] == [_reference(v) for v in ints]


def test_iso_outside_the_fast_range_keeps_its_old_answers() -> None:
    assert iso(None) is None
    assert iso(LATEST) == "9999-12-31T23:59:59Z"
    assert iso(-1.5) == _reference(-1.5)
    assert str(iso(float("nan"))).startswith("<invalid time")
    assert str(iso(1e20)).startswith("<invalid time")
    assert iso(True) == "<invalid time True>"  # a bool is no stored time
