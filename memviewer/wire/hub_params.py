"""The hub's parameter schemas: which named parameters each method takes, their types
and integer bounds, checked once before a request reaches its handler (``-32602``).

``search`` and ``recall`` are derived from the request models (``memviewer.contract``):
their names, types, required keys and integer bounds, plus the few keys only the hub
takes (``record``; ``with_tool_calls``, a display option)."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel

from memviewer.contract.requests import RecallParams, SearchParams, int_fields
from memviewer.events import EVENT_KINDS
from memviewer.wire import protocol
from memviewer.wire.protocol import RpcError

NONE = type(None)
OPT_STR = (str, NONE)
OPT_INT = (int, NONE)
RECORD = (dict, bool, NONE)


def _wire_types(annotation: Any) -> tuple[type, ...]:
    """The JSON-decoded types a field of this annotation may arrive as."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return tuple(t for arg in typing.get_args(annotation) for t in _wire_types(arg))
    if origin is typing.Literal:
        return tuple(dict.fromkeys(type(v) for v in typing.get_args(annotation)))
    if annotation is float:
        return (float, int)  # JSON has one number type
    return (annotation,)


def contract_schema(model: type[BaseModel]) -> dict[str, tuple[type, ...]]:
    """``model``'s fields as ``SCHEMAS`` entries: name -> the types it may arrive as."""
    return {name: tuple(dict.fromkeys(_wire_types(f.annotation))) for name, f in model.model_fields.items()}


def contract_required(model: type[BaseModel]) -> tuple[str, ...]:
    return tuple(n for n, f in model.model_fields.items() if f.is_required())


# name -> allowed types; names in REQUIRED must be present. Unknown names are
# rejected (-32602) except where a method passes extra options through.
SCHEMAS: dict[str, dict[str, tuple[type, ...]]] = {
    protocol.HELLO: {"protocol": (int,), "role": (str,), "client": (str,), "token": OPT_STR},
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
    protocol.SEARCH: {**contract_schema(SearchParams), "record": RECORD},
    protocol.RECALL: {**contract_schema(RecallParams), "with_tool_calls": (bool,), "record": RECORD},
    protocol.STATS: {},
}
REQUIRED = {
    protocol.PUBLISH: ("commands",),
    protocol.SESSION: ("session_id",),
    protocol.SEARCH: contract_required(SearchParams),
    protocol.RECALL: contract_required(RecallParams),
}
# hello ignores unknown keys (forward compatibility).
PASS_THROUGH = {protocol.HELLO}
#: Per-method integer bounds ``(lo, hi)``, from the request models; ``INT_FLOOR`` elsewhere.
INT_BOUNDS: dict[str, dict[str, tuple[int, int]]] = {
    protocol.SEARCH: int_fields(SearchParams),
    protocol.RECALL: int_fields(RecallParams),
}


# Integers must fit SQLite's 64-bit INTEGER; these also have a floor.
INT64_MAX = 2**63 - 1
INT_FLOOR = {
    "from_seq": 0,
    "limit": 1,
    "offset": 0,
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
            floor, ceiling = INT_BOUNDS.get(method, {}).get(name) or (
                INT_FLOOR.get(name, -INT64_MAX),
                INT64_MAX,
            )
            if not floor <= value <= ceiling:
                raise RpcError(
                    protocol.INVALID_PARAMS,
                    f"{method}: parameter {name!r} must be between {floor} and {ceiling}",
                )


def check_kinds(kinds: list[Any] | None) -> frozenset[str] | None:
    """The event kinds a subscription or ``events`` read asked for (None: all of them)."""
    if not kinds:
        return None
    bad = [k for k in kinds if not isinstance(k, str) or k not in EVENT_KINDS]
    if bad:
        raise RpcError(protocol.INVALID_PARAMS, f"unknown event kinds {bad!r}; known: {list(EVENT_KINDS)}")
    return frozenset(kinds)
