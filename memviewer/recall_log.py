"""What a recall log entry holds, built the same way by every front end.

Every search and recall that memviewer runs (CLI, viewer, hub RPC, MCP) and every
recall an agent reports (``Publisher.record_recall``, the OTLP receiver) becomes one
``record_recall`` command (the publish op in ``docs/protocol.md``). Front ends name
themselves with ``RecordAs(source=...)``; the command goes through the one writer
(``MemoryService.record_recall`` decides the route). This module holds the pure parts:
building the command from a result, checking one that arrives over the wire, and
comparing a recorded result with a re-run (``diff``).

The log is never read by search or recall.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from memviewer.errors import INVALID_ARGUMENT, MemviewerError
from memviewer.ids import new_id
from memviewer.ops import OPS

SOURCES = ("cli", "tui", "hub", "mcp", "agent", "otlp")
KINDS = ("search", "recall")
TEXT_CHARS = 500  # text kept per result of memviewer's own recalls (the turn itself stays in the store)
DIAG_TEXT_CHARS = 300  # strings inside stored diagnostics (Stage-1 summaries)
MAX_RESULTS = 1000
MAX_ID_CHARS = 200
#: Query text kept per entry (like PostgreSQL's ``track_activity_query_size``): the log is a
#: record for people, and a query of megabytes would make every entry that size.
QUERY_CHARS = 4096
#: One entry's encoded size at most (query, results, params, diagnostics): over it the
#: diagnostics go first, then results from the end; ``cut`` says what went.
MAX_ENTRY_BYTES = 64 * 1024
RESULT_KEYS = {"turn_id": str, "text": str, "session_id": str, "role": str, "title": str}

#: A ``record_recall`` command, or a function that builds it. A search served by the hub
#: hands over the function: the hub builds the entry after the answer is written
#: (``MemoryService.record_recall``, ``wire.hub_records.HubRecords.submit``), off the request's path.
Entry = dict[str, Any] | Callable[[], dict[str, Any]]


def built(entry: Entry) -> dict[str, Any]:
    """The command an ``Entry`` stands for (built now when it is a function)."""
    return entry() if callable(entry) else entry


@dataclass(frozen=True)
class RecordAs:
    """Who ran a search or recall: the front end (``source``) and, when known, the
    session and episode of the agent that asked (an MCP client may name them)."""

    source: str
    session_id: str | None = None
    episode_id: str | None = None
    #: Who asked, as the process that logs it knows (the hub: the connection's peer uid/pid
    #: and hello name; never what the client claims). Not part of ``to_param``.
    caller: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise MemviewerError(INVALID_ARGUMENT, f"source must be one of {SOURCES}, not {self.source!r}")

    def to_param(self) -> dict[str, Any]:
        """The hub RPC's ``record`` parameter."""
        out: dict[str, Any] = {"source": self.source}
        if self.session_id:
            out["session_id"] = self.session_id
        if self.episode_id:
            out["episode_id"] = self.episode_id
        return out

    @classmethod
    def from_param(cls, value: Any, default_source: str = "hub") -> RecordAs | None:
        """The hub RPC's ``record`` parameter: absent → ``default_source``; ``false`` → none."""
        if value is None or value is True:
            return cls(default_source)
        if value is False:
            return None
        if not isinstance(value, Mapping):
            raise MemviewerError(INVALID_ARGUMENT, "record must be an object, true or false")
        unknown = set(value) - {"source", "session_id", "episode_id"}
        if unknown:
            raise MemviewerError(INVALID_ARGUMENT, f"unknown record keys: {sorted(unknown)}")
        for key in ("source", "session_id", "episode_id"):
            if value.get(key) is not None and not isinstance(value.get(key), str):
                raise MemviewerError(INVALID_ARGUMENT, f"record.{key} must be a string")
        return cls(
            str(value.get("source") or default_source),
            value.get("session_id") or None,
            value.get("episode_id") or None,
        )


def _clip(text: Any, n: int) -> str:
    s = text if isinstance(text, str) else ""
    return s if len(s) <= n else s[: n - 1] + "…"


def _clip_strings(obj: Any, n: int, depth: int = 0) -> Any:
    if isinstance(obj, str):
        return _clip(obj, n)
    if depth > 8:
        return None
    if isinstance(obj, dict):
        return {k: _clip_strings(v, n, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clip_strings(v, n, depth + 1) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _command(
    kind: str,
    query: str,
    params: dict[str, Any],
    results: list[dict[str, Any]],
    diagnostics: dict[str, Any],
    record: RecordAs,
    ts: float | None = None,
) -> dict[str, Any]:
    cmd: dict[str, Any] = {
        "op": "record_recall",
        "recall_id": new_id("r-"),
        "ts": time.time() if ts is None else ts,
        "kind": kind,
        "query": query,
        "results": results,
        "params": {k: v for k, v in params.items() if v is not None},
        "diagnostics": diagnostics,
        "source": record.source,
    }
    if record.session_id:
        cmd["session_id"] = record.session_id
    if record.episode_id:
        cmd["episode_id"] = record.episode_id
    if record.caller:
        cmd["caller"] = record.caller
    return cmd


def local_caller() -> dict[str, Any]:
    """The caller of an entry this process writes itself (no hub in between)."""
    import os

    return {"via": "in-process", "pid": os.getpid(), "uid": os.getuid()}


def recall_command(
    query: str, params: dict[str, Any], out: dict[str, Any], record: RecordAs
) -> dict[str, Any]:
    """The log entry of one of memviewer's own recalls (``recall --json`` shape in ``out``)."""
    results = [
        {
            "rank": rank,
            "turn_id": r.get("turn_id"),
            "session_id": r.get("session_id"),
            "index": r.get("index"),
            "role": r.get("role"),
            "archived": bool(r.get("archived")),
            "score": _number(r.get("score")),
            "text": _clip(r.get("content"), TEXT_CHARS),
        }
        for rank, r in enumerate(out.get("results") or [], 1)
    ]
    diagnostics = _clip_strings(dict(out.get("diagnostics") or {}), DIAG_TEXT_CHARS)
    return _command("recall", query, params, results, diagnostics, record)


def search_command(
    query: str | None,
    params: dict[str, Any],
    out: dict[str, Any],
    record: RecordAs,
    ts: float | None = None,
) -> dict[str, Any]:
    """The log entry of a keyword search (the ``search --json`` shape in ``out``), any mode;
    ``ts`` is when the search ran (default: now)."""
    mode = out.get("mode")
    results: list[dict[str, Any]] = []
    if mode == "scroll":
        for rank, m in enumerate(out.get("messages") or [], 1):
            results.append(
                {
                    "rank": rank,
                    "session_id": out.get("session_id"),
                    "index": m.get("index"),
                    "role": m.get("role"),
                    "archived": bool(m.get("archived")),
                    "text": _clip(m.get("content"), TEXT_CHARS),
                }
            )
    else:
        for rank, hit in enumerate(out.get("results") or [], 1):
            item = {
                "rank": rank,
                "session_id": hit.get("session_id"),
                "title": _clip(hit.get("title"), 120),
            }
            if mode == "discovery":
                item.update(
                    score=_number(hit.get("score")),
                    index=hit.get("anchor_index"),
                    text=_clip(hit.get("snippet"), TEXT_CHARS),
                )
            else:
                item["message_count"] = hit.get("message_count")
            results.append(item)
    diagnostics: dict[str, Any] = {"mode": mode, "success": bool(out.get("success"))}
    for key in ("total_found", "error", "hint", "around_message_id"):
        if key in out:
            diagnostics[key] = out[key]
    return _command("search", query or "", params, results, diagnostics, record, ts)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


# -- a command from the wire ---------------------------------------------------------------
def check_command(args: Mapping[str, Any]) -> dict[str, Any]:
    """The ``record_recall`` arguments as row values; ``invalid_argument`` naming the bad field."""

    def bad(message: str) -> MemviewerError:
        return MemviewerError(INVALID_ARGUMENT, f"record_recall: {message}")

    known = OPS["record_recall"].names  # the op's arguments, declared once (memviewer.ops)
    unknown = set(args) - known
    if unknown:
        raise bad(f"unknown fields {sorted(unknown)}")
    rid = args.get("recall_id")
    if not isinstance(rid, str) or not rid.strip() or len(rid) > MAX_ID_CHARS:
        raise bad(f"recall_id must be a non-empty string of at most {MAX_ID_CHARS} characters")
    query = args.get("query")
    if not isinstance(query, str):
        raise bad("query must be a string")
    source = args.get("source", "agent")
    if source not in SOURCES:
        raise bad(f"source must be one of {SOURCES}, not {source!r}")
    kind = args.get("kind") or "recall"
    if kind not in KINDS:
        raise bad(f"kind must be one of {KINDS}, not {kind!r}")
    for key in ("session_id", "episode_id"):
        value = args.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > MAX_ID_CHARS):
            raise bad(f"{key} must be a string of at most {MAX_ID_CHARS} characters")
    for key in ("params", "diagnostics", "caller"):
        if args.get(key) is not None and not isinstance(args.get(key), dict):
            raise bad(f"{key} must be an object")
    results = args.get("results")
    if not isinstance(results, list):
        raise bad("results must be a list")
    if len(results) > MAX_RESULTS:
        raise bad(f"results holds {len(results)} items; at most {MAX_RESULTS}")
    for i, item in enumerate(results):
        if not isinstance(item, dict):
            raise bad(f"results[{i}] must be an object")
        for key, typ in RESULT_KEYS.items():
            if item.get(key) is not None and not isinstance(item[key], typ):
                raise bad(f"results[{i}].{key} must be a string")
        if not any(item.get(k) for k in ("turn_id", "text", "session_id")):
            raise bad(f"results[{i}] needs a turn_id or a text")
        score = item.get("score")
        if score is not None and _number(score) is None:
            raise bad(f"results[{i}].score must be a finite number")
        rank = item.get("rank")
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int)):
            raise bad(f"results[{i}].rank must be an integer")
    return bound(
        {
            "id": rid,
            "query": query,
            "source": source,
            "kind": kind,
            "session_id": args.get("session_id"),
            "episode_id": args.get("episode_id"),
            "params": args.get("params"),
            "results": [{**item, "rank": item.get("rank") or i} for i, item in enumerate(results, 1)],
            "diagnostics": args.get("diagnostics"),
            "caller": _clip_strings(args.get("caller"), MAX_ID_CHARS),
        }
    )


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8", "replace"))


def bound(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` within the log's limits, with ``bytes`` (the entry's encoded size) and
    ``cut`` (what was cut, or None) added.

    Whatever a client sends is kept only this far: the query to ``QUERY_CHARS``, every
    result string to ``TEXT_CHARS`` and every params/diagnostics string to
    ``DIAG_TEXT_CHARS``; an entry still over ``MAX_ENTRY_BYTES`` loses its diagnostics,
    then results from the end. Memviewer's own entries are built within these already."""
    cut: dict[str, Any] = {}
    query = values["query"]
    if len(query) > QUERY_CHARS:
        cut["query_chars"] = len(query)
        values["query"] = query[: QUERY_CHARS - 1] + "…"
    clipped = 0
    results = []
    for item in values["results"]:
        out = {}
        for k, v in item.items():
            if isinstance(v, str) and len(v) > TEXT_CHARS:
                clipped += 1
            out[k] = _clip_strings(v, TEXT_CHARS)
        results.append(out)
    if clipped:
        cut["result_strings"] = clipped
    values["results"] = results
    for key in ("params", "diagnostics"):
        if values.get(key) is not None:
            clipped_value = _clip_strings(values[key], DIAG_TEXT_CHARS)
            if clipped_value != values[key]:
                cut[key] = "strings clipped"
            values[key] = clipped_value
    kept = ("query", "params", "results", "diagnostics", "caller")
    size = _size({k: values.get(k) for k in kept})  # one encoding in the common case
    if size > MAX_ENTRY_BYTES:  # rare: the diagnostics go first, then results from the end
        if values.get("diagnostics"):
            cut["diagnostics"] = "dropped"
            size -= _size(values["diagnostics"]) - _size({})
            values["diagnostics"] = {}
        dropped = 0
        while size > MAX_ENTRY_BYTES and values["results"]:
            size -= _size(values["results"].pop()) + 1
            dropped += 1
        if dropped:
            cut["results_dropped"] = dropped
        size = _size({k: values.get(k) for k in kept})
    values["cut"] = cut or None
    values["bytes"] = size
    return values


# -- recorded vs now ------------------------------------------------------------------------
def result_key(item: Mapping[str, Any]) -> str:
    """What makes two results "the same": the turn, else the session position, else the text."""
    if item.get("turn_id"):
        return f"turn:{item['turn_id']}"
    if item.get("session_id") is not None and item.get("index") is not None:
        return f"at:{item['session_id']}#{item['index']}"
    if item.get("session_id") and not item.get("text"):
        return f"session:{item['session_id']}"
    return "text:" + " ".join(str(item.get("text") or "").split()).lower()


def diff(recorded: list[Mapping[str, Any]], now: list[Mapping[str, Any]]) -> dict[str, Any]:
    """What changed between a recorded result list and a re-run: new, dropped, moved, same.

    ``moved`` and ``same`` carry both ranks; ranks are 1-based positions in each list.
    """
    before = {result_key(r): (rank, r) for rank, r in enumerate(recorded, 1)}
    after = {result_key(r): (rank, r) for rank, r in enumerate(now, 1)}
    out: dict[str, list[dict[str, Any]]] = {"new": [], "dropped": [], "moved": [], "same": []}
    for key, (rank, r) in after.items():
        if key not in before:
            out["new"].append({"key": key, "rank": rank, "result": dict(r)})
        elif before[key][0] != rank:
            out["moved"].append({"key": key, "from": before[key][0], "to": rank, "result": dict(r)})
        else:
            out["same"].append({"key": key, "rank": rank})
    for key, (rank, r) in before.items():
        if key not in after:
            out["dropped"].append({"key": key, "rank": rank, "result": dict(r)})
    return {**out, "changed": bool(out["new"] or out["dropped"] or out["moved"])}
