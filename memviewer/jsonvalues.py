"""Rules for JSON values a user or a client hands over, shared by the importers, the
CLI and the hub's frame check (kept out of the transport module so readers of files
do not depend on the wire).

* ``loads_strict``: ``json.loads`` that turns everything unusable into a ``ValueError``
  with a reason fit to show.
* ``check_value``: why a decoded value could never be stored and read back (nested
  deeper than ``MAX_DEPTH``, a lone UTF-16 surrogate), or None.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Deepest nesting of arrays/objects accepted anywhere (a publish command sits 3 levels
#: down). Python's own JSON codec fails near ~1,000 levels, and a value stored deeper than
#: it can be encoded would make every later read of it fail; 64 is far beyond real metadata.
MAX_DEPTH = 64

_SURROGATE = re.compile("[\ud800-\udfff]")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def loads_strict(text: str) -> Any:
    """``json.loads`` for files and lines a user hands over (imports, ``recall --batch``).

    Everything unusable is a ``ValueError`` with a reason fit to show: JSON errors with
    their position, ``NaN``/``Infinity`` (not JSON; an export could not write them back),
    absurd nesting (``RecursionError`` otherwise) and integers past Python's digit limit.
    """
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError as exc:  # a constant, or an integer beyond the digit limit
        raise ValueError(str(exc).split(";")[0]) from None


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_value(obj: Any, *, surrogates: bool = True, max_depth: int = MAX_DEPTH) -> str | None:
    """Why ``obj`` cannot travel and be stored (too deep, a lone surrogate), or None.

    Iterative, so a hostile depth cannot exhaust the stack. A quick pass visits only
    containers (and strings when ``surrogates``); only when it finds a problem does a
    second pass name the path of the first offending value (``params.commands[3].meta``).
    """
    if not _has_problem(obj, surrogates, max_depth):
        return None
    return _describe_problem(obj, surrogates, max_depth)


def _has_problem(obj: Any, surrogates: bool, max_depth: int) -> bool:
    if isinstance(obj, str):
        return surrogates and _SURROGATE.search(obj) is not None
    if not isinstance(obj, dict | list):
        return False
    stack: list[tuple[Any, int]] = [(obj, 0)]
    while stack:
        value, depth = stack.pop()
        if depth >= max_depth:
            return True
        if isinstance(value, dict):
            if surrogates and any(isinstance(k, str) and _SURROGATE.search(k) for k in value):
                return True
            children: Any = value.values()
        else:
            children = value
        for child in children:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
            elif surrogates and isinstance(child, str) and _SURROGATE.search(child):
                return True
    return False


def _describe_problem(obj: Any, surrogates: bool, max_depth: int) -> str | None:
    def at(path: str) -> str:
        return "the top" if not path else path if len(path) <= 60 else path[:59] + "…"

    stack: list[tuple[Any, int, str]] = [(obj, 0, "")]
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, str):
            if surrogates and _SURROGATE.search(value):
                return f"holds a lone UTF-16 surrogate (not valid Unicode) at {at(path)}"
            continue
        if isinstance(value, dict):
            items: Any = [(f"{path}.{k}" if path else str(k), v) for k, v in value.items()]
            keys: Any = value.keys()
        elif isinstance(value, list):
            items = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
            keys = ()
        else:
            continue
        if depth >= max_depth:
            return f"is nested deeper than {max_depth} levels at {at(path)}"
        if surrogates:
            for k in keys:
                if isinstance(k, str) and _SURROGATE.search(k):
                    return f"holds a lone UTF-16 surrogate (not valid Unicode) in a key at {at(path)}"
        stack.extend((v, depth + 1, p) for p, v in reversed(items))
    return None
