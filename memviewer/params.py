"""The one set of bounds for search and recall parameters, and the integer check they share.

Kept in the lowest layer (errors only) so the recall layers, the hub's parameter check, the
reader API (``memviewer.api``, which re-exports these) and the viewer agree on every limit.
"""

from __future__ import annotations

from typing import Any

from memviewer.errors import INVALID_ARGUMENT, MemviewerError

MAX_SEARCH_LIMIT = 1000
MAX_SEARCH_WINDOW = 500
MAX_TOP_SESSIONS = 1000
MAX_CHUNKS_PER_SESSION = 1000
MAX_TOP_K = 1000
DEFAULT_TOP_SESSIONS = 5
DEFAULT_CHUNKS_PER_SESSION = 3
DEFAULT_TOP_K = 10
RECALL_MODES = ("hierarchical", "flat")
#: The longest query search and recall take, everywhere (CLI, batch, hub, MCP): recall's model
#: reads the first 256 tokens (≈ 1,000–1,500 characters) and keyword search needs a few words;
#: a pasted text is refused with a hint rather than silently cut.
MAX_QUERY_CHARS = 4000
QUERY_HINT = "search for a few distinctive words instead of pasting a whole text"


def check_query_length(query: str) -> None:
    """``invalid_argument`` when ``query`` is longer than ``MAX_QUERY_CHARS``."""
    if len(query) > MAX_QUERY_CHARS:
        raise MemviewerError(
            INVALID_ARGUMENT,
            f"query is too long ({len(query)} characters, at most {MAX_QUERY_CHARS})",
            hint=QUERY_HINT,
        )


def int_param(
    name: str, value: Any, default: int | None, lo: int, hi: int, *, hint: str | None = None
) -> int:
    """``value`` as an int in ``[lo, hi]``; digits in a string are accepted (CLI, TOML).

    A boolean is not an integer here (JSON ``true`` must not become 1). ``default`` is used
    for None (None: the value is required). The one check behind every search and recall
    bound: keyword search, recall, the reader API, ``--vs`` and the MCP tools.
    """
    if value is None and default is not None:
        return default
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise MemviewerError(
            INVALID_ARGUMENT,
            f"{name} must be an integer from {lo} to {hi}, not {value!r}",
            hint=hint or f"pass {name} as a whole number with {lo} ≤ N ≤ {hi}",
        )
    return value
