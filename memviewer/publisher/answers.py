"""How the publisher reads the hub's answers: "not now" (resend later) or a refusal (report it)."""

from __future__ import annotations

import json
from typing import Any

from memviewer.wire import protocol

# The one table of "not now" answers: the hub is alive but cannot take the command yet (its
# write queue is full, the store is briefly unavailable). Such commands are kept and resent
# with back-off, never reported as refused. An error with ``retry: true`` (in the error or in
# its ``data``) is the same; a whole request answered ``internal`` (hub shutting down, disk
# trouble) too. Any other code is the command's own fault: a refusal, never resent.
RETRY_LATER_CODES = frozenset(
    {"busy", "overloaded", "unavailable", "rate_limited", "too_many_requests", "try_again", "retry_later"}
)


def retry_later(error: Any, *, whole_request: bool = False) -> bool:
    """True when ``error`` (an ``RpcError`` or an error object) means "resend later"."""
    if isinstance(error, protocol.RpcError):
        code: Any = error.app_code
        data: Any = error.data
        flag = False
    elif isinstance(error, dict):
        data = error.get("data") if isinstance(error.get("data"), dict) else {}
        code = error.get("code") if isinstance(error.get("code"), str) else data.get("code")
        flag = error.get("retry") is True
    else:
        return False
    if flag or (isinstance(data, dict) and data.get("retry") is True) or code in RETRY_LATER_CODES:
        return True
    return whole_request and code == "internal"


def refusal(lsn: int, line: bytes, error: Any) -> dict[str, Any]:
    """What ``refusals`` holds for one refused command: its cid, op, the hub's error, the command."""
    try:
        command = json.loads(line)
    except ValueError:
        command = None
    op = command.get("op") if isinstance(command, dict) else None
    if isinstance(command, dict):
        command.pop("cid", None)
    return {"cid": lsn, "op": op, "error": error, "command": command}
