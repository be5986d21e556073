"""OTLP export requests (protobuf or JSON) to plain records the GenAI mapping reads.

Both encodings become the same shapes, so ``genai_map`` never sees protobuf:

* ``SpanRecord``: trace/span ids as lowercase hex, times in epoch seconds, attributes
  as plain Python values (``AnyValue`` arrays → lists, kvlists → dicts, bytes → hex),
  span events, status and the resource's attributes.
* ``LogRecord``: the same for a log record (event name, body, attributes, ids).

A body that is not a valid request raises ``OtlpDecodeError`` (the receiver answers 400).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

from memviewer.jsonvalues import check_value


class OtlpDecodeError(ValueError):
    """The body is not an OTLP export request of the expected kind."""


@dataclass
class SpanEvent:
    name: str
    time: float
    attrs: dict[str, Any]


@dataclass
class SpanRecord:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start: float
    end: float
    attrs: dict[str, Any]
    resource: dict[str, Any]
    events: list[SpanEvent] = field(default_factory=list)
    status_code: int = 0  # 0 unset, 1 ok, 2 error
    status_message: str = ""
    scope: str = ""
    # JSON attributes as the mapping parsed them, ``key -> (ok, value)``: the turns and the
    # LLM call read the same ``gen_ai.input.messages``, parsed once (``genai_calls.attr_json``)
    parsed: dict[str, tuple[bool, Any]] = field(default_factory=dict, repr=False, compare=False)


@dataclass
class LogRecord:
    event_name: str
    time: float
    body: Any
    attrs: dict[str, Any]
    resource: dict[str, Any]
    trace_id: str = ""
    span_id: str = ""
    scope: str = ""


def _ns(value: Any) -> float:
    try:
        return int(value or 0) / 1e9
    except (TypeError, ValueError):
        raise OtlpDecodeError(f"a time is not a whole number of nanoseconds: {value!r}") from None


# -- protobuf ------------------------------------------------------------------------
def _pb_value(v: Any) -> Any:
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_pb_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _pb_value(kv.value) for kv in v.kvlist_value.values}
    if which == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, which)


def _pb_attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: _pb_value(kv.value) for kv in kvs}


def decode_traces_pb(body: bytes) -> list[SpanRecord]:
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    req = ExportTraceServiceRequest()
    try:
        req.ParseFromString(body)
    except (DecodeError, ValueError, RecursionError) as exc:
        raise OtlpDecodeError(f"not an OTLP trace request (protobuf): {exc}") from None
    out: list[SpanRecord] = []
    for rs in req.resource_spans:
        resource = _pb_attrs(rs.resource.attributes)
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(
                    SpanRecord(
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_span_id=s.parent_span_id.hex(),
                        name=s.name,
                        start=s.start_time_unix_nano / 1e9,
                        end=s.end_time_unix_nano / 1e9,
                        attrs=_pb_attrs(s.attributes),
                        resource=resource,
                        events=[
                            SpanEvent(e.name, e.time_unix_nano / 1e9, _pb_attrs(e.attributes))
                            for e in s.events
                        ],
                        status_code=int(s.status.code),
                        status_message=s.status.message,
                        scope=ss.scope.name,
                    )
                )
    return out


def decode_logs_pb(body: bytes) -> list[LogRecord]:
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    req = ExportLogsServiceRequest()
    try:
        req.ParseFromString(body)
    except (DecodeError, ValueError, RecursionError) as exc:
        raise OtlpDecodeError(f"not an OTLP logs request (protobuf): {exc}") from None
    out: list[LogRecord] = []
    for rl in req.resource_logs:
        resource = _pb_attrs(rl.resource.attributes)
        for sl in rl.scope_logs:
            for r in sl.log_records:
                attrs = _pb_attrs(r.attributes)
                name = getattr(r, "event_name", "") or str(attrs.get("event.name") or "")
                out.append(
                    LogRecord(
                        event_name=name,
                        time=(r.time_unix_nano or r.observed_time_unix_nano) / 1e9,
                        body=_pb_value(r.body),
                        attrs=attrs,
                        resource=resource,
                        trace_id=r.trace_id.hex(),
                        span_id=r.span_id.hex(),
                        scope=sl.scope.name,
                    )
                )
    return out


# -- JSON (the OTLP/JSON encoding: lowerCamelCase, hex ids, int64 as strings) --------------
def _js_value(v: Any) -> Any:
    if not isinstance(v, dict):
        raise OtlpDecodeError(f"an AnyValue must be an object, not {type(v).__name__}")
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            raise OtlpDecodeError(f"intValue {v['intValue']!r} is not a whole number") from None
    if "doubleValue" in v:
        try:
            return float(v["doubleValue"])
        except (TypeError, ValueError):
            raise OtlpDecodeError(f"doubleValue {v['doubleValue']!r} is not a number") from None
    if "arrayValue" in v:
        return [_js_value(x) for x in _list(v["arrayValue"], "values")]
    if "kvlistValue" in v:
        return _js_attrs(_list(v["kvlistValue"], "values"))
    if "bytesValue" in v:
        try:
            return base64.b64decode(v["bytesValue"]).hex()
        except (binascii.Error, TypeError, ValueError):
            raise OtlpDecodeError("bytesValue is not base64") from None
    return None


def _list(obj: Any, key: str) -> list[Any]:
    if not isinstance(obj, dict):
        raise OtlpDecodeError(f"expected an object holding {key!r}, not {type(obj).__name__}")
    value = obj.get(key) or []
    if not isinstance(value, list):
        raise OtlpDecodeError(f"{key!r} must be a list, not {type(value).__name__}")
    return value


def _js_attrs(kvs: Any) -> dict[str, Any]:
    if not isinstance(kvs, list):
        raise OtlpDecodeError("attributes must be a list")
    out: dict[str, Any] = {}
    for kv in kvs:
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            raise OtlpDecodeError("an attribute must be an object with a string 'key'")
        out[kv["key"]] = _js_value(kv.get("value") or {})
    return out


def _hex_id(value: Any, size: int, what: str) -> str:
    if value in (None, ""):
        return ""
    if not isinstance(value, str):
        raise OtlpDecodeError(f"{what} must be a hex string")
    text = value.lower()
    if len(text) != size * 2 or any(c not in "0123456789abcdef" for c in text):
        raise OtlpDecodeError(f"{what} {value!r} is not {size} bytes of hex")
    return text


def _loads(body: bytes) -> Any:
    """The body as JSON; a value that could never be stored (a lone UTF-16 surrogate such as
    ``"\\ud800"``, absurd nesting) is a malformed body (400), not a storage failure later."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise OtlpDecodeError(f"not valid JSON: {exc}") from None
    problem = check_value(data)
    if problem is not None:
        raise OtlpDecodeError(f"not a valid request: {problem}")
    return data


def decode_traces_json(body: bytes) -> list[SpanRecord]:
    data = _loads(body)
    out: list[SpanRecord] = []
    for rs in _list(data, "resourceSpans"):
        resource = _js_attrs(_list(rs.get("resource") or {}, "attributes")) if isinstance(rs, dict) else {}
        for ss in _list(rs, "scopeSpans"):
            scope = ss.get("scope") if isinstance(ss, dict) else None
            for s in _list(ss, "spans"):
                if not isinstance(s, dict):
                    raise OtlpDecodeError("a span must be an object")
                status = s.get("status") or {}
                out.append(
                    SpanRecord(
                        trace_id=_hex_id(s.get("traceId"), 16, "traceId"),
                        span_id=_hex_id(s.get("spanId"), 8, "spanId"),
                        parent_span_id=_hex_id(s.get("parentSpanId"), 8, "parentSpanId"),
                        name=str(s.get("name") or ""),
                        start=_ns(s.get("startTimeUnixNano")),
                        end=_ns(s.get("endTimeUnixNano")),
                        attrs=_js_attrs(s.get("attributes") or []),
                        resource=resource,
                        events=[
                            SpanEvent(
                                str(e.get("name") or ""),
                                _ns(e.get("timeUnixNano")),
                                _js_attrs(e.get("attributes") or []),
                            )
                            for e in _list(s, "events")
                            if isinstance(e, dict)
                        ],
                        status_code=int(status.get("code") or 0) if isinstance(status, dict) else 0,
                        status_message=str(status.get("message") or "") if isinstance(status, dict) else "",
                        scope=str((scope or {}).get("name") or "") if isinstance(scope, dict) else "",
                    )
                )
    return out


def decode_logs_json(body: bytes) -> list[LogRecord]:
    data = _loads(body)
    out: list[LogRecord] = []
    for rl in _list(data, "resourceLogs"):
        resource = _js_attrs(_list(rl.get("resource") or {}, "attributes")) if isinstance(rl, dict) else {}
        for sl in _list(rl, "scopeLogs"):
            scope = sl.get("scope") if isinstance(sl, dict) else None
            for r in _list(sl, "logRecords"):
                if not isinstance(r, dict):
                    raise OtlpDecodeError("a log record must be an object")
                attrs = _js_attrs(r.get("attributes") or [])
                out.append(
                    LogRecord(
                        event_name=str(r.get("eventName") or attrs.get("event.name") or ""),
                        time=_ns(r.get("timeUnixNano") or r.get("observedTimeUnixNano")),
                        body=_js_value(r["body"]) if isinstance(r.get("body"), dict) else None,
                        attrs=attrs,
                        resource=resource,
                        trace_id=_hex_id(r.get("traceId"), 16, "traceId"),
                        span_id=_hex_id(r.get("spanId"), 8, "spanId"),
                        scope=str((scope or {}).get("name") or "") if isinstance(scope, dict) else "",
                    )
                )
    return out
