"""``wire/fastjson`` (orjson) gives exactly what ``wire/protocol`` (the standard library) gives.

Encoding: the frame decodes to the same value, holds no raw newline before its end, and
for everything orjson refuses or would write differently the bytes are ``protocol``'s own.
Decoding: the same value (types included: an int stays an int) or the same ``RpcError``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections import OrderedDict
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memviewer.wire import fastjson, protocol

# Every code point, lone surrogates included (they are what the fallback is for).
_any_char = st.characters(codec=None, exclude_categories=())
_text = st.text(alphabet=_any_char, max_size=12) | st.sampled_from(
    [
        "",
        "\n",
        "a\nb",
        "\r\n",
        "\u2028",
        "\u2029",
        "x\u2028y\u2029z",
        "\x00\x1f\x7f",
        "\ud800",
        "\udfff",
        "😀",
    ]
)
_ints = st.integers() | st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30])
_floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [1e-5, 1e16, -0.0, 5e-324, 1.7976931348623157e308]
)
_scalars = st.none() | st.booleans() | _ints | _floats | _text
_values = st.recursive(
    _scalars,
    lambda kids: (
        st.lists(kids, max_size=5) | st.dictionaries(_text, kids, max_size=5) | st.tuples(kids, kids)
    ),
    max_leaves=30,
)


def _same(a: Any, b: Any) -> bool:
    """Equal with types: 1 is not 1.0, -0.0 is not 0.0, and NaN equals NaN (iterative: the
    frames below nest 600 deep)."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if type(x) is not type(y):
            return False
        if isinstance(x, float):
            if not (
                (math.isnan(x) and math.isnan(y)) or (x == y and math.copysign(1, x) == math.copysign(1, y))
            ):
                return False
        elif isinstance(x, list):
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif isinstance(x, dict):
            if list(x) != list(y):
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif x != y:
            return False
    return True


def _outcome(decode: Any, frame: bytes) -> tuple[Any, ...]:
    try:
        return ("ok", decode(frame))
    except protocol.RpcError as err:
        return ("error", err.code, err.message)


def _check_decoders_agree(frame: bytes) -> None:
    mine, theirs = _outcome(fastjson.decode_answer, frame), _outcome(protocol.decode_answer, frame)
    assert mine[0] == theirs[0], (frame, mine, theirs)
    if mine[0] == "ok":
        assert _same(mine[1], theirs[1]), (frame, mine, theirs)
    else:
        assert mine == theirs


def _check_frame(frame: bytes) -> None:
    assert frame.endswith(b"\n")
    assert b"\n" not in frame[:-1] and b"\r" not in frame[:-1]


@settings(max_examples=400, deadline=None)
@given(_values)
def test_an_encoded_value_decodes_as_the_standard_librarys_does(value: Any) -> None:
    mine, theirs = fastjson.encode(value), protocol.encode(value)
    _check_frame(mine)
    # The value the client reads back (or the error it gets) is the same, with either decoder.
    expect = _outcome(protocol.decode_answer, theirs)
    for got in (_outcome(protocol.decode_answer, mine), _outcome(fastjson.decode_answer, mine)):
        assert got[0] == expect[0], (value, got, expect)
        if got[0] == "ok":
            assert _same(got[1], expect[1]), (value, got, expect)
    _check_decoders_agree(theirs)


@settings(max_examples=200, deadline=None)
@given(_values)
def test_a_response_decodes_as_the_standard_librarys_does(value: Any) -> None:
    mine, theirs = fastjson.response(7, value), protocol.response(7, value)
    _check_frame(mine)
    a, b = _outcome(protocol.decode_answer, mine), _outcome(protocol.decode_answer, theirs)
    assert a[0] == b[0] and (a[0] != "ok" or _same(a[1], b[1]))


@dataclasses.dataclass
class _Point:
    x: int


_FALLBACKS: list[Any] = [
    "lone \ud800 surrogate",
    {"text": ["ok", "\udfff"]},
    2**64,
    -(2**63) - 1,
    [10**40],
    {1: "int key"},
    {True: "bool key", None: "none key"},
    {1.5: "float key"},
    {3, 1, 2},
    frozenset(["a"]),
    np.float32(0.25),
    np.int64(7),
    np.bool_(True),
    dt.datetime(2026, 12, 1, 23, 30, tzinfo=dt.UTC),
    dt.date(2026, 12, 1),
    _Point(3),
    Path("/tmp/x"),
    Decimal("1.25"),
]


@pytest.mark.parametrize("value", _FALLBACKS, ids=lambda v: type(v).__name__)
def test_what_orjson_refuses_or_writes_differently_is_the_standard_librarys_frame(value: Any) -> None:
    assert fastjson.encode(value) == protocol.encode(value)
    assert fastjson.response("r", {"v": value}) == protocol.response("r", {"v": value})


def test_nan_and_infinities_are_null() -> None:
    frame = fastjson.response(1, {"a": float("nan"), "b": [float("inf"), -float("inf")], "c": 1.5})
    assert protocol.decode_answer(frame)["result"] == {"a": None, "b": [None, None], "c": 1.5}


def test_newlines_and_line_separators_never_split_a_frame() -> None:
    value = {"t": "one\ntwo\r\nthree\u2028four\u2029five\x00\x1b", "k\n": ["\n"]}
    frame = fastjson.encode(value)
    _check_frame(frame)
    assert frame.count(b"\n") == 1
    assert protocol.decode_answer(frame) == value


def test_nesting_orjson_refuses_is_encoded_by_the_standard_library() -> None:
    deep: list[Any] = []
    node = deep
    for _ in range(400):  # orjson stops at 254 levels
        node.append([])
        node = node[0]
    assert fastjson.encode(deep) == protocol.encode(deep)


def test_subclasses_of_plain_types_encode_as_their_base() -> None:
    class Text(str):
        pass

    value = OrderedDict([("a", Text("x")), ("b", (1, 2))])
    assert protocol.decode_answer(fastjson.encode(value)) == protocol.decode_answer(protocol.encode(value))


_FRAMES = [
    b'{"a":123456789012345678901234567890}\n',  # beyond 64 bits: orjson would read a float
    b'{"a":-9223372036854775809}',
    b'{"a":18446744073709551616}',
    b'{"a":1234567890123456789.5}',
    b'{"a":0.1000000000000000055511151231257827}',
    b'{"id":"1733097600000000000 in a string"}',
    b'{"a":"\\ud800"}\n',  # a lone surrogate, escaped: refused
    b'{"a":"\\ude00\\ud83d"}',
    b'{"a":"\\ud83d\\ude00"}',  # a valid pair: a character
    b'{"a":"\xed\xa0\x80"}',  # a surrogate as raw UTF-8: invalid UTF-8
    b'{"a":"\xff"}',
    b'\xef\xbb\xbf{"a":1}',
    b"NaN",
    b'{"a":Infinity}',
    b'{"a":-Infinity}',
    b'{"a":1e400}',
    b'{"a":1e-400}',
    b"[" * 1100 + b"]" * 1100,
    b"[" * 600 + b"]" * 600,
    b"",
    b"\n",
    b"01",
    b"+1",
    b".5",
    b"1.",
    b"-",
    b"1e",
    b"[1,]",
    b"{,}",
    b'{"a":1,}',
    b"{} x",
    b"{}{}",
    b"'a'",
    b"[1 2]",
    b"tru",
    b'"a\x01"',
    b'"\\x"',
    b"\x0c{}",
    b" \t{}\r\n",
    b'{"a":1,"b":2,"a":3}',
    b'{"a":-0,"b":-0.0,"c":1E5,"d":1e-5}',
]


@pytest.mark.parametrize("frame", _FRAMES, ids=[f"{f[:24]!r}" for f in _FRAMES])
def test_a_frame_is_read_as_the_standard_library_reads_it(frame: bytes) -> None:
    _check_decoders_agree(frame)


def test_a_long_integer_stays_an_integer() -> None:
    got = fastjson.decode_answer(b'{"a":123456789012345678901234567890}\n')
    assert got == {"a": 123456789012345678901234567890} and type(got["a"]) is int


def test_what_decode_answer_refuses_is_refused_with_its_error() -> None:
    for frame in (b'{"a":"\\ud800"}\n', b'{"a":"\xff"}\n', b"{oops\n"):
        with pytest.raises(protocol.RpcError) as mine:
            fastjson.decode_answer(frame)
        with pytest.raises(protocol.RpcError) as theirs:
            protocol.decode_answer(frame)
        assert (mine.value.code, mine.value.message) == (theirs.value.code, theirs.value.message)
        assert mine.value.code == protocol.PARSE_ERROR


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40) | st.builds(lambda v: protocol.encode(v)[:-1], _values))
def test_arbitrary_bytes_are_read_as_the_standard_library_reads_them(frame: bytes) -> None:
    _check_decoders_agree(frame)
