"""The checks and messages every search and recall bound shares, without pydantic.

The recall layers call these on every request (``int_param``, ``check_query_length``); the
request models (``memviewer.contract.requests``) build their error messages with the same
functions, so a bound is refused with one wording whichever front end asked.
"""

from __future__ import annotations

from typing import Any

from memviewer.errors import INVALID_ARGUMENT, MemviewerError

#: The longest query search and recall take, everywhere (CLI, batch, hub, MCP): recall's model
#: reads the first 256 tokens (≈ 1,000–1,500 characters) and keyword search needs a few words;
#: a pasted text is refused with a hint rather than silently cut.
MAX_QUERY_CHARS = 4000
QUERY_HINT = "search for a few distinctive words instead of pasting a whole text"
#: Every form ``recall.timeref.parse_as_of`` reads, named in its errors (CLI, viewer, hub, MCP).
AS_OF_FORMS = (
    "epoch seconds, an ISO 8601 date or time (2024-05-30, 2024-05-30T14:00Z), "
    "a date written 2024/05/30 (Thu) 14:00, or 'N days|weeks|months|years ago' "
    "('6 days ago', 'a week ago')"
)


def too_long_message(name: str, length: int, most: int) -> str:
    return f"{name} is too long ({length} characters, at most {most})"


def check_query_length(query: str) -> None:
    """``invalid_argument`` when ``query`` is longer than ``MAX_QUERY_CHARS``."""
    if len(query) > MAX_QUERY_CHARS:
        raise MemviewerError(
            INVALID_ARGUMENT,
            too_long_message("query", len(query), MAX_QUERY_CHARS),
            hint=QUERY_HINT,
        )


def whole_number(value: Any) -> Any:
    """Digits in a string as an int (CLI, TOML, MCP's digit strings); anything else as is."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return value


def int_error(name: str, value: Any, lo: int, hi: int, *, hint: str | None = None) -> MemviewerError:
    """The one refusal of an integer parameter outside ``[lo, hi]`` (or not an integer)."""
    return MemviewerError(
        INVALID_ARGUMENT,
        f"{name} must be an integer from {lo} to {hi}, not {value!r}",
        hint=hint or f"pass {name} as a whole number with {lo} ≤ N ≤ {hi}",
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
    value = whole_number(value)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise int_error(name, value, lo, hi, hint=hint)
    return value
