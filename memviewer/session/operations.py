"""The shape of the manager's operation table, and the look-up every command goes through.

An op's arguments are ``memviewer.ops`` (declared once, shared with the Publisher's
builders); the manager pairs each op with its handler (``manager.OPERATIONS``, built by
``table``, which insists on exactly the declared ops). ``lookup`` finds a command's entry and
checks its argument names, so an op is accepted only if it is in the table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from memviewer import ops
from memviewer.errors import INVALID_ARGUMENT, MemviewerError

M = TypeVar("M")


@dataclass(frozen=True)
class Operation(Generic[M]):
    """One op: the argument names it takes and the call on the manager ``M`` that runs it."""

    args: ops.OpArgs
    handler: Callable[[M, dict[str, Any]], dict[str, Any]]


def table(handlers: Mapping[str, Callable[[M, dict[str, Any]], dict[str, Any]]]) -> dict[str, Operation[M]]:
    """The operation table, in ``memviewer.ops.OPS``'s order; a handler for an op that is not
    declared, or a declared op without one, fails at import."""
    if set(handlers) != set(ops.OPS):
        raise AssertionError(f"handlers {sorted(handlers)} != declared ops {sorted(ops.OPS)}")
    return {name: Operation(spec, handlers[name]) for name, spec in ops.OPS.items()}


def lookup(operations: Mapping[str, Operation[M]], command: Any) -> tuple[str, Operation[M], dict[str, Any]]:
    """A protocol command's op, table entry and arguments, names checked; ``invalid_argument``
    for a command that is no object, an unknown op, an unknown or a missing argument."""
    if not isinstance(command, dict):
        raise MemviewerError(INVALID_ARGUMENT, "a command must be an object")
    op = command.get("op")
    entry = operations.get(op) if isinstance(op, str) else None
    if entry is None or not isinstance(op, str):
        raise MemviewerError(INVALID_ARGUMENT, f"unknown op {op!r}; expected one of {tuple(operations)}")
    args = {k: v for k, v in command.items() if k not in ("op", "cid")}
    problem = entry.args.problem(args)
    if problem is not None:
        raise MemviewerError(INVALID_ARGUMENT, f"{op}: {problem}")
    return op, entry, args
