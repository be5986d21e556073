"""Search and recall bounds as plain names, for the recall layers and the viewer.

Every value here is read from the request models (``memviewer.contract.requests``), the one
declaration; nothing is written twice. The checks themselves live in ``contract.checks``.
"""

from __future__ import annotations

from memviewer.contract.checks import (
    AS_OF_FORMS,
    MAX_QUERY_CHARS,
    QUERY_HINT,
    check_query_length,
    int_param,
)
from memviewer.contract.requests import (
    RECALL_MODES,
    RecallParams,
    SearchParams,
    default,
    int_bounds,
    int_fields,
)

__all__ = [
    "AS_OF_FORMS",
    "DEFAULT_CHUNKS_PER_SESSION",
    "DEFAULT_TOP_K",
    "DEFAULT_TOP_SESSIONS",
    "MAX_CHUNKS_PER_SESSION",
    "MAX_QUERY_CHARS",
    "MAX_SEARCH_LIMIT",
    "MAX_SEARCH_WINDOW",
    "MAX_TOP_K",
    "MAX_TOP_SESSIONS",
    "QUERY_HINT",
    "RECALL_INT_BOUNDS",
    "RECALL_MODES",
    "SEARCH_INT_BOUNDS",
    "check_query_length",
    "int_param",
]

MAX_SEARCH_LIMIT = int_bounds(SearchParams, "limit")[1]
MAX_SEARCH_WINDOW = int_bounds(SearchParams, "window")[1]
MAX_TOP_SESSIONS = int_bounds(RecallParams, "top_sessions")[1]
MAX_CHUNKS_PER_SESSION = int_bounds(RecallParams, "chunks_per_session")[1]
MAX_TOP_K = int_bounds(RecallParams, "top_k")[1]
DEFAULT_TOP_SESSIONS: int = default(RecallParams, "top_sessions")
DEFAULT_CHUNKS_PER_SESSION: int = default(RecallParams, "chunks_per_session")
DEFAULT_TOP_K: int = default(RecallParams, "top_k")
#: ``(ge, le)`` of every integer parameter, by name.
SEARCH_INT_BOUNDS = int_fields(SearchParams)
RECALL_INT_BOUNDS = int_fields(RecallParams)
