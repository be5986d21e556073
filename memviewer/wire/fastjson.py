"""The hub's answers encoded, and the CLI's reading of them decoded, with ``orjson``.

A keyword ``search`` answer is ~14 KB of JSON: the standard library took ~0.35 ms to encode
it in the hub and ~0.3 ms to decode it in the client, a fifth of the request. ``orjson``
does each in a few tens of microseconds. It is used only where it gives exactly what
``memviewer.wire.protocol`` (the standard-library path the publisher shares) would give;
anything else goes through ``protocol`` unchanged:

* Encoding: NaN and infinities become ``null`` in both. orjson refuses (``TypeError``) lone
  UTF-16 surrogates, integers beyond 64 bits, dict keys that are not ``str``, nesting deeper
  than 254, and every type it does not know (sets, numpy scalars, float subclasses,
  datetimes and dataclasses: passed through to that refusal by option, as ``protocol``'s
  ``default`` gives them other text than orjson would): the value is then encoded by
  ``protocol.encode``, which escapes surrogates ASCII-style and handles the rest. orjson
  escapes every control character, so no raw newline can appear inside a frame. The one
  known difference left: a plain ``enum.Enum`` member (``protocol`` sends ``str(member)``,
  orjson its value); no memviewer result holds one.
* Decoding: a frame holding a run of 19 or more digits (an integer beyond 64 bits, which
  orjson reads as a float, or a long decimal) and every frame orjson refuses (lone
  surrogates, invalid UTF-8, NaN, a BOM, depth over 1024, malformed JSON) is read by
  ``protocol.decode_answer``, which accepts or refuses it with today's ``RpcError``.

Not imported by ``memviewer.client`` (the publisher imports the standard library only).
"""

from __future__ import annotations

from typing import Any

import orjson

from memviewer.wire import protocol

_OPTIONS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
# Digits to "0", everything else to ".": a run of 19 zeros is a run of 19 digits (~12 µs for a
# 14 KB answer, where the regex ``[0-9]{19}`` took ~330 µs).
_DIGITS = bytes(0x30 if 0x30 <= i <= 0x39 else 0x2E for i in range(256))
_LONG_RUN = b"0" * 19
_dumps = orjson.dumps
_loads = orjson.loads
_DecodeError = orjson.JSONDecodeError


def encode(obj: Any) -> bytes:
    """One frame, as ``protocol.encode`` would send it (same decoded value)."""
    try:
        return _dumps(obj, option=_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return protocol.encode(obj)


def response(req_id: Any, result: Any) -> bytes:
    """``protocol.response`` through ``encode``."""
    return encode({"jsonrpc": protocol.JSONRPC, "id": req_id, "result": result})


def decode_answer(line: bytes | str) -> Any:
    """``protocol.decode_answer``: the same value, or the same ``RpcError``."""
    if isinstance(line, bytes) and line.translate(_DIGITS).find(_LONG_RUN) < 0:
        try:
            return _loads(line)
        except _DecodeError:
            pass
    return protocol.decode_answer(line)
