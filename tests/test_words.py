"""Counted words: ``plural`` agrees with its number, and no CLI message builds a count
of sessions, turns … by hand (the audit found "1 sessions", "imported 1 sessions")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memviewer.words import plural

ROOT = Path(__file__).parents[1] / "memviewer"


@pytest.mark.parametrize(
    ("n", "word", "many", "said"),
    [
        (0, "session", None, "0 sessions"),
        (1, "session", None, "1 session"),
        (2, "turn", None, "2 turns"),
        (1204, "turn", None, "1,204 turns"),
        (1, "session summary", "session summaries", "1 session summary"),
        (3, "session summary", "session summaries", "3 session summaries"),
    ],
)
def test_plural_agrees_with_its_number(n: int, word: str, many: str | None, said: str) -> None:
    assert plural(n, word, many) == said


# A placeholder followed by a counted noun in the plural ("{n} sessions") or by "(s)".
_BY_HAND = re.compile(
    r"\{[^{}]+\}\s*(sessions|turns|episodes|files|events|tokens|questions|conversations|results|rows|values"
    r"|re-runs|summaries|cases|runs)\b|[a-z]\(s\)(\s+[a-z]|[:\x27\"])"
)


def test_no_cli_message_counts_by_hand() -> None:
    files = [
        ROOT / "cli.py",
        *sorted((ROOT / "commands").glob("*.py")),
        ROOT / "tui" / "notices.py",  # the viewer's lag header and recall notice
    ]
    found = [
        f"{p.name}:{i}: {line.strip()}"
        for p in files
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if _BY_HAND.search(line) and not line.lstrip().startswith("#")
    ]
    assert found == []
