"""A chat span → one ``record_llm_call`` command (pure; ``genai_map`` calls it).

The input and output are kept in the shape the span sent (``gen_ai.input.messages`` is
stored as its JSON, messages with ``parts``); the flattened shapes (``gen_ai.prompt.{i}.*``,
OpenInference ``llm.input_messages.{i}.message.*``) and message span events become
``{"role", "content"}`` messages. An attribute that is not JSON is stored as received (the
store flags it ``input_not_json``): the call is recorded even when its turns cannot be.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from memviewer.sources.otlp_decode import SpanRecord

#: ``span -> (input messages, output messages)`` of the flattened and event shapes.
Fallback = Callable[[SpanRecord], tuple[list[Any], list[Any]]]

#: Operations that are one request to a model (``invoke_agent`` runs are not).
LLM_OPS = {"chat", "text_completion", "generate_content"}
_MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
_PROVIDER_KEYS = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
_IN_TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
_OUT_TOKENS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion")
#: Span attributes an instrumented agent may set (docs/connect-your-agent.md).
IN_PROMPT_ATTR = "memviewer.in_prompt_ids"
WINDOW_ATTR = "memviewer.context_window"


def _first(attrs: dict[str, Any], keys: tuple[str, ...], kind: type | tuple[type, ...]) -> Any:
    for k in keys:
        v = attrs.get(k)
        if isinstance(v, kind) and not isinstance(v, bool):
            return v
    return None


def attr_json(span: SpanRecord, key: str) -> tuple[bool, Any]:
    """``(True, value)`` of a span attribute that is JSON text (or not text), else ``(False,
    the text)``; parsed once a span (the turns and the LLM call read the same attributes)."""
    hit = span.parsed.get(key)
    if hit is None:
        raw = span.attrs[key]
        if isinstance(raw, str):
            try:
                hit = (True, json.loads(raw))
            except (ValueError, RecursionError):
                hit = (False, raw)
        else:
            hit = (True, raw)
        span.parsed[key] = hit
    return hit


def _side(span: SpanRecord, key: str) -> Any:
    """The attribute parsed when it is JSON, else the text as received."""
    return attr_json(span, key)[1]


def _plain(messages: list[Any]) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        d: dict[str, Any] = {"role": m.role, "content": m.text}
        if m.tool_calls:
            d["tool_calls"] = m.tool_calls
        if m.tool_call_id:
            d["tool_call_id"] = m.tool_call_id
        out.append(d)
    return out


def call_messages(span: SpanRecord, fallback: Fallback) -> tuple[Any, Any]:
    """``(input, output)`` as the span carries them (lists, or raw text that is not JSON);
    ``fallback`` reads the other shapes (``genai_map``'s readers) when there is no
    ``gen_ai.input.messages`` / ``gen_ai.output.messages``."""
    a = span.attrs
    inp: Any = None
    out: Any = None
    if "gen_ai.input.messages" in a:
        inp = _side(span, "gen_ai.input.messages")
    if "gen_ai.output.messages" in a:
        out = _side(span, "gen_ai.output.messages")
    if inp is None and out is None:
        ins, outs = fallback(span)
        inp = _plain(ins) if ins else None
        out = _plain(outs) if outs else None
    system = a.get("gen_ai.system_instructions")
    if system is not None and isinstance(inp, list):
        parsed = _side(span, "gen_ai.system_instructions")
        parts = parsed if isinstance(parsed, list) else [{"type": "text", "content": str(parsed)}]
        inp = [{"role": "system", "parts": parts}, *inp]
    return inp, out


def is_llm_call(span: SpanRecord, op: str) -> bool:
    return op in LLM_OPS


def call_command(
    span: SpanRecord,
    *,
    call_id: str,
    session_id: str,
    episode_id: str | None,
    recall_ids: list[str],
    has_conversation_id: bool,
    fallback: Fallback,
) -> dict[str, Any]:
    a = span.attrs
    inp, out = call_messages(span, fallback)
    usage = {
        k: int(v)
        for k, v in (
            ("input_tokens", _first(a, _IN_TOKENS, (int, float))),
            ("output_tokens", _first(a, _OUT_TOKENS, (int, float))),
        )
        if v is not None and v >= 0
    }
    cmd: dict[str, Any] = {
        "op": "record_llm_call",
        "call_id": call_id,
        "ts": span.start,
        "session_id": session_id,
        "source": "otlp",
        "input": inp,
        "output": out,
        "latency_ms": round(max(0.0, span.end - span.start) * 1000, 3),
        "meta": {"otlp": {"trace_id": span.trace_id, "span_id": span.span_id, "span": span.name}},
    }
    if episode_id:
        cmd["episode_id"] = episode_id
    model = _first(a, _MODEL_KEYS, str)
    provider = _first(a, _PROVIDER_KEYS, str)
    if model:
        cmd["model"] = model[:200]
    if provider:
        cmd["provider"] = provider[:200]
    if usage:
        cmd["usage"] = usage
    if recall_ids:
        cmd["recall_ids"] = recall_ids
    ids = a.get(IN_PROMPT_ATTR)
    if isinstance(ids, list | tuple) and all(isinstance(i, str) and i for i in ids):
        cmd["in_prompt"] = list(ids)
    window = a.get(WINDOW_ATTR)
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        cmd["context_window"] = window
    if not has_conversation_id:
        cmd["problems"] = ["without_conversation_id"]
    return cmd
