"""The typed publish commands: one builder per op, checking its arguments at call time.

A builder mints the ids it was not given and returns the command (``op`` and its arguments,
in wire order, ``None`` for an argument left out); ``queue.CommandQueue.put`` stamps ``ts``,
drops the ``None`` values and encodes it. ``Publisher`` exposes each builder as a method of
the same name and signature (its docstring is the builder's), so what an agent may pass is
declared once, here. The names a command may carry are ``memviewer.ops`` (shared with the
hub's operation table; ``_command`` holds each builder to them). The wire shapes are in
docs/protocol.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memviewer.ids import new_id
from memviewer.ops import OPS

ROLES = ("user", "assistant", "tool", "system")


@dataclass(frozen=True)
class Command:
    """One command to queue; ``id`` is what the publishing call returns."""

    op: str
    args: dict[str, Any]
    id: str | None = None


def _command(op: str, args: dict[str, Any], id: str | None = None) -> Command:
    """A builder's command; the names it carries are the op's (``memviewer.ops``), which
    ``tests/test_ops.py`` checks for every builder."""
    assert set(args) <= OPS[op].names, sorted(set(args) - OPS[op].names)
    return Command(op, args, id)


def _check_str(name: str, value: Any, *, empty_ok: bool = True) -> None:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, not {type(value).__name__}")
    if not empty_ok and not value.strip():
        raise ValueError(f"{name} must not be empty")


def _check_dict(name: str, value: Any) -> None:
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"{name} must be a dict or None")


def _check_ids(pairs: tuple[tuple[str, Any], ...]) -> None:
    """Optional ids and names: absent, or a non-empty string."""
    for name, value in pairs:
        if value is not None:
            _check_str(name, value, empty_ok=False)


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float)


def open_session(
    agent: str = "",
    scope: str | None = None,
    scope_id: str | None = None,
    meta: dict[str, Any] | None = None,
    *,
    session_id: str | None = None,
    title: str | None = None,
    source: str | None = None,
    lineage_id: str | None = None,
    root_session_id: str | None = None,
    thread_id: str | None = None,
    parent_session_id: str | None = None,
    retention: str | None = None,
    active_window: int | None = None,
    ts: float | None = None,
) -> Command:
    """Queue ``open_session`` and return the session id (minted unless given)."""
    _check_str("agent", agent)
    _check_dict("meta", meta)
    if retention is not None and retention not in ("compact", "keep_all"):
        raise ValueError("retention must be 'compact' or 'keep_all'")
    if active_window is not None and (
        not isinstance(active_window, int) or isinstance(active_window, bool) or active_window < 2
    ):
        raise ValueError("active_window must be an integer >= 2")
    sid = session_id or new_id("s-")
    _check_str("session_id", sid, empty_ok=False)
    args = {
        "session_id": sid,
        "agent": agent,
        "scope": scope,
        "scope_id": scope_id,
        "meta": meta,
        "title": title,
        "source": source,
        "lineage_id": lineage_id,
        "root_session_id": root_session_id,
        "thread_id": thread_id,
        "parent_session_id": parent_session_id,
        "retention": retention,
        "active_window": active_window,
        "ts": ts,
    }
    return _command("open_session", args, sid)


def start_episode(
    session_id: str,
    user_message: str,
    *,
    episode_id: str | None = None,
    turn_id: str | None = None,
    meta: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    ts: float | None = None,
) -> Command:
    """Queue an episode whose first turn is ``user_message``; an empty message is a ValueError."""
    _check_str("session_id", session_id, empty_ok=False)
    _check_str("user_message", user_message, empty_ok=False)
    _check_dict("meta", meta)
    _check_dict("metadata", metadata)
    eid = episode_id or new_id("e-")
    args = {
        "session_id": session_id,
        "user_message": user_message,
        "episode_id": eid,
        "turn_id": turn_id or new_id("t-"),
        "meta": meta,
        "metadata": metadata,
        "ts": ts,
    }
    return _command("start_episode", args, eid)


def add_turn(
    episode_id: str,
    role: str,
    content: str,
    *,
    metadata: dict[str, Any] | None = None,
    tool_calls: list[Any] | None = None,
    tool_call_id: str | None = None,
    turn_id: str | None = None,
    ts: float | None = None,
) -> Command:
    """Queue one message of the episode; returns the turn id."""
    _check_str("episode_id", episode_id, empty_ok=False)
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, not {role!r}")
    _check_str("content", content)
    _check_dict("metadata", metadata)
    if tool_calls is not None and not isinstance(tool_calls, list):
        raise ValueError("tool_calls must be a list or None")
    if tool_call_id is not None:
        _check_str("tool_call_id", tool_call_id)
    tid = turn_id or new_id("t-")
    args = {
        "episode_id": episode_id,
        "role": role,
        "content": content,
        "turn_id": tid,
        "metadata": metadata,
        "tool_calls": tool_calls,
        "tool_call_id": tool_call_id,
        "ts": ts,
    }
    return _command("add_turn", args, tid)


def finalize_episode(episode_id: str, r_task: float | None = None, *, ts: float | None = None) -> Command:
    """Queue the episode's end, with the task's reward ``r_task`` when the agent knows it."""
    _check_str("episode_id", episode_id, empty_ok=False)
    if r_task is not None and not _is_number(r_task):
        raise ValueError("r_task must be a number or None")
    return _command("finalize_episode", {"episode_id": episode_id, "r_task": r_task, "ts": ts})


def abandon_episode(episode_id: str, reason: str | None = None, *, ts: float | None = None) -> Command:
    """Queue the episode's end without a result (the agent gave up on it)."""
    _check_str("episode_id", episode_id, empty_ok=False)
    if reason is not None:
        _check_str("reason", reason)
    return _command("abandon_episode", {"episode_id": episode_id, "reason": reason, "ts": ts})


def close_session(session_id: str, *, ts: float | None = None) -> Command:
    """Queue the session's end (its open episodes end with it)."""
    _check_str("session_id", session_id, empty_ok=False)
    return _command("close_session", {"session_id": session_id, "ts": ts})


def _check_recall_results(results: Any) -> None:
    if not isinstance(results, list):
        raise ValueError("results must be a list of dicts")
    for i, item in enumerate(results):
        if not isinstance(item, dict):
            raise ValueError(f"results[{i}] must be a dict")
        if not (item.get("turn_id") or item.get("text")):
            raise ValueError(f"results[{i}] needs a 'turn_id' or a 'text'")
        score = item.get("score")
        if score is not None and not _is_number(score):
            raise ValueError(f"results[{i}].score must be a number")


def record_recall(
    query: str,
    results: list[dict[str, Any]],
    *,
    session_id: str | None = None,
    episode_id: str | None = None,
    params: dict[str, Any] | None = None,
    source: str = "agent",
    diagnostics: dict[str, Any] | None = None,
    recall_id: str | None = None,
    ts: float | None = None,
) -> Command:
    """Queue a recall the agent made with its own memory, for memviewer's recall log.

    ``results`` are what came back, best first: ``{"turn_id": ...}`` (a memviewer
    turn) or ``{"text": ...}``, each with an optional ``score`` and ``rank``.
    Returns the recall id (minted unless given); a replay with the same id is a no-op.
    """
    _check_str("query", query)
    _check_recall_results(results)
    _check_ids((("session_id", session_id), ("episode_id", episode_id), ("source", source)))
    _check_dict("params", params)
    _check_dict("diagnostics", diagnostics)
    rid = recall_id or new_id("r-")
    args = {
        "recall_id": rid,
        "query": query,
        "results": results,
        "session_id": session_id,
        "episode_id": episode_id,
        "params": params,
        "source": source,
        "diagnostics": diagnostics,
        "ts": ts,
    }
    return _command("record_recall", args, rid)


def _check_llm_call_numbers(
    counts: tuple[tuple[str, Any], ...], latency_ms: Any, id_lists: tuple[tuple[str, Any], ...]
) -> None:
    for name, number in counts:
        if number is not None and (isinstance(number, bool) or not isinstance(number, int) or number < 0):
            raise ValueError(f"{name} must be a non-negative int or None")
    if latency_ms is not None and not _is_number(latency_ms):
        raise ValueError("latency_ms must be a number or None")
    for name, ids in id_lists:
        if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids)):
            raise ValueError(f"{name} must be a list of ids or None")


def record_llm_call(
    input: list[dict[str, Any]] | str,
    output: list[dict[str, Any]] | str | None = None,
    *,
    session_id: str | None = None,
    episode_id: str | None = None,
    model: str | None = None,
    provider: str | None = None,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    latency_ms: float | None = None,
    recall_ids: list[str] | None = None,
    in_prompt: list[str] | None = None,
    context_window: int | None = None,
    meta: dict[str, Any] | None = None,
    call_id: str | None = None,
    ts: float | None = None,
) -> Command:
    """Queue one LLM call: the messages the model was sent (``input``, in order: ``{"role",
    "content"}`` or the OpenTelemetry ``{"role", "parts"}`` shape) and what it answered.

    ``recall_ids`` are the recalls (``record_recall``) whose results fed this prompt;
    ``in_prompt`` the turn or document ids the agent put into it (else memviewer matches
    recalled items by text). ``ts`` is when the request was sent. Input that is not a
    list of messages is stored as received and flagged, never refused. Returns the call id.
    """
    if not isinstance(input, list | str):
        raise ValueError("input must be a list of messages (or their JSON text)")
    if output is not None and not isinstance(output, list | str):
        raise ValueError("output must be a list of messages, their JSON text, or None")
    _check_ids(
        (("session_id", session_id), ("episode_id", episode_id), ("model", model), ("provider", provider))
    )
    _check_llm_call_numbers(
        (
            ("input_tokens", input_tokens),
            ("output_tokens", output_tokens),
            ("context_window", context_window),
        ),
        latency_ms,
        (("recall_ids", recall_ids), ("in_prompt", in_prompt)),
    )
    _check_dict("meta", meta)
    cid = call_id or new_id("c-")
    usage = {
        k: v for k, v in (("input_tokens", input_tokens), ("output_tokens", output_tokens)) if v is not None
    }
    args = {
        "call_id": cid,
        "input": input,
        "output": output,
        "session_id": session_id,
        "episode_id": episode_id,
        "model": model,
        "provider": provider,
        "usage": usage or None,
        "latency_ms": latency_ms,
        "recall_ids": recall_ids,
        "in_prompt": in_prompt,
        "context_window": context_window,
        "meta": meta,
        "ts": ts,
    }
    return _command("record_llm_call", args, cid)


def raw(command: dict[str, Any]) -> Command:
    """Queue a raw protocol command ``{"op": ..., ...}`` (ids must already be in it)."""
    if not isinstance(command, dict) or not isinstance(command.get("op"), str):
        raise ValueError("a command is a dict with an 'op'")
    return Command(command["op"], {k: v for k, v in command.items() if k not in ("op", "cid")})
