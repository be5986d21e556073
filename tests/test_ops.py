"""The publish ops are declared once (``memviewer.ops``): the manager's operation table, its
handlers, the record checks, the batch fast path and the Publisher's builders all agree with
that declaration, and a command with a name it does not declare fails alone as
``invalid_argument``."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memviewer import ops, recall_log
from memviewer.context import calls
from memviewer.errors import MemviewerError
from memviewer.publisher import commands
from memviewer.session.manager import OPERATIONS, SessionManager
from memviewer.store.db import Store

# What a builder takes that the wire names otherwise: the token counts travel as ``usage``.
FOLDED = {"record_llm_call": {"input_tokens", "output_tokens"}}
# Names the hub accepts that no builder offers: the hub's own recall log entries (``kind``,
# ``caller``), what the OTLP receiver sends of an LLM call (``source``, ``problems``), and
# ``usage`` (built from the token counts).
HUB_ONLY = {"record_recall": {"kind", "caller"}, "record_llm_call": {"source", "problems", "usage"}}
# What a builder requires that the hub lets default: an agent's LLM call always has its
# input; the OTLP receiver may have none (``without_input``).
STRICTER = {"record_llm_call": {"input"}}
# Ops an agent does not send through a builder: the viewer and the OTLP receiver send the
# first two; ``Publisher.close()`` queues ``shutdown`` itself.
NO_BUILDER = {"delete_session", "set_session_agent", "shutdown"}
# Handlers that take ``**args`` and check the names themselves, against the same declaration.
CHECKED_BY = {"record_recall": recall_log.check_command, "record_llm_call": calls.check_command}

# A value for every required argument of every op.
VALUES: dict[str, Any] = {
    "session_id": "s1",
    "user_message": "hi",
    "episode_id": "e1",
    "role": "assistant",
    "content": "ok",
    "agent": "a",
    "recall_id": "r1",
    "query": "q",
    "results": [{"text": "x"}],
    "call_id": "c1",
    "input": [{"role": "user", "content": "hi"}],
    "episode_ids": ["e1"],
}


@pytest.fixture
def mgr(tmp_path: Path) -> Iterator[SessionManager]:
    store = Store.open(tmp_path / "m.db")
    m = SessionManager(store)
    yield m
    store.close()


def _params(fn: Any) -> tuple[set[str], set[str]]:
    """A function's keyword names and the ones without a default (``self`` and ``**`` left out)."""
    names: set[str] = set()
    required: set[str] = set()
    for p in inspect.signature(fn).parameters.values():
        if p.name == "self" or p.kind is p.VAR_KEYWORD:
            continue
        names.add(p.name)
        if p.default is p.empty:
            required.add(p.name)
    return names, required


def test_the_table_holds_every_declared_op_and_no_other() -> None:
    assert list(OPERATIONS) == list(ops.OPS)
    assert SessionManager.OPS == tuple(ops.OPS)
    for name, entry in OPERATIONS.items():
        assert entry.args is ops.OPS[name]


@pytest.mark.parametrize("op", list(ops.OPS))
def test_the_handler_takes_the_declared_arguments(op: str) -> None:
    spec = ops.OPS[op]
    names, required = _params(getattr(SessionManager, op))
    if op in CHECKED_BY:
        assert names == {"ts"}
        assert _unknown_to(CHECKED_BY[op], dict.fromkeys(spec.names)) == []
        assert _unknown_to(CHECKED_BY[op], {"zz_extra": 1}) == ["zz_extra"]
        return
    assert names == spec.names
    if op == "shutdown":  # in-process callers may pass None (every open episode); the wire may not
        assert required == set() and spec.required == {"episode_ids"}
    else:
        assert required == spec.required


def _unknown_to(check: Any, args: dict[str, Any]) -> list[str]:
    """The names ``check`` calls unknown fields in ``args`` (its other complaints left aside)."""
    try:
        check(args)
    except MemviewerError as exc:
        if "unknown fields" in exc.message:
            return list(ast.literal_eval(exc.message.split("unknown fields ", 1)[1]))
    return []


@pytest.mark.parametrize("op", [op for op in ops.OPS if op not in NO_BUILDER])
def test_the_builder_sends_the_declared_arguments(op: str) -> None:
    spec = ops.OPS[op]
    builder = getattr(commands, op)
    names, required = _params(builder)
    folded = FOLDED.get(op, set())
    assert names - folded == spec.names - HUB_ONLY.get(op, set()), op
    assert required <= spec.required | STRICTER.get(op, set())  # a builder mints the ids it is not given
    cmd = builder(**{k: VALUES[k] for k in required})
    sent = {k for k, v in cmd.args.items() if v is not None}
    assert cmd.op == op
    assert set(cmd.args) <= spec.names
    assert spec.required <= sent


@pytest.mark.parametrize("op", list(ops.OPS))
def test_an_undeclared_argument_fails_alone(mgr: SessionManager, op: str) -> None:
    cmd = {"op": op, **{k: VALUES[k] for k in ops.OPS[op].required}, "zz_extra": 1}
    results = mgr.apply_batch([cmd, {"op": "open_session", "session_id": "s-ok"}])
    assert results[0]["error"]["code"] == "invalid_argument"
    assert results[0]["error"]["message"] == f"{op}: unknown fields ['zz_extra']"
    assert results[1]["ok"]["session_id"] == "s-ok"


@pytest.mark.parametrize(
    ("op", "missing"), [(op, name) for op, spec in ops.OPS.items() for name in sorted(spec.required)]
)
def test_a_missing_required_argument_is_named(mgr: SessionManager, op: str, missing: str) -> None:
    args = {k: VALUES[k] for k in ops.OPS[op].required if k != missing}
    results = mgr.apply_batch([{"op": op, **args}])
    assert results[0]["error"] == {
        "code": "invalid_argument",
        "message": f"{op}: missing fields [{missing!r}]",
    }


def test_an_unknown_op_names_the_declared_ones(mgr: SessionManager) -> None:
    results = mgr.apply_batch([{"op": "explode"}, {"session_id": "s1"}])
    for r in results:
        assert r["error"]["code"] == "invalid_argument"
        assert "unknown op" in r["error"]["message"] and "'open_session'" in r["error"]["message"]
