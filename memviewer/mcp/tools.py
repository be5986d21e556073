"""The MCP tools: their JSON schemas and the calls behind them (no MCP types here).

* ``session_search`` takes exactly PraisonAI's parameters and answers its discovery /
  scroll / browse JSON (the ``memviewer search --json`` contract), so an agent written
  for PraisonAI's tool works unchanged. Like PraisonAI's, ``limit`` and ``window`` may
  arrive as strings of digits and ``around_message_id`` is a string.
* ``recall`` answers the ``memviewer recall --json`` contract, diagnostics included.
* ``get_session`` and ``list_sessions`` read sessions.

A failure is a ``ToolFailure`` with memviewer's error code and a hint; the server turns
it into an MCP tool error (``isError``), never a stack trace.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from memviewer.api import Reader, RecallParams, SearchParams, int_param
from memviewer.errors import INTERNAL, INVALID_ARGUMENT, SESSION_NOT_FOUND, MemviewerError
from memviewer.recall_log import RecordAs

MAX_LIST = 1000
ANNOTATIONS = {"readOnlyHint": True, "openWorldHint": False, "destructiveHint": False, "idempotentHint": True}
# A caller may name its own session and episode for the recall log in the request's _meta.
META_SESSION = "memviewer/session_id"
META_EPISODE = "memviewer/episode_id"


class ToolFailure(Exception):
    """A tool call that failed with a memviewer error code and a hint."""

    def __init__(self, code: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.message, "code": self.code}
        if self.hint:
            out["hint"] = self.hint
        return out


# -- schemas -------------------------------------------------------------------------------
_INTISH = {"type": ["integer", "string"]}
#: ``RecallParams`` fields the recall tool does not take: reranking follows the server's
#: configuration (the tool has never offered it).
RECALL_OMITS = ("rerank",)


@functools.cache
def _schema_properties(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON Schema properties, built once (every tool property reads them)."""
    return dict(model.model_json_schema()["properties"])


def contract_property(model: type[BaseModel], name: str) -> dict[str, Any]:
    """One request-model field as an MCP input property, projected from its JSON Schema: a
    nullable field loses its ``null`` (a client omits it), an integer also takes digit
    strings (as PraisonAI sends them) and names its bounds in the description."""
    prop = {k: v for k, v in _schema_properties(model)[name].items() if k != "title"}
    if "anyOf" in prop:
        types = [a["type"] for a in prop.pop("anyOf") if a.get("type") != "null"]
        if "number" in types and "integer" in types:
            types.remove("integer")
        prop["type"] = types[0] if len(types) == 1 else types
    if prop.get("default", 0) is None:
        del prop["default"]
    text = str(prop.get("description", ""))
    if prop.get("type") == "integer":
        prop["type"] = ["integer", "string"]
        text += f" ({prop['minimum']}-{prop['maximum']})"
    prop["description"] = text[:1].upper() + text[1:] + "."
    return prop


def contract_schema(model: type[BaseModel], omit: tuple[str, ...] = ()) -> dict[str, Any]:
    """A tool's input schema: every field of ``model`` but ``omit`` (``contract_property``)."""
    names = [n for n in model.model_fields if n not in omit]
    required = [n for n in names if model.model_fields[n].is_required()]
    return {
        "type": "object",
        **({"required": required} if required else {}),
        "properties": {n: contract_property(model, n) for n in names},
        "additionalProperties": False,
    }


_NULL_STR = {"type": ["string", "null"]}
_MESSAGE = {
    "type": "object",
    "required": ["index", "role", "content", "archived"],
    "properties": {
        "index": {"type": "integer"},
        "role": {"type": "string"},
        "content": {"type": "string"},
        "timestamp": _NULL_STR,
        "archived": {"type": "boolean"},
    },
}
_HIT = {
    "type": "object",
    "required": ["session_id"],
    "properties": {
        "session_id": {"type": "string"},
        "title": {"type": "string"},
        "when": _NULL_STR,
        "snippet": {"type": "string"},
        "score": {"type": "number"},
        "anchor_index": {"type": "integer"},
        "message_count": {"type": "integer"},
        "messages": {"type": "array", "items": _MESSAGE},
        "bookends": {
            "type": "object",
            "properties": {
                "opening": {"type": "array", "items": {"type": "object"}},
                "closing": {"type": "array", "items": {"type": "object"}},
            },
        },
    },
}
SESSION_SEARCH_INPUT = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "default": "",
            "description": "Free-text query: discovery mode (sessions matching it, with context).",
        },
        "session_id": {
            "type": "string",
            "default": "",
            "description": "A session to read: scroll mode (messages around around_message_id).",
        },
        "around_message_id": {
            "type": ["string", "integer"],
            "default": "",
            "description": "Anchor message index for scroll mode, e.g. a hit's anchor_index; "
            "empty = the most recent messages.",
        },
        "limit": contract_property(SearchParams, "limit"),
        "window": contract_property(SearchParams, "window"),
    },
    "additionalProperties": False,
}
SESSION_SEARCH_OUTPUT = {
    "type": "object",
    "required": ["success", "mode"],
    "properties": {
        "success": {"type": "boolean"},
        "mode": {"enum": ["discovery", "scroll", "browse"]},
        "query": {"type": "string"},
        "total_found": {"type": "integer"},
        "results": {"type": "array", "items": _HIT},
        "session_id": {"type": "string"},
        "around_message_id": _NULL_STR,
        "messages": {"type": "array", "items": _MESSAGE},
    },
}
RECALL_INPUT = contract_schema(RecallParams, omit=RECALL_OMITS)
_RECALL_RESULT = {
    "type": "object",
    "required": ["turn_id", "session_id", "index", "role", "content", "score"],
    "properties": {
        "turn_id": {"type": "string"},
        "session_id": {"type": "string"},
        "episode_id": _NULL_STR,
        "index": {"type": "integer"},
        "role": {"type": "string"},
        "content": {"type": "string"},
        "timestamp": _NULL_STR,
        "archived": {"type": "boolean"},
        "score": {"type": "number"},
    },
}
RECALL_OUTPUT = {
    "type": "object",
    "required": ["query", "results", "diagnostics"],
    "properties": {
        "query": {"type": "string"},
        "scope": _NULL_STR,
        "scope_id": _NULL_STR,
        "results": {"type": "array", "items": _RECALL_RESULT},
        "diagnostics": {
            "type": "object",
            "required": ["mode", "escalations", "stage1", "timings_ms"],
            "properties": {
                "mode": {"type": "string"},
                "escalations": {"type": "array", "items": {"type": "string"}},
                "stage1": {"type": "array", "items": {"type": "object"}},
                "stage2_candidates": {"type": "integer"},
                "post_filter": {"type": "integer"},
                "reranked": {"type": "boolean"},
                "timings_ms": {"type": "object"},
            },
        },
    },
}
GET_SESSION_INPUT = {
    "type": "object",
    "required": ["session_id"],
    "properties": {
        "session_id": {"type": "string", "minLength": 1},
        "archived": {
            "type": ["boolean", "null"],
            "description": "true: only the archived (compacted) turns; false: only the active "
            "window; omitted: every turn, archived first.",
        },
    },
    "additionalProperties": False,
}
_SESSION = {
    "type": "object",
    "required": ["session_id", "status"],
    "properties": {
        "session_id": {"type": "string"},
        "agent": {"type": "string"},
        "scope": {"type": "string"},
        "scope_id": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "string"},
        "started_at": _NULL_STR,
        "last_seen_at": _NULL_STR,
        "episodes": {"type": "integer"},
        "active_turns": {"type": "integer"},
        "archived_turns": {"type": "integer"},
    },
}
GET_SESSION_OUTPUT = {
    "type": "object",
    "required": ["session", "episodes", "turns"],
    "properties": {
        "session": _SESSION,
        "episodes": {"type": "array", "items": {"type": "object"}},
        "turns": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["turn_id", "index", "role", "content", "archived"],
                "properties": {
                    "turn_id": {"type": "string"},
                    "episode_id": _NULL_STR,
                    "index": {"type": "integer"},
                    "role": {"type": "string"},
                    "content": {"type": "string"},
                    "timestamp": _NULL_STR,
                    "archived": {"type": "boolean"},
                    "is_compaction_summary": {"type": "boolean"},
                },
            },
        },
    },
}
LIST_SESSIONS_INPUT = {
    "type": "object",
    "properties": {
        "limit": {**_INTISH, "default": 20, "description": "At most this many, most recent first (1-1000)."},
        "agent": {"type": "string", "description": "Only sessions of this agent (exact name)."},
    },
    "additionalProperties": False,
}
LIST_SESSIONS_OUTPUT = {
    "type": "object",
    "required": ["total", "sessions"],
    "properties": {"total": {"type": "integer"}, "sessions": {"type": "array", "items": _SESSION}},
}


# -- the calls -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Caller:
    """Who calls: recorded with each search and recall (from the request's ``_meta``)."""

    session_id: str | None = None
    episode_id: str | None = None

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any] | None) -> Caller:
        meta = meta or {}
        sid, eid = meta.get(META_SESSION), meta.get(META_EPISODE)
        return cls(
            sid if isinstance(sid, str) and sid else None, eid if isinstance(eid, str) and eid else None
        )

    def record(self) -> RecordAs:
        return RecordAs("mcp", self.session_id, self.episode_id)


def _args(raw: Mapping[str, Any] | None, schema: Mapping[str, Any]) -> dict[str, Any]:
    args = dict(raw or {})
    unknown = sorted(set(args) - set(schema["properties"]))
    if unknown:
        raise MemviewerError(
            INVALID_ARGUMENT,
            f"unknown arguments {unknown}",
            hint=f"this tool takes {sorted(schema['properties'])}",
        )
    for name in schema.get("required", ()):
        if name not in args:
            raise MemviewerError(INVALID_ARGUMENT, f"{name} is required")
    return args


def session_search(reader: Reader, raw: Mapping[str, Any] | None, caller: Caller) -> dict[str, Any]:
    args = _args(raw, SESSION_SEARCH_INPUT)
    around = args.get("around_message_id")
    if isinstance(around, bool) or (around is not None and not isinstance(around, str | int)):
        raise MemviewerError(INVALID_ARGUMENT, "around_message_id must be a message index")
    for name in ("query", "session_id"):
        if args.get(name) is not None and not isinstance(args[name], str):
            raise MemviewerError(INVALID_ARGUMENT, f"{name} must be a string")
    params = SearchParams.from_mapping(
        {
            "query": args.get("query") or None,
            "session_id": args.get("session_id") or None,
            "around": around if around not in (None, "") else None,
            "limit": args.get("limit"),
            "window": args.get("window"),
        }
    )
    kwargs = params.as_kwargs()
    query = kwargs.pop("query")
    out = reader.search(query, **kwargs, record=caller.record())
    if not out.get("success"):
        code = out.get("code") or (
            SESSION_NOT_FOUND if str(out.get("error", "")).startswith("unknown session") else INVALID_ARGUMENT
        )
        raise ToolFailure(str(code), str(out.get("error") or "search failed"), out.get("hint"))
    return out


def recall(reader: Reader, raw: Mapping[str, Any] | None, caller: Caller) -> dict[str, Any]:
    args = _args(raw, RECALL_INPUT)
    params = RecallParams.from_mapping(args)
    return reader.recall(params.query, **params.as_kwargs(), record=caller.record())


def get_session(reader: Reader, raw: Mapping[str, Any] | None, caller: Caller) -> dict[str, Any]:
    args = _args(raw, GET_SESSION_INPUT)
    sid = args["session_id"]
    if not isinstance(sid, str) or not sid.strip():
        raise MemviewerError(INVALID_ARGUMENT, "session_id must be a non-empty string")
    archived = args.get("archived")
    if archived is not None and not isinstance(archived, bool):
        raise MemviewerError(INVALID_ARGUMENT, "archived must be true, false or omitted")
    try:
        view = reader.session(sid)
    except MemviewerError as exc:
        if exc.code in ("not_found", SESSION_NOT_FOUND):
            raise ToolFailure(
                SESSION_NOT_FOUND,
                exc.message,
                "find session ids with list_sessions or session_search",
            ) from None
        raise
    if archived is not None:
        view = {**view, "turns": [t for t in view["turns"] if bool(t.get("archived")) == archived]}
    return view


def list_sessions(reader: Reader, raw: Mapping[str, Any] | None, caller: Caller) -> dict[str, Any]:
    args = _args(raw, LIST_SESSIONS_INPUT)
    limit = int_param("limit", args.get("limit"), 20, 1, MAX_LIST)
    agent = args.get("agent")
    if agent is not None and not isinstance(agent, str):
        raise MemviewerError(INVALID_ARGUMENT, "agent must be a string")
    if not agent:
        page = reader.sessions(limit=limit)
        return {"total": page["total"], "sessions": page["sessions"]}
    # The store filters by substring (title, agent, id, scope id); keep exact agent matches.
    found: list[dict[str, Any]] = []
    total, offset = 0, 0
    while True:
        page = reader.sessions(filter=agent, limit=500, offset=offset)
        for s in page["sessions"]:
            if s.get("agent") == agent:
                total += 1
                if len(found) < limit:
                    found.append(s)
        offset += len(page["sessions"])
        if not page["sessions"] or offset >= page["total"]:
            break
    return {"total": total, "sessions": found}


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    call: Callable[[Reader, Mapping[str, Any] | None, Caller], dict[str, Any]]


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "session_search",
        "Search past sessions",
        "Search your own past conversations across every stored session, including turns "
        "compacted out of the active window. Three modes: discovery (query='...': matching "
        "sessions with a snippet, the anchored messages and bookends), scroll (session_id + "
        "around_message_id: ±window messages around a hit's anchor_index) and browse (no "
        "arguments: the most recent sessions). Each message carries archived: true when it "
        "was compacted out of the live window.",
        SESSION_SEARCH_INPUT,
        SESSION_SEARCH_OUTPUT,
        session_search,
    ),
    ToolSpec(
        "recall",
        "Recall memory for a question",
        "Two-stage recall: pick the most relevant sessions by their summaries, then the best "
        "turns in each (hybrid vector + keyword score), with the explain trace in "
        "diagnostics (Stage-1 sessions, pool sizes, what the post-filter dropped, timings).",
        RECALL_INPUT,
        RECALL_OUTPUT,
        recall,
    ),
    ToolSpec(
        "get_session",
        "Read one session",
        "One session with its episodes and turns (archived first, then the active window); "
        "archived=true/false keeps only one side of the compaction boundary.",
        GET_SESSION_INPUT,
        GET_SESSION_OUTPUT,
        get_session,
    ),
    ToolSpec(
        "list_sessions",
        "List sessions",
        "The most recently active sessions with their episode, active and archived turn "
        "counts; agent='name' keeps one agent's.",
        LIST_SESSIONS_INPUT,
        LIST_SESSIONS_OUTPUT,
        list_sessions,
    ),
)
TOOL_BY_NAME = {t.name: t for t in TOOLS}


def call_tool(
    reader: Reader, name: str, arguments: Mapping[str, Any] | None, caller: Caller
) -> dict[str, Any]:
    """Run one tool; every failure is a ``ToolFailure`` (code, message, hint)."""
    spec = TOOL_BY_NAME.get(name)
    if spec is None:
        raise ToolFailure(INVALID_ARGUMENT, f"unknown tool {name!r}", f"tools: {', '.join(TOOL_BY_NAME)}")
    try:
        return spec.call(reader, arguments, caller)
    except ToolFailure:
        raise
    except MemviewerError as exc:
        raise ToolFailure(exc.code, exc.message, exc.hint) from None
    except Exception as exc:  # the contract is an error with a code, never a traceback
        import logging

        logging.getLogger("memviewer.mcp").exception("tool %s failed", name)
        raise ToolFailure(
            INTERNAL,
            f"{type(exc).__name__}: {exc}",
            "this is a bug; `memviewer doctor` checks the store and the index",
        ) from None
