"""OpenTelemetry GenAI spans and log records → memviewer publish commands (pure, no I/O).

The mapping (documented in docs/connect-your-agent.md):

* **Session** = ``gen_ai.conversation.id``, else ``session.id`` (OpenInference, Claude Code),
  else the trace id (one agent run, one session). Its id is ``otel-<uuid5>`` of that key.
  **Agent** = ``gen_ai.agent.name``, else the resource's ``service.name``.
* **Messages** come from whichever shape a span carries: ``gen_ai.input.messages`` /
  ``gen_ai.output.messages`` (JSON with ``parts``; also pydantic-ai's
  ``pydantic_ai.all_messages``), span events or log records (``gen_ai.user.message``,
  ``gen_ai.system.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message``,
  ``gen_ai.choice``), or the flattened attributes (``gen_ai.prompt.{i}.*``,
  ``gen_ai.completion.{i}.*``, OpenInference ``llm.input_messages.{i}.message.*`` and
  ``llm.output_messages.{i}.message.*``). ``execute_tool`` spans add the tool result.
* **Episodes**: a user message starts one (its first turn); the turns after it join it;
  the next user message finalizes it, and so does the end of the ``invoke_agent`` span
  that contained it (abandoned when that span failed). System messages before the first
  user message go to the session's metadata (``system_instructions``).
* **Ids** derive from the content, so the same history re-sent in the next chat span and
  the very same spans exported twice map to the same ids (the store treats them as
  replays): a turn is ``uuid5(session, role + sha256(text, tool calls) + occurrence)``
  (occurrence: how many identical messages came before it in that span's list), a tool
  result ``uuid5(session, "tool-result:" + tool_call_id)``, an episode
  ``uuid5(session, "episode:" + first turn id)``; log records without history use their
  own time and span id instead of the occurrence.
* **Retrieval / memory** spans (``gen_ai.operation.name`` ``retrieval`` / ``search_memory``,
  ``gen_ai.retrieval.*``, ``gen_ai.memory.*``, OpenInference ``RETRIEVER`` spans with
  ``retrieval.documents.{i}.document.*``) become ``record_recall`` commands (source
  ``otlp``) with a ``recall_id`` derived from the trace and span ids.
* **LLM calls**: every ``chat`` / ``text_completion`` / ``generate_content`` span also
  becomes one ``record_llm_call`` (``memviewer.sources.genai_calls``): the prompt and answer
  as sent, model, token usage, latency, and the recall ids of the retrieval spans seen in
  that conversation since the previous call. It is sent after the span's turns, and even
  when the span's messages cannot be read (then the store keeps them as received).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import logging
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from memviewer.sources import genai_calls
from memviewer.sources.otlp_decode import LogRecord, SpanRecord

log = logging.getLogger("memviewer.sources.otlp")

NAMESPACE = uuid.UUID("5b0e7f1c-3a51-4c57-9d8e-6f1f0c6a7d21")
MESSAGE_EVENTS = {
    "gen_ai.user.message": "user",
    "gen_ai.system.message": "system",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
    "gen_ai.choice": "assistant",
}
CHAT_OPS = {"chat", "text_completion", "generate_content", "invoke_agent", "create_agent", "execute_tool"}
RETRIEVAL_OPS = {"retrieval", "retrieve", "search_memory", "memory_search", "embeddings_search"}
MAX_TEXT = 1_000_000  # characters of one message kept (the hub's frame limit applies anyway)
#: Lengths of the messages cut to ``MAX_TEXT`` while one request is mapped (reported back to
#: the exporter in ``partial_success``: a cut is a loss the sender must hear about).
_CUTS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("otlp_cuts", default=None)


def _cap(text: str) -> str:
    """``text`` cut to ``MAX_TEXT`` characters, the cut noted for the request's answer."""
    if len(text) <= MAX_TEXT:
        return text
    cuts = _CUTS.get()
    if cuts is not None:
        cuts.append(len(text))
    return text[:MAX_TEXT]


MAX_CONVERSATIONS = 10_000  # conversations whose state the mapper remembers


_NS_BYTES = NAMESPACE.bytes


def uid(*parts: str) -> str:
    """``str(uuid.uuid5(NAMESPACE, "\\x00".join(parts)))``, built from the hash's bytes: the
    mapper makes three a span, and ``uuid.UUID`` was a tenth of the mapping's time."""
    name = "\x00".join(parts).encode("utf-8")
    h = bytearray(hashlib.sha1(_NS_BYTES + name, usedforsecurity=False).digest())
    h[6] = (h[6] & 0x0F) | 0x50  # version 5
    h[8] = (h[8] & 0x3F) | 0x80  # RFC 4122 variant
    x = h[:16].hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


def uuid7_from(ts: float, *parts: str) -> str:
    """A UUIDv7 whose time is ``ts`` and whose random bits are a hash of ``parts``:
    deterministic, so a re-exported span gives the same ``recall_id``."""
    ms = max(0, int(ts * 1000)) & ((1 << 48) - 1)
    h = int.from_bytes(hashlib.sha256("\x00".join(parts).encode()).digest()[:10], "big")
    rand_a = (h >> 68) & 0xFFF
    rand_b = h & ((1 << 62) - 1)
    value = (ms << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
    x = f"{value:032x}"  # str(uuid.UUID(int=value)) without the object
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


@dataclass
class Message:
    role: str
    text: str
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    ts: float = 0.0
    key: str | None = None  # an identity of its own (log records), instead of the occurrence

    def digest(self) -> str:
        calls = "[]"  # json.dumps([]): most messages have no tool calls
        if self.tool_calls:
            calls = json.dumps(self.tool_calls, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(f"{self.role}\x00{self.text}\x00{calls}".encode()).hexdigest()[:32]


@dataclass
class MapResult:
    commands: list[dict[str, Any]] = field(default_factory=list)
    spans: int = 0
    genai_spans: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (span id, reason)
    counters: dict[str, int] = field(default_factory=dict)
    cut: list[int] = field(default_factory=list)  # original lengths of messages cut to MAX_TEXT

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n


def remember(cache: OrderedDict[str, Any], key: str, value: Any, limit: int) -> None:
    """Put ``key`` in a bounded, oldest-first cache (the mapper's memory across requests)."""
    cache[key] = value
    if len(cache) > limit:
        cache.popitem(last=False)


@contextlib.contextmanager
def _counting_cuts(result: MapResult) -> Iterator[None]:
    """Messages ``_cap`` cuts while one request is mapped go into ``result`` (``cut``, and the
    ``messages_cut`` counter)."""
    token = _CUTS.set(result.cut)
    try:
        yield
    finally:
        _CUTS.reset(token)
        if result.cut:
            result.count("messages_cut", len(result.cut))


class BadInput(ValueError):
    """One span's or record's content cannot be read (the rest of the request goes on)."""


# -- reading message shapes ---------------------------------------------------------------
def _json_value(value: Any, what: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            raise BadInput(f"{what} is not JSON") from None
    return value


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return _cap(content)
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                text = part.get("text", part.get("content"))
                if isinstance(text, str):
                    out.append(text)
                elif part.get("type"):
                    out.append(f"[{part['type']}]")
        return _cap("\n".join(out))
    return _cap(json.dumps(content, ensure_ascii=False, sort_keys=True, default=str))


def _args_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {
        "id": str(call_id or ""),
        "type": "function",
        "function": {
            "name": str(name or ""),
            "arguments": _args_text(arguments if arguments is not None else {}),
        },
    }


def _openai_calls(raw: Any) -> list[dict[str, Any]] | None:
    """``tool_calls`` in the OpenAI shape, or the flat ``{id, name, arguments}`` one."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise BadInput("tool_calls is not a list")
    calls = []
    for c in raw:
        if not isinstance(c, dict):
            continue
        fn = c.get("function")
        if not isinstance(fn, dict):
            fn = {}
        calls.append(
            _tool_call(c.get("id"), fn.get("name", c.get("name")), fn.get("arguments", c.get("arguments")))
        )
    return calls or None


def messages_from_parts(raw: Any, what: str, ts: float) -> list[Message]:
    """The ``gen_ai.input.messages`` / ``gen_ai.output.messages`` shape (messages with ``parts``).

    A message whose parts are tool results (``tool_call_response``) becomes one ``tool``
    message per result, whatever role it was sent under (pydantic-ai sends them as ``user``).
    """
    return _parts_messages(_json_value(raw, what), what, ts)


def _parts_messages(data: Any, what: str, ts: float) -> list[Message]:
    """``messages_from_parts`` of the value already parsed."""
    if not isinstance(data, list):
        raise BadInput(f"{what} is not a list of messages")
    out: list[Message] = []
    for m in data:
        if not isinstance(m, dict):
            raise BadInput(f"{what}: a message is not an object")
        role = str(m.get("role") or "user")
        parts = m.get("parts")
        if parts is None and "content" in m:  # the older {role, content, tool_calls} shape
            out.append(
                Message(
                    _role(role),
                    _text_of(m.get("content")),
                    _openai_calls(m.get("tool_calls")),
                    _opt_str(m.get("tool_call_id")),
                    ts=ts,
                )
            )
            continue
        if not isinstance(parts, list):
            raise BadInput(f"{what}: a message has no 'parts' list")
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for p in parts:
            if not isinstance(p, dict):
                continue
            kind = p.get("type")
            if kind == "tool_call":
                calls.append(_tool_call(p.get("id"), p.get("name"), p.get("arguments")))
            elif kind == "tool_call_response":
                result = p.get("response", p.get("result"))
                out.append(
                    Message(
                        "tool", _text_of(result), None, _opt_str(p.get("id")), _opt_str(p.get("name")), ts
                    )
                )
            elif kind in ("text", "reasoning", None) and isinstance(p.get("content"), str):
                if kind == "reasoning":
                    continue  # the model's hidden reasoning is not a message of the conversation
                texts.append(p["content"])
            elif kind:
                texts.append(f"[{kind}]")
        if texts or calls:
            out.append(Message(_role(role), _cap("\n".join(texts)), calls or None, ts=ts))
    return out


def _opt_str(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


def _role(role: str) -> str:
    role = role.lower()
    if role in ("user", "human"):
        return "user"
    if role in ("system", "developer"):
        return "system"
    if role in ("tool", "function", "ipython"):
        return "tool"
    return "assistant"


def messages_from_flat(attrs: dict[str, Any], prefix: str, inner: str, ts: float) -> list[Message]:
    """``gen_ai.prompt.{i}.role`` (inner ``""``) or ``llm.input_messages.{i}.message.role``
    (inner ``"message."``) and their ``tool_calls.{j}.*`` / ``contents.{k}.*``."""
    rows: dict[int, dict[str, Any]] = {}
    head = prefix + "."
    for key, value in attrs.items():
        if not key.startswith(head):
            continue
        rest = key[len(head) :]
        index, _, field_name = rest.partition(".")
        if not index.isdigit():
            continue
        if inner and field_name.startswith(inner):
            field_name = field_name[len(inner) :]
        rows.setdefault(int(index), {})[field_name] = value
    out = []
    for i in sorted(rows):
        row = rows[i]
        text = row.get("content")
        if text is None:  # OpenInference multi-part: contents.{k}.message_content.text
            parts = [v for k, v in sorted(row.items()) if k.startswith("contents.") and k.endswith(".text")]
            text = "\n".join(str(p) for p in parts)
        calls: dict[int, dict[str, Any]] = {}
        for k, v in row.items():
            if k.startswith("tool_calls."):
                j, _, sub = k[len("tool_calls.") :].partition(".")
                if j.isdigit():
                    sub = sub.removeprefix("tool_call.")
                    calls.setdefault(int(j), {})[sub] = v
        tool_calls = [
            _tool_call(
                c.get("id"),
                c.get("name", c.get("function.name")),
                c.get("arguments", c.get("function.arguments")),
            )
            for _, c in sorted(calls.items())
        ]
        role = _role(
            str(row.get("role") or ("assistant" if "completion" in prefix or "output" in prefix else "user"))
        )
        out.append(
            Message(
                role,
                _text_of(text),
                tool_calls or None,
                _opt_str(row.get("tool_call_id")),
                ts=ts,
            )
        )
    return out


def message_from_event(name: str, attrs: dict[str, Any], body: Any, ts: float, key: str) -> Message | None:
    """One ``gen_ai.*.message`` / ``gen_ai.choice`` event (span event or log record), or
    OpenLIT's ``gen_ai.content.prompt`` / ``gen_ai.content.completion`` span events."""
    if name in ("gen_ai.content.prompt", "gen_ai.content.completion"):
        text = attrs.get("gen_ai.prompt" if name.endswith("prompt") else "gen_ai.completion")
        if not isinstance(text, str):
            return None
        return Message("user" if name.endswith("prompt") else "assistant", _cap(text), ts=ts, key=key)
    role = MESSAGE_EVENTS.get(name)
    if role is None:
        return None
    data: Any = body if isinstance(body, dict) else {}
    if not data and "gen_ai.event.content" in attrs:
        data = _json_value(attrs["gen_ai.event.content"], f"{name} gen_ai.event.content")
    if not data:
        data = attrs
    if isinstance(data, str):
        data = {"content": data}
    if not isinstance(data, dict):
        raise BadInput(f"{name}: the body is not an object")
    if name == "gen_ai.choice":
        inner = data.get("message")
        inner = _json_value(inner, "gen_ai.choice message") if inner is not None else data
        data = inner if isinstance(inner, dict) else {"content": inner}
    content = data.get("content")
    if isinstance(content, str) and content[:1] in "[{":
        try:
            content = json.loads(content)
        except ValueError:
            pass
    calls = data.get("tool_calls")
    calls = _json_value(calls, f"{name} tool_calls") if calls is not None else None
    role = _role(str(data.get("role") or role))
    tool_call_id = _opt_str(data.get("id") if role == "tool" else data.get("tool_call_id"))
    return Message(role, _text_of(content), _openai_calls(calls), tool_call_id, ts=ts, key=key)


def _span_json(span: SpanRecord, key: str) -> Any:
    """``_json_value`` of a span attribute, parsed once a span (``genai_calls.attr_json``)."""
    ok, value = genai_calls.attr_json(span, key)
    if not ok:
        raise BadInput(f"{key} is not JSON")
    return value


def span_messages(span: SpanRecord) -> list[Message]:
    """Every message a span carries, inputs first (at its start), outputs (at its end)."""
    a = span.attrs
    msgs: list[Message] = []
    system = a.get("gen_ai.system_instructions")
    if system is not None:
        data = _span_json(span, "gen_ai.system_instructions")
        msgs.append(Message("system", _text_of(data), ts=span.start))
    if "gen_ai.input.messages" in a or "gen_ai.output.messages" in a:
        if "gen_ai.input.messages" in a:
            data = _span_json(span, "gen_ai.input.messages")
            msgs += _parts_messages(data, "gen_ai.input.messages", span.start)
        if "gen_ai.output.messages" in a:
            data = _span_json(span, "gen_ai.output.messages")
            msgs += _parts_messages(data, "gen_ai.output.messages", span.end)
    elif "pydantic_ai.all_messages" in a:
        msgs += messages_from_parts(a["pydantic_ai.all_messages"], "pydantic_ai.all_messages", span.end)
    elif any(k.startswith("gen_ai.prompt.") or k.startswith("gen_ai.completion.") for k in a):
        msgs += messages_from_flat(a, "gen_ai.prompt", "", span.start)
        msgs += messages_from_flat(a, "gen_ai.completion", "", span.end)
    elif any(k.startswith("llm.input_messages.") or k.startswith("llm.output_messages.") for k in a):
        msgs += messages_from_flat(a, "llm.input_messages", "message.", span.start)
        msgs += messages_from_flat(a, "llm.output_messages", "message.", span.end)
    for i, ev in enumerate(span.events):
        m = message_from_event(ev.name, ev.attrs, None, ev.time or span.start, f"{span.span_id}:{i}")
        if m is not None:
            m.key = None  # span events are the span's history: the occurrence rule applies
            msgs.append(m)
    if _operation(span) == "execute_tool":
        call_id = _opt_str(a.get("gen_ai.tool.call.id"))
        result = a.get("gen_ai.tool.call.result", a.get("output.value"))
        if call_id and (result is not None or span.status_code == 2):
            text = _text_of(result) if result is not None else f"error: {span.status_message}"
            msgs.append(Message("tool", text, None, call_id, _opt_str(a.get("gen_ai.tool.name")), span.end))
    return msgs


def _call_messages(span: SpanRecord) -> tuple[list[Message], list[Message]]:
    """An LLM call's input and output from the flattened attributes or message events
    (``genai_calls`` reads ``gen_ai.input.messages`` itself); unreadable parts are skipped
    here, the turns' mapping reports them."""
    a = span.attrs
    ins: list[Message] = []
    outs: list[Message] = []
    try:
        for prefix, inner, side in (
            ("gen_ai.prompt", "", ins),
            ("llm.input_messages", "message.", ins),
            ("gen_ai.completion", "", outs),
            ("llm.output_messages", "message.", outs),
        ):
            if any(k.startswith(prefix + ".") for k in a):
                side += messages_from_flat(a, prefix, inner, span.start)
        for i, ev in enumerate(span.events):
            m = message_from_event(ev.name, ev.attrs, None, span.start, str(i))
            if m is not None:
                (outs if ev.name in ("gen_ai.choice", "gen_ai.content.completion") else ins).append(m)
    except BadInput:
        pass
    return ins, outs


def _operation(span: SpanRecord) -> str:
    op = span.attrs.get("gen_ai.operation.name")
    if isinstance(op, str) and op:
        return op
    kind = str(span.attrs.get("openinference.span.kind") or "").upper()
    by_kind = {"LLM": "chat", "AGENT": "invoke_agent", "TOOL": "execute_tool", "RETRIEVER": "retrieval"}
    if kind in by_kind:
        return by_kind[kind]
    first = span.name.split(" ", 1)[0]
    return first if first in CHAT_OPS | RETRIEVAL_OPS else ""


def _is_retrieval(span: SpanRecord) -> bool:
    if _operation(span) in RETRIEVAL_OPS:
        return True
    return any(
        k.startswith(("gen_ai.retrieval.", "gen_ai.memory.", "retrieval.documents.")) for k in span.attrs
    )


def _is_genai(span: SpanRecord) -> bool:
    return bool(_operation(span)) or any(k.startswith(("gen_ai.", "llm.", "retrieval.")) for k in span.attrs)


# -- the stateful mapper -------------------------------------------------------------------
@dataclass
class _Conversation:
    session_id: str
    opened: bool = False
    system: str = ""
    current_episode: str | None = None
    episode_trace: dict[str, str] = field(default_factory=dict)  # episode -> trace it was seen in
    closed: set[str] = field(default_factory=set)
    seen: OrderedDict[str, None] = field(default_factory=OrderedDict)  # turn ids sent (bounded)
    recalls: list[str] = field(default_factory=list)  # recall ids since the last LLM call
    named: bool = False  # a span named its agent (``gen_ai.agent.name``); later ones do not rename

    def saw(self, tid: str) -> bool:
        return tid in self.seen

    def mark(self, tid: str) -> None:
        remember(self.seen, tid, None, 5000)


class GenAIMapper:
    """Keeps per-conversation state across requests (which turns were already sent, the
    open episode) so re-sent history costs nothing; forgetting it (a hub restart) only
    means the store sees replays, which it answers as no-ops."""

    def __init__(self, max_conversations: int = MAX_CONVERSATIONS) -> None:
        self.max_conversations = max_conversations
        self._convs: OrderedDict[str, _Conversation] = OrderedDict()
        self._trace_conv: OrderedDict[str, str] = OrderedDict()  # trace id -> conversation key
        # trace id -> gen_ai.agent.name seen in it, across requests: a chat span exported in a
        # later batch than its agent span still gets the name
        self._trace_agent: OrderedDict[str, str] = OrderedDict()

    # conversation keys
    def _conv_key(self, attrs: dict[str, Any], trace_id: str, result: MapResult) -> str:
        for name in ("gen_ai.conversation.id", "session.id"):
            value = attrs.get(name)
            if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
                key = f"conversation:{value}"
                if trace_id:
                    remember(self._trace_conv, trace_id, key, self.max_conversations)
                return key
        if not trace_id:  # "trace:none" would merge unrelated spans of every request into one session
            raise BadInput(
                "has neither a trace id nor gen_ai.conversation.id/session.id: no session to put it in"
            )
        if trace_id in self._trace_conv:
            return self._trace_conv[trace_id]
        result.count("without_conversation_id")
        return f"trace:{trace_id}"

    def _conv(self, key: str) -> _Conversation:
        conv = self._convs.get(key)
        if conv is None:
            conv = _Conversation("otel-" + uid(key))
            remember(self._convs, key, conv, self.max_conversations)
        else:
            self._convs.move_to_end(key)
        return conv

    def _open(
        self, conv: _Conversation, key: str, agent: str, meta: dict[str, Any], ts: float
    ) -> list[dict[str, Any]]:
        if conv.opened:
            return []
        conv.opened = True
        value = key.split(":", 1)[1]
        meta = {**meta, "otlp": {**meta.get("otlp", {}), key.split(":", 1)[0]: value}}
        if conv.system:
            meta["system_instructions"] = conv.system[:8000]
        return [
            {
                "op": "open_session",
                "session_id": conv.session_id,
                "agent": agent,
                "scope": "agent",
                "scope_id": agent,
                "source": "otlp",
                "meta": meta,
                "ts": ts,
            }
        ]

    def map_spans(self, spans: list[SpanRecord]) -> MapResult:
        result = MapResult(spans=len(spans))
        with _counting_cuts(result):
            return self._map_spans(spans, result)

    def _map_spans(self, spans: list[SpanRecord], result: MapResult) -> MapResult:
        ordered = sorted(spans, key=lambda s: (s.start, s.end))
        for s in ordered:
            name = s.attrs.get("gen_ai.agent.name")
            if isinstance(name, str) and name and s.trace_id and s.trace_id not in self._trace_agent:
                remember(self._trace_agent, s.trace_id, name, self.max_conversations)
        for span in ordered:
            if "gen_ai.agent.name" not in span.attrs and span.trace_id in self._trace_agent:
                # a chat span under an agent run, in this export or an earlier one
                span.attrs["gen_ai.agent.name"] = self._trace_agent[span.trace_id]
            if not _is_genai(span):
                result.count("spans_ignored")
                continue
            result.genai_spans += 1
            try:
                self._map_span(span, result)
            except BadInput as exc:
                result.rejected.append((span.span_id, f"span {span.span_id} ({span.name}): {exc}"))
                result.count("bad_messages")
        return result

    def _name_agent(self, conv: _Conversation, span: SpanRecord, result: MapResult) -> None:
        """The first span of an opened conversation that names its agent names the session's
        agent: a session opened from a chat span exported before its agent span (a
        ``SimpleSpanProcessor``, a batch boundary) got the service name; the hub's
        ``set_session_agent`` is a no-op when the name is already the session's."""
        name = span.attrs.get("gen_ai.agent.name")
        if conv.named or not conv.opened or not isinstance(name, str) or not name:
            return
        conv.named = True
        result.commands.append(
            {"op": "set_session_agent", "session_id": conv.session_id, "agent": name[:200], "ts": span.start}
        )

    def _agent(self, attrs: dict[str, Any], resource: dict[str, Any]) -> str:
        for value in (attrs.get("gen_ai.agent.name"), resource.get("service.name")):
            if isinstance(value, str) and value:
                return value[:200]
        return "otel"

    def _span_meta(self, span: SpanRecord) -> dict[str, Any]:
        a = span.attrs
        out: dict[str, Any] = {"otlp": {"trace_id": span.trace_id}}
        for name in ("gen_ai.provider.name", "gen_ai.system", "gen_ai.request.model", "service.name"):
            value = a.get(name, span.resource.get(name))
            if isinstance(value, str | int | float) and not isinstance(value, bool):
                out["otlp"][name] = value
        return out

    def _map_span(self, span: SpanRecord, result: MapResult) -> None:
        key = self._conv_key(span.attrs, span.trace_id, result)
        conv = self._conv(key)
        agent = self._agent(span.attrs, span.resource)
        if _is_retrieval(span):
            result.commands += self._open(conv, key, agent, self._span_meta(span), span.start)
            cmd = self._recall(span, conv)
            result.commands.append(cmd)
            conv.recalls = [*conv.recalls[-50:], cmd["recall_id"]]
            result.count("recalls")
            return
        op = _operation(span)
        try:
            messages = span_messages(span)
        except BadInput:
            self._llm_call(span, op, conv, result)  # the call is kept as received, its turns cannot be
            raise
        self._place(conv, key, agent, self._span_meta(span), messages, span.trace_id, span.span_id, result)
        self._name_agent(conv, span, result)
        self._llm_call(span, op, conv, result)
        if op == "invoke_agent" and conv.current_episode is not None:
            ep = conv.current_episode
            if conv.episode_trace.get(ep) == span.trace_id and ep not in conv.closed:
                conv.closed.add(ep)
                if span.status_code == 2:
                    result.commands.append(
                        {
                            "op": "abandon_episode",
                            "episode_id": ep,
                            "reason": f"agent run failed: {span.status_message}"[:500],
                            "ts": span.end,
                        }
                    )
                else:
                    result.commands.append({"op": "finalize_episode", "episode_id": ep, "ts": span.end})

    def _place(
        self,
        conv: _Conversation,
        key: str,
        agent: str,
        meta: dict[str, Any],
        messages: list[Message],
        trace_id: str,
        span_id: str,
        result: MapResult,
    ) -> None:
        """Turn ids, episodes and the commands for the messages not yet sent."""
        occurrences: dict[str, int] = {}
        episode: str | None = None  # the episode of the latest user message in this list
        for m in messages:
            if m.role == "tool" and m.tool_call_id:
                tid = uid(conv.session_id, "tool-result:" + m.tool_call_id)
            else:
                digest = m.digest()
                if m.key is not None:
                    tid = uid(conv.session_id, f"{m.role}:{digest}:record:{m.key}")
                else:
                    n = occurrences.get(digest, 0)
                    occurrences[digest] = n + 1
                    tid = uid(conv.session_id, f"{m.role}:{digest}:{n}")
            if m.role == "user":
                episode = uid(conv.session_id, "episode:" + tid)
            if conv.saw(tid):
                continue
            if m.role == "user" and episode is not None:  # (a user message always names one)
                result.commands += self._open(conv, key, agent, meta, m.ts)
                prev = conv.current_episode
                if prev is not None and prev != episode and prev not in conv.closed:
                    conv.closed.add(prev)
                    result.commands.append({"op": "finalize_episode", "episode_id": prev, "ts": m.ts})
                result.commands.append(
                    {
                        "op": "start_episode",
                        "session_id": conv.session_id,
                        "user_message": m.text if m.text.strip() else "(empty message)",
                        "episode_id": episode,
                        "turn_id": tid,
                        "metadata": {"source": "otlp", "span_id": span_id},
                        "ts": m.ts,
                    }
                )
                conv.current_episode = episode
                conv.episode_trace[episode] = trace_id
                conv.mark(tid)
                result.count("turns")
                continue
            target = episode or conv.current_episode
            if target is None:
                if m.role == "system" and not conv.opened:
                    conv.system = (
                        (conv.system + "\n" + m.text).strip() if m.text not in conv.system else conv.system
                    )
                    conv.mark(tid)
                    continue
                if m.role == "system" and m.text in conv.system:
                    conv.mark(tid)
                    continue
                result.count("messages_without_episode")
                log.info("a %s message before any user message in %s is not stored (no episode)", m.role, key)
                conv.mark(tid)
                continue
            result.commands += self._open(conv, key, agent, meta, m.ts)
            cmd: dict[str, Any] = {
                "op": "add_turn",
                "episode_id": target,
                "role": m.role,
                "content": m.text,
                "turn_id": tid,
                "metadata": {"source": "otlp", "span_id": span_id, **({"tool": m.name} if m.name else {})},
                "ts": m.ts,
            }
            if m.tool_calls:
                cmd["tool_calls"] = m.tool_calls
            if m.tool_call_id:
                cmd["tool_call_id"] = m.tool_call_id
            result.commands.append(cmd)
            conv.mark(tid)
            result.count("turns")

    def map_logs(self, records: list[LogRecord]) -> MapResult:
        """``gen_ai.*`` event records, and Claude Code's ``user_prompt`` / ``tool_result``."""
        result = MapResult(spans=len(records))
        with _counting_cuts(result):
            return self._map_logs(records, result)

    def _map_logs(self, records: list[LogRecord], result: MapResult) -> MapResult:
        for i, r in enumerate(sorted(records, key=lambda r: r.time)):
            name = r.event_name or (
                r.body if isinstance(r.body, str) and r.body.startswith("claude_code.") else ""
            )
            try:
                m = self._log_message(name, r, i)
            except BadInput as exc:
                result.rejected.append((r.span_id, f"log record {name or '?'}: {exc}"))
                result.count("bad_messages")
                continue
            if m is None:
                result.count("records_ignored")
                continue
            result.genai_spans += 1
            try:
                key = self._conv_key(r.attrs, r.trace_id, result)
            except BadInput as exc:
                result.rejected.append((r.span_id, f"log record {name or '?'}: {exc}"))
                result.count("bad_messages")
                continue
            conv = self._conv(key)
            agent = self._agent(r.attrs, r.resource)
            meta = {"otlp": {"trace_id": r.trace_id}} if r.trace_id else {"otlp": {}}
            self._place(conv, key, agent, meta, [m], r.trace_id, r.span_id, result)
        return result

    def _log_message(self, name: str, r: LogRecord, i: int) -> Message | None:
        key = f"{r.trace_id}:{r.span_id}:{r.time!r}:{name}"
        if name in MESSAGE_EVENTS:
            return message_from_event(name, r.attrs, r.body, r.time, key)
        short = name.removeprefix("claude_code.")
        if short == "user_prompt":
            prompt = r.attrs.get("prompt")
            text = (
                prompt
                if isinstance(prompt, str)
                else f"<prompt not exported; {r.attrs.get('prompt_length', '?')} chars>"
            )
            return Message("user", _cap(text), ts=r.time, key=key)
        if short == "tool_result":
            tool = str(r.attrs.get("tool_name") or "tool")
            params = r.attrs.get("tool_parameters")
            ok = r.attrs.get("success")
            text = f"{tool}: success={ok}" + (f" {params}" if params else "")
            return Message("tool", _cap(text), name=tool, ts=r.time, key=key)
        return None

    def _llm_call(self, span: SpanRecord, op: str, conv: _Conversation, result: MapResult) -> None:
        """A chat span as a ``record_llm_call`` (once: a re-exported span adds nothing),
        following the recalls seen in its conversation since the previous call."""
        if not genai_calls.is_llm_call(span, op):
            return
        call_id = uuid7_from(span.start, "llm-call", span.trace_id, span.span_id)
        if conv.saw(call_id):
            return
        conv.mark(call_id)
        result.commands.append(self._call_command(span, call_id, conv))
        result.count("llm_calls")

    def _call_command(self, span: SpanRecord, call_id: str, conv: _Conversation) -> dict[str, Any]:
        recall_ids, conv.recalls = conv.recalls, []
        has_conv = any(
            isinstance(span.attrs.get(k), str | int) and str(span.attrs.get(k))
            for k in ("gen_ai.conversation.id", "session.id")
        )
        return genai_calls.call_command(
            span,
            call_id=call_id,
            session_id=conv.session_id,
            episode_id=conv.current_episode,
            recall_ids=recall_ids,
            has_conversation_id=has_conv,
            fallback=_call_messages,
        )

    def _recall(self, span: SpanRecord, conv: _Conversation) -> dict[str, Any]:
        a = span.attrs
        query = next(
            (
                a[k]
                for k in (
                    "gen_ai.retrieval.query.text",
                    "gen_ai.retrieval.query",
                    "gen_ai.memory.query",
                    "gen_ai.prompt",
                    "input.value",
                )
                if isinstance(a.get(k), str)
            ),
            "",
        )
        results: list[dict[str, Any]] = []
        docs: dict[int, dict[str, Any]] = {}
        for k, v in a.items():
            if k.startswith("retrieval.documents."):
                i, _, sub = k[len("retrieval.documents.") :].partition(".")
                if i.isdigit():
                    docs.setdefault(int(i), {})[sub.removeprefix("document.")] = v
        for name in ("gen_ai.retrieval.documents", "gen_ai.memory.results", "gen_ai.memory.records"):
            if name in a:
                raw = _json_value(a[name], name)
                if isinstance(raw, list):
                    for j, d in enumerate(raw):
                        docs.setdefault(len(docs) + j, d if isinstance(d, dict) else {"content": d})
        for rank, (_, d) in enumerate(sorted(docs.items()), 1):
            item: dict[str, Any] = {"rank": rank}
            text = d.get("content", d.get("text"))
            if text is not None:
                item["text"] = _text_of(text)[:20_000]
            score = d.get("score")
            if isinstance(score, int | float) and not isinstance(score, bool):
                item["score"] = float(score)
            doc_id = d.get("id", d.get("turn_id"))
            if isinstance(doc_id, str) and doc_id.startswith("t-"):
                item["turn_id"] = doc_id
            elif isinstance(doc_id, str | int) and not isinstance(doc_id, bool) and str(doc_id):
                item["doc_id"] = str(doc_id)[:200]  # the retriever's own id (matched by id, shown)
            results.append(item)
        params = {
            k.split(".")[-1]: a[k]
            for k in ("gen_ai.retrieval.top_k", "gen_ai.request.top_k", "gen_ai.memory.top_k")
            if isinstance(a.get(k), int | float)
        }
        cmd: dict[str, Any] = {
            "op": "record_recall",
            "recall_id": uuid7_from(span.start, span.trace_id, span.span_id),
            "ts": span.start,
            "query": query,
            "results": results,
            "session_id": conv.session_id,
            "source": "otlp",
            "diagnostics": {
                "span": span.name,
                "trace_id": span.trace_id,
                "span_id": span.span_id,
                "duration_ms": round((span.end - span.start) * 1000, 3),
            },
        }
        if conv.current_episode:
            cmd["episode_id"] = conv.current_episode
        if params:
            cmd["params"] = params
        return cmd
