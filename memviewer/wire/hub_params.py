"""The hub's parameter schemas: which named parameters each method takes, their types
and integer bounds, checked once before a request reaches its handler (``-32602``)."""

from __future__ import annotations

from typing import Any

from memviewer.store.events import EVENT_KINDS
from memviewer.wire import protocol
from memviewer.wire.protocol import RpcError

NONE = type(None)
OPT_STR = (str, NONE)
OPT_INT = (int, NONE)

# name -> allowed types; names in REQUIRED must be present. Unknown names are
# rejected (-32602) except where a method passes extra options through.
SCHEMAS: dict[str, dict[str, tuple[type, ...]]] = {
    protocol.HELLO: {"protocol": (int,), "role": (str,), "client": (str,)},
    protocol.PUBLISH: {"commands": (list,)},
    protocol.SUBSCRIBE: {"from_seq": OPT_INT, "kinds": (list, NONE), "session_id": OPT_STR},
    protocol.UNSUBSCRIBE: {},
    protocol.EVENTS: {"from_seq": (int,), "limit": (int,), "kinds": (list, NONE), "session_id": OPT_STR},
    protocol.SESSIONS: {
        "scope": OPT_STR,
        "scope_id": OPT_STR,
        "filter": OPT_STR,
        "sort": (str,),
        "descending": (bool,),
        "limit": OPT_INT,
        "offset": (int,),
    },
    protocol.SESSION: {"session_id": (str,)},
    protocol.SEARCH: {
        "query": OPT_STR,
        "session_id": OPT_STR,
        "around": (int, str, NONE),
        "limit": (int,),
        "window": (int,),
        "scope": OPT_STR,
        "scope_id": OPT_STR,
        "record": (dict, bool, NONE),
    },
    protocol.RECALL: {
        "query": (str,),
        "scope": OPT_STR,
        "scope_id": OPT_STR,
        "top_sessions": (int,),
        "chunks_per_session": (int,),
        "top_k": (int,),
        "mode": (str,),
        "record": (dict, bool, NONE),
    },
    protocol.STATS: {},
}
REQUIRED = {protocol.PUBLISH: ("commands",), protocol.SESSION: ("session_id",), protocol.RECALL: ("query",)}
# hello ignores unknown keys (forward compatibility); recall options belong to the recall layer.
PASS_THROUGH = {protocol.HELLO, protocol.RECALL}


# Integers must fit SQLite's 64-bit INTEGER; these also have a floor.
INT64_MAX = 2**63 - 1
INT_FLOOR = {
    "from_seq": 0,
    "limit": 1,
    "offset": 0,
    "window": 0,
    "top_k": 1,
    "top_sessions": 1,
    "chunks_per_session": 1,
    "protocol": 0,
}


def check_params(method: str, params: dict[str, Any]) -> None:
    """Raise ``RpcError(INVALID_PARAMS)`` naming the first parameter ``method`` does not take."""
    schema = SCHEMAS.get(method, {})
    for name in REQUIRED.get(method, ()):
        if name not in params:
            raise RpcError(protocol.INVALID_PARAMS, f"{method}: missing parameter {name!r}")
    for name, value in params.items():
        allowed = schema.get(name)
        if allowed is None:
            if method in PASS_THROUGH:
                continue
            known = ", ".join(schema) or "none"
            raise RpcError(protocol.INVALID_PARAMS, f"{method}: unknown parameter {name!r} (known: {known})")
        if isinstance(value, bool) and bool not in allowed:
            ok = False
        else:
            ok = isinstance(value, allowed)
        if not ok:
            names = "/".join("null" if t is NONE else t.__name__ for t in allowed)
            raise RpcError(
                protocol.INVALID_PARAMS,
                f"{method}: parameter {name!r} must be {names}, not {type(value).__name__}",
            )
        if isinstance(value, int) and not isinstance(value, bool):
            floor = INT_FLOOR.get(name, -INT64_MAX)
            if not floor <= value <= INT64_MAX:
                raise RpcError(
                    protocol.INVALID_PARAMS,
                    f"{method}: parameter {name!r} must be between {floor} and {INT64_MAX}",
                )


def check_kinds(kinds: list[Any] | None) -> frozenset[str] | None:
    """The event kinds a subscription or ``events`` read asked for (None: all of them)."""
    if not kinds:
        return None
    bad = [k for k in kinds if not isinstance(k, str) or k not in EVENT_KINDS]
    if bad:
        raise RpcError(protocol.INVALID_PARAMS, f"unknown event kinds {bad!r}; known: {list(EVENT_KINDS)}")
    return frozenset(kinds)
