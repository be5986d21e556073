"""Sessions with known dates, for the tests of relative dates in recall ("a week ago")."""

from __future__ import annotations

from typing import Any

ASKED = 1_675_760_400.0  # the moment of asking: 2023-02-07 09:00 UTC
DAY_S = 86_400.0


def add_dated_session(
    service: Any,
    sid: str,
    turns: list[tuple[float, str, str]],
    *,
    status: str = "closed",
    scope_id: str = "u1",
) -> None:
    """Import ``sid`` (scope user/``scope_id``) with ``(timestamp, role, content)`` turns;
    its span is that of its turns."""
    times = [t for t, _, _ in turns]
    service.import_session(
        {
            "id": sid,
            "agent": "a",
            "scope": "user",
            "scope_id": scope_id,
            "title": sid,
            "started_at": min(times),
            "last_seen_at": max(times),
            "status": status,
        },
        [
            {"id": f"{sid}-{i}", "role": role, "content": content, "timestamp": t}
            for i, (t, role, content) in enumerate(turns)
        ],
    )


def cooking_sessions(service: Any, asked: float = ASKED) -> None:
    """s-month / s-week / s-day: a dish cooked 30, 7 and 1 days before ``asked``; indexed."""
    for sid, days_back, dish in (
        ("s-month", 30, "lasagne"),
        ("s-week", 7, "paella"),
        ("s-day", 1, "risotto"),
    ):
        t0 = asked - days_back * DAY_S
        add_dated_session(
            service,
            sid,
            [
                (t0, "user", f"I cooked {dish} for dinner tonight"),
                (t0 + 30, "assistant", f"Lovely, {dish} is a classic"),
            ],
        )
    service.sync_index()
