"""Turns the user marked "expected" (Session screen ``w``) for the Recall screen's why-not.

They live on the app for the viewer's lifetime (nothing is stored): the Recall
screen follows each through every stage of its next run, and ``a`` there keeps the
query and these turns as a golden case.
"""

from __future__ import annotations

from typing import Any

MAX_EXPECTED = 5  # the oldest mark goes when a sixth is added
_ATTR = "memviewer_expected_turns"


def expected_turns(app: Any) -> list[dict[str, Any]]:
    """The marked turns, oldest first: ``{"turn_id", "session_id", "index"}``."""
    marks = getattr(app, _ATTR, None)
    if marks is None:
        marks = []
        setattr(app, _ATTR, marks)
    return marks


def toggle_expected(app: Any, turn: dict[str, Any]) -> bool:
    """Mark ``turn`` expected, or unmark it when it already is; True when now marked."""
    marks = expected_turns(app)
    for i, mark in enumerate(marks):
        if mark["turn_id"] == turn["turn_id"]:
            del marks[i]
            return False
    marks.append({"turn_id": turn["turn_id"], "session_id": turn["session_id"], "index": turn["index"]})
    del marks[:-MAX_EXPECTED]
    return True


def clear_expected(app: Any) -> None:
    expected_turns(app).clear()
