"""Who wrote a turn, as its stored metadata says, and when turns are a chat between people.

A turn's author is its ``metadata.speaker`` (not ``metadata.name``, which OpenAI-style tool
messages use for the function); ``role`` alone cannot tell two people apart when both are
people (a REALTALK or LoCoMo chat stores them as ``user`` and ``assistant``). Turns are a chat
between named people when at least half of them name their author: the summarizer, Stage 1 and
Stage 2 of recall all decide it by this one rule. Standard library only: the index and recall
layers read it without the store's database imports.
"""

from __future__ import annotations

import json


def author_of(meta: object) -> str | None:
    """The author a turn's metadata names (a dict or its raw JSON text), or None (an agent turn,
    a blank or non-text ``speaker``, unreadable JSON)."""
    if isinstance(meta, str):  # a raw JSON column
        try:
            meta = json.loads(meta)
        except ValueError:
            return None
    value = meta.get("speaker") if isinstance(meta, dict) else None
    return value.strip() if isinstance(value, str) and value.strip() else None


def is_chat(named: int, total: int) -> bool:
    """``named`` of ``total`` turns name their author: a chat between people when at least half
    do (and there is a turn at all)."""
    return total > 0 and 2 * named >= total
