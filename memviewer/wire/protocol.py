"""Wire protocol v1: JSON-RPC 2.0, one JSON object per line, over a Unix socket.

Standard library only: the publisher (``memviewer.client``) shares these
helpers with the hub, so both sides frame, encode and map errors the same way.
The prose contract is ``docs/protocol.md``; keep the two in step.
"""

from __future__ import annotations

import json
import re
from typing import Any

# The JSON value rules live in memviewer.jsonvalues; re-exported for the hub and clients.
from memviewer.jsonvalues import MAX_DEPTH as MAX_DEPTH  # re-exported: the wire's limits
from memviewer.jsonvalues import check_value as check_value
from memviewer.jsonvalues import loads_strict as loads_strict

PROTOCOL_VERSION = 1
JSONRPC = "2.0"
DEFAULT_FRAME_LIMIT = 1_048_576

# Methods (client -> hub)
HELLO = "hello"
PUBLISH = "publish"
SUBSCRIBE = "subscribe"
UNSUBSCRIBE = "unsubscribe"
EVENTS = "events"
SESSIONS = "sessions"
SESSION = "session"
SEARCH = "search"
RECALL = "recall"
STATS = "stats"
# Notifications (hub -> client)
EVENT = "event"
LAGGED = "lagged"

ROLES = ("publisher", "subscriber", "reader")

# A token the hub refused: the connection is not used again (a publisher spools meanwhile).
TOKEN_CODES = frozenset({"token_missing", "token_invalid", "token_revoked", "token_scope"})

# Standard JSON-RPC 2.0 codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# Application errors: numeric code <-> the error code string of docs/cli.md (carried in data.code).
APP_ERROR_NUMBERS: dict[str, int] = {
    "session_not_found": -32001,
    "episode_not_found": -32002,
    "conflict": -32003,
    "invalid_argument": -32004,
    "llm_timeout": -32005,
    "llm_output_malformed": -32006,
    "not_found": -32007,
    # The TCP listener's bearer tokens (docs/protocol.md, "TCP with TLS"): one code each.
    "token_missing": -32010,
    "token_invalid": -32011,
    "token_revoked": -32012,
    "token_scope": -32013,
    "internal": INTERNAL_ERROR,
}
APP_ERROR_CODES: dict[int, str] = {v: k for k, v in APP_ERROR_NUMBERS.items()}

# Protocol-level failures are the caller's fault: their data.code is invalid_argument.
STANDARD_APP_CODE: dict[int, str] = {
    PARSE_ERROR: "invalid_argument",
    INVALID_REQUEST: "invalid_argument",
    METHOD_NOT_FOUND: "invalid_argument",
    INVALID_PARAMS: "invalid_argument",
    INTERNAL_ERROR: "internal",
}


class RpcError(Exception):
    """A JSON-RPC error object as an exception (raised on both sides)."""

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = dict(data or {})
        self.data.setdefault("code", APP_ERROR_CODES.get(code) or STANDARD_APP_CODE.get(code, "internal"))

    @property
    def app_code(self) -> str:
        """The error code string (``invalid_argument``, ``conflict`` …)."""
        return str(self.data.get("code", "internal"))

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "data": self.data}

    @classmethod
    def from_dict(cls, obj: Any) -> RpcError:
        if not isinstance(obj, dict):
            return cls(INTERNAL_ERROR, f"malformed error object: {obj!r}")
        data = obj.get("data") if isinstance(obj.get("data"), dict) else None
        code = obj.get("code")
        return cls(code if isinstance(code, int) else INTERNAL_ERROR, str(obj.get("message", "")), data)

    def __repr__(self) -> str:
        return f"RpcError({self.code}, {self.message!r}, {self.data!r})"


def app_error(code: str, message: str, data: dict[str, Any] | None = None) -> RpcError:
    """An ``RpcError`` for an error code string (docs/cli.md, "Errors")."""
    return RpcError(APP_ERROR_NUMBERS.get(code, INTERNAL_ERROR), message, {**(data or {}), "code": code})


def _default(obj: Any) -> Any:
    """Encode what service results may hold beyond plain JSON (numpy scalars, sets, paths)."""
    if hasattr(obj, "item") and callable(obj.item):
        return obj.item()
    if hasattr(obj, "tolist") and callable(obj.tolist):
        return obj.tolist()
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    return str(obj)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def dumps(obj: Any, *, ensure_ascii: bool = False) -> str:
    """Compact JSON; ``json`` escapes control characters, so no raw newline can appear.

    NaN and infinities are not JSON: they are sent as ``null``.
    """
    try:
        return json.dumps(
            obj, ensure_ascii=ensure_ascii, separators=(",", ":"), allow_nan=False, default=_default
        )
    except ValueError:
        return json.dumps(
            _finite(obj), ensure_ascii=ensure_ascii, separators=(",", ":"), allow_nan=False, default=_default
        )


def encode(obj: Any) -> bytes:
    """One frame: the JSON text plus the terminating newline.

    A string that is not valid Unicode (a lone UTF-16 surrogate, which older data or an
    import may hold) cannot be UTF-8: the frame is then sent ASCII-escaped (``\\ud800``),
    which is still valid JSON and keeps the value exactly. Raises ``RecursionError`` for
    a value nested too deeply to encode.
    """
    text = dumps(obj)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return dumps(obj, ensure_ascii=True).encode("ascii") + b"\n"


def request(method: str, params: dict[str, Any] | None, req_id: int | str) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": JSONRPC, "id": req_id, "method": method}
    if params is not None:
        msg["params"] = params
    return encode(msg)


def notification(method: str, params: dict[str, Any]) -> bytes:
    return encode({"jsonrpc": JSONRPC, "method": method, "params": params})


def response(req_id: Any, result: Any) -> bytes:
    return encode({"jsonrpc": JSONRPC, "id": req_id, "result": result})


def error_response(req_id: Any, err: RpcError) -> bytes:
    return encode({"jsonrpc": JSONRPC, "id": req_id, "error": err.to_dict()})


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def decode(line: bytes | str, *, check_depth: bool = True) -> Any:
    """Parse one frame; invalid UTF-8 or JSON raises ``RpcError(PARSE_ERROR)``.

    So does what would decode but could never be stored and read back: nesting deeper
    than ``MAX_DEPTH`` and strings holding a lone UTF-16 surrogate (JSON can escape one,
    ``"\\ud800"``, but it is not a character; a client that cut an emoji in half sends it).
    ``check_depth=False`` (``decode_answer``) skips the depth walk only.
    """
    try:
        text = line.decode("utf-8") if isinstance(line, bytes | bytearray) else line
    except UnicodeDecodeError as exc:
        raise RpcError(PARSE_ERROR, f"frame is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise RpcError(PARSE_ERROR, f"frame is not valid JSON: {exc}") from None
    except RecursionError:
        deep = f"deeper than {MAX_DEPTH} levels" if check_depth else "too deeply to decode"
        raise RpcError(PARSE_ERROR, f"frame is nested {deep}") from None
    surrogates = _SURROGATE_ESCAPE.search(text) is not None  # only then look at every string
    deep_walk = check_depth and text.count("[") + text.count("{") > MAX_DEPTH
    if surrogates or deep_walk:
        problem = check_value(obj, surrogates=surrogates, max_depth=MAX_DEPTH if check_depth else 1_000_000)
        if problem:
            raise RpcError(PARSE_ERROR, f"frame {problem}")
    return obj


def decode_answer(line: bytes | str) -> Any:
    """Parse one frame from the hub (an answer or a notification), as ``decode`` does
    except for the depth walk.

    ``decode`` walks every container of a frame with more than ``MAX_DEPTH`` brackets to
    check its depth, which is most of the cost of reading a search answer (75 messages:
    ~0.3 ms against 0.1 ms for ``json.loads``). That check keeps what could never be
    stored and read back out of the store; an answer is not stored, and JSON's own
    recursion limit still bounds it. Lone surrogates are refused as before.
    """
    return decode(line, check_depth=False)


def parse_request(msg: Any) -> tuple[Any, str, dict[str, Any], bool]:
    """Validate a request object: ``(id, method, params, is_notification)``.

    Only named parameters (an object) are accepted; a missing ``params`` means ``{}``.
    """
    if isinstance(msg, list):
        raise RpcError(
            INVALID_REQUEST,
            "batch arrays are not supported; send one request per line "
            "(publish takes many commands in one request)",
        )
    if not isinstance(msg, dict):
        raise RpcError(INVALID_REQUEST, "a request must be a JSON object")
    req_id = msg.get("id")
    is_note = "id" not in msg
    if not is_note and (isinstance(req_id, bool) or not isinstance(req_id, int | str | None)):
        raise RpcError(INVALID_REQUEST, "id must be a string, an integer or null")
    if msg.get("jsonrpc") != JSONRPC:
        raise RpcError(INVALID_REQUEST, 'jsonrpc must be "2.0"')
    method = msg.get("method")
    if not isinstance(method, str) or not method:
        raise RpcError(INVALID_REQUEST, "method must be a non-empty string")
    params = msg.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, "params must be an object (named parameters)")
    return req_id, method, params, is_note


def request_id_of(msg: Any) -> Any:
    """The id to answer a malformed request with (null when it has no usable id)."""
    if isinstance(msg, dict):
        rid = msg.get("id")
        if isinstance(rid, int | str) and not isinstance(rid, bool):
            return rid
    return None
