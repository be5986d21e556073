"""The ``record_llm_call`` command (docs/protocol.md): checked, normalised into row values.

Bad input is kept, never guessed: input or output that is not a JSON list of messages is
stored verbatim (``raw_input`` / ``raw_output``) with the problem named; a call without a
session is stored without one (``without_conversation_id``). Only what no row can hold
(a wrong type for an id, a number that is not a number) is refused, naming the field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from memviewer.errors import INVALID_ARGUMENT, MemviewerError
from memviewer.ops import OPS

SOURCES = ("agent", "otlp", "import")
MAX_ID_CHARS = 200
MAX_MESSAGES = 10_000
MAX_RAW_CHARS = 4_000_000
KNOWN = OPS["record_llm_call"].names  # the op's arguments, declared once (memviewer.ops)
#: What a ``problems`` entry may say (counted by ``memviewer calls``).
PROBLEMS = (
    "without_conversation_id",
    "input_not_json",
    "input_not_a_list",
    "output_not_json",
    "output_not_a_list",
    "without_input",
)


def _bad(message: str) -> MemviewerError:
    return MemviewerError(INVALID_ARGUMENT, f"record_llm_call: {message}")


def _messages(value: Any, side: str, problems: list[str]) -> tuple[list[Any] | None, str | None]:
    """``(messages, raw)``: a list is kept as the messages; a JSON string holding a list is
    parsed; anything else is kept verbatim as text, with the problem named."""
    if value is None:
        if side == "input":
            problems.append("without_input")
        return None, None
    if isinstance(value, list):
        if len(value) > MAX_MESSAGES:
            raise _bad(f"{side} holds {len(value)} messages; at most {MAX_MESSAGES}")
        return value, None
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except (ValueError, RecursionError):
            problems.append(f"{side}_not_json")
            return None, value[:MAX_RAW_CHARS]
        if isinstance(data, list):
            return data, None
    problems.append(f"{side}_not_a_list")
    raw = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return None, raw[:MAX_RAW_CHARS]


def _opt_id(args: Mapping[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS:
        raise _bad(f"{key} must be a non-empty string of at most {MAX_ID_CHARS} characters")
    return value


def _opt_int(value: Any, key: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise _bad(f"{key} must be a non-negative number")
    return int(value)


def _id_list(value: Any, key: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _bad(f"{key} must be a list of ids")
    return list(value)


def recorded_payload(values: Mapping[str, Any]) -> dict[str, Any]:
    """The ``llm_call.recorded`` event's payload for a checked call (both write paths)."""
    return {
        "call_id": values["id"],
        "model": values["model"],
        "input_messages": len(values["input"] or []),
        "input_tokens": values["input_tokens"],
        "problems": values["problems"] or [],
    }


def check_command(args: Mapping[str, Any]) -> dict[str, Any]:
    """Row values for ``store.llm_calls.write`` (``ts`` left to the caller)."""
    unknown = set(args) - KNOWN - {"op"}
    if unknown:
        raise _bad(f"unknown fields {sorted(unknown)}")
    cid = args.get("call_id")
    if not isinstance(cid, str) or not cid.strip() or len(cid) > MAX_ID_CHARS:
        raise _bad(f"call_id must be a non-empty string of at most {MAX_ID_CHARS} characters")
    source = args.get("source") or "agent"
    if source not in SOURCES:
        raise _bad(f"source must be one of {SOURCES}, not {source!r}")
    problems: list[str] = []
    given = args.get("problems")
    if given is not None:
        if not isinstance(given, list) or not all(p in PROBLEMS for p in given):
            raise _bad(f"problems must be a list of {PROBLEMS}")
        problems += [p for p in given if p not in problems]
    session_id = _opt_id(args, "session_id")
    if session_id is None and "without_conversation_id" not in problems:
        problems.append("without_conversation_id")
    inp, raw_in = _messages(args.get("input"), "input", problems)
    out, raw_out = _messages(args.get("output"), "output", problems)
    usage = args.get("usage") or {}
    if not isinstance(usage, dict):
        raise _bad("usage must be an object")
    latency = args.get("latency_ms")
    if latency is not None and (
        isinstance(latency, bool) or not isinstance(latency, int | float) or not math.isfinite(latency)
    ):
        raise _bad("latency_ms must be a number")
    for key in ("model", "provider"):
        if args.get(key) is not None and not isinstance(args[key], str):
            raise _bad(f"{key} must be a string")
    meta = args.get("meta")
    if meta is not None and not isinstance(meta, dict):
        raise _bad("meta must be an object")
    return {
        "id": cid,
        "session_id": session_id,
        "episode_id": _opt_id(args, "episode_id"),
        "source": source,
        "model": (args.get("model") or None),
        "provider": (args.get("provider") or None),
        "input_tokens": _opt_int(usage.get("input_tokens"), "usage.input_tokens"),
        "output_tokens": _opt_int(usage.get("output_tokens"), "usage.output_tokens"),
        "latency_ms": None if latency is None else float(latency),
        "context_window": _opt_int(args.get("context_window"), "context_window"),
        "recall_ids": _id_list(args.get("recall_ids"), "recall_ids"),
        "in_prompt": _id_list(args.get("in_prompt"), "in_prompt"),
        "input": inp,
        "output": out,
        "raw_input": raw_in,
        "raw_output": raw_out,
        "problems": list(dict.fromkeys(problems)) or None,
        "meta": meta,
    }


def public(row: dict[str, Any], *, full: bool = True) -> dict[str, Any]:
    """The JSON shape of one call (docs/cli.md, ``## calls``); ``row`` expanded
    (``store.llm_calls.expand``) when ``full``."""
    from memviewer.timeutil import iso

    out: dict[str, Any] = {
        "call_id": row["id"],
        "session_id": row["session_id"],
        "episode_id": row["episode_id"],
        "ts": row["ts"],
        "at": iso(row["ts"]),
        "source": row["source"],
        "model": row["model"],
        "provider": row["provider"],
        "usage": {"input_tokens": row["input_tokens"], "output_tokens": row["output_tokens"]},
        "latency_ms": row["latency_ms"],
        "context_window": row["context_window"],
        "recall_ids": row.get("recall_ids") or [],
        "in_prompt_ids": row.get("in_prompt"),
        "input_messages": len(row.get("input") or []),
        "output_messages": len(row.get("output") or []),
        "problems": row.get("problems") or [],
    }
    if full:
        out["input"] = row.get("input")
        out["output"] = row.get("output")
        out["raw_input"] = row.get("raw_input")
        out["raw_output"] = row.get("raw_output")
        out["meta"] = row.get("meta") or {}
    return out
