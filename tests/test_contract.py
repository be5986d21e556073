"""The request contract is declared once (``memviewer.contract.requests``) and every front
end follows it: for every field of ``SearchParams`` and ``RecallParams``, enumerated from the
models, the click option, the hub's check, the MCP schema, ``from_mapping`` and the viewer's
fields have the model's bounds and defaults; and the derivations follow a changed bound."""

from __future__ import annotations

from typing import Any

import click
import pytest
from pydantic import BaseModel, Field

from memviewer import cli_tables
from memviewer.commands.contract_options import contract_option
from memviewer.commands.golden import eval_golden
from memviewer.commands.recall import BATCH_KEYS, recall_cmd
from memviewer.commands.search import search_cmd
from memviewer.contract.requests import (
    RECALL_MODES,
    RecallParams,
    SearchParams,
    Whole,
    default,
    int_fields,
    max_length,
)
from memviewer.errors import MemviewerError
from memviewer.mcp import tools
from memviewer.wire import hub_params, protocol
from memviewer.wire.protocol import RpcError

MODELS: dict[str, type[BaseModel]] = {protocol.SEARCH: SearchParams, protocol.RECALL: RecallParams}
COMMANDS: dict[str, click.Command] = {protocol.SEARCH: search_cmd, protocol.RECALL: recall_cmd}
#: Model fields a command sets another way (a flag), or not at all, and why.
CLI_ELSEWHERE = {
    (protocol.RECALL, "mode"): "--flat",
    (protocol.RECALL, "rerank"): "runs as configured (the viewer's tick box, --vs rerank=)",
}
MCP_INPUTS = {protocol.SEARCH: tools.SESSION_SEARCH_INPUT, protocol.RECALL: tools.RECALL_INPUT}
#: session_search keeps PraisonAI's names; only its integers come from the model.
MCP_SEARCH_FIELDS = ("limit", "window")


def _cli_param(command: click.Command, name: str) -> click.Parameter | None:
    return next((p for p in command.params if p.name == name), None)


def _fields() -> list[tuple[str, str]]:
    return [(method, name) for method, model in MODELS.items() for name in model.model_fields]


def _int_fields() -> list[tuple[str, str, int, int]]:
    return [(m, n, lo, hi) for m, model in MODELS.items() for n, (lo, hi) in int_fields(model).items()]


def _base(method: str) -> dict[str, Any]:
    return {"query": "x"} if method == protocol.RECALL else {}


@pytest.mark.parametrize(("method", "name"), _fields())
def test_every_field_reaches_the_cli_the_hub_and_mcp(method: str, name: str) -> None:
    model = MODELS[method]
    param = _cli_param(COMMANDS[method], name)
    assert param is not None or (method, name) in CLI_ELSEWHERE, f"{method} has no option for {name}"
    if isinstance(param, click.Option):  # its help is the field's description
        assert str(param.help).startswith(str(model.model_fields[name].description))
        assert param.default == model.model_fields[name].default
    assert name in hub_params.SCHEMAS[method]
    assert (name in hub_params.REQUIRED.get(method, ())) == model.model_fields[name].is_required()
    props = MCP_INPUTS[method]["properties"]
    if method == protocol.RECALL:  # session_search keeps PraisonAI's names and strings
        assert (name in props) == (name not in tools.RECALL_OMITS)
        if name in props:
            said = str(model.model_fields[name].description)
            assert props[name]["description"].lower().startswith(said.lower())
        if max_length(model, name) is not None:
            assert props[name]["maxLength"] == max_length(model, name)


@pytest.mark.parametrize(("method", "name", "lo", "hi"), _int_fields())
def test_every_integer_bound_and_default_is_the_models(method: str, name: str, lo: int, hi: int) -> None:
    model = MODELS[method]
    value = default(model, name)
    # the CLI
    param = _cli_param(COMMANDS[method], name)
    assert isinstance(param, click.Option) and isinstance(param.type, click.IntRange)
    assert (param.type.min, param.type.max, param.default) == (lo, hi, value)
    # the hub refuses one past either bound before the handler (-32602) and takes the bounds
    assert hub_params.SCHEMAS[method][name] == (int,)
    for bad in (lo - 1, hi + 1):
        with pytest.raises(RpcError) as err:
            hub_params.check_params(method, {**_base(method), name: bad})
        assert err.value.code == protocol.INVALID_PARAMS and f"between {lo} and {hi}" in err.value.message
    for good in (lo, hi):
        hub_params.check_params(method, {**_base(method), name: good})
    # MCP
    if method == protocol.RECALL or name in MCP_SEARCH_FIELDS:
        prop = MCP_INPUTS[method]["properties"][name]
        assert (prop["minimum"], prop["maximum"], prop["default"]) == (lo, hi, value)
        assert f"({lo}-{hi})" in prop["description"]
    # from_mapping: the bounds in the message, the default for None
    for bad in (lo - 1, hi + 1):
        with pytest.raises(MemviewerError, match=f"{name} must be an integer from {lo} to {hi}"):
            model.from_mapping({**_base(method), name: bad})  # type: ignore[attr-defined]
    assert getattr(model.from_mapping({**_base(method), name: str(hi)}), name) == hi  # type: ignore[attr-defined]
    assert getattr(model.from_mapping({**_base(method), name: None}), name) == value  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("name", "lo", "hi"), [(n, lo, hi) for _m, n, lo, hi in _int_fields() if _m == "recall"]
)
def test_the_viewer_and_golden_take_recalls_bounds_from_the_model(name: str, lo: int, hi: int) -> None:
    from memviewer.tui.screens.recall import INT_PARAMS

    fields = {p[2]: p[3:] for p in INT_PARAMS}
    assert fields[name] == (default(RecallParams, name), lo, hi)
    golden = _cli_param(eval_golden, name)
    assert isinstance(golden, click.Option) and isinstance(golden.type, click.IntRange)
    assert (golden.type.min, golden.type.max) == (lo, hi)


def test_modes_and_batch_keys_come_from_the_model() -> None:
    assert RECALL_MODES == ("hierarchical", "flat")
    assert tools.RECALL_INPUT["properties"]["mode"]["enum"] == list(RECALL_MODES)
    assert set(BATCH_KEYS) == set(RecallParams.model_fields) - {"rerank"}
    with pytest.raises(MemviewerError, match="mode must be one of"):
        RecallParams.from_mapping({"query": "x", "mode": "sideways"})


def test_the_hub_takes_recalls_fields_and_its_own_keys_only() -> None:
    """``recall`` is no longer passed through: its keys are the model's plus ``record`` and
    ``with_tool_calls``; weights, tuning or a reranker object are refused (-32602)."""
    assert protocol.RECALL not in hub_params.PASS_THROUGH
    hub_params.check_params(
        protocol.RECALL,
        {"query": "x", "with_tool_calls": True, "record": False, "as_of": 1.5, "rerank": None},
    )
    for extra in ({"weights": {"w_dense": 1.0}}, {"reranker": "mine"}, {"hide_later": False}):
        with pytest.raises(RpcError, match="unknown parameter"):
            hub_params.check_params(protocol.RECALL, {"query": "x", **extra})
    with pytest.raises(RpcError, match="must be int"):
        hub_params.check_params(protocol.RECALL, {"query": "x", "top_k": "7"})  # digits: MCP's, not the hub's


class _Narrow(RecallParams):
    """``RecallParams`` with one bound and default changed."""

    top_k: Whole = Field(4, ge=2, le=7, description="results returned")


def test_a_changed_bound_is_followed_by_every_derivation() -> None:
    """What each front end builds from a model, built from one with ``top_k`` in 2..7 (the
    CLI's options through the generated table: ``cli_tables.model_table``)."""

    @click.command()
    @contract_option(cli_tables.model_table(_Narrow), "top_k")
    def cmd(top_k: int) -> None:
        click.echo(str(top_k))

    option = _cli_param(cmd, "top_k")
    assert isinstance(option, click.Option) and isinstance(option.type, click.IntRange)
    assert (option.type.min, option.type.max, option.default) == (2, 7, 4)
    assert hub_params.contract_schema(_Narrow)["top_k"] == (int,)
    assert int_fields(_Narrow)["top_k"] == (2, 7)
    prop = tools.contract_schema(_Narrow, omit=tools.RECALL_OMITS)["properties"]["top_k"]
    assert (prop["minimum"], prop["maximum"], prop["default"]) == (2, 7, 4)
    with pytest.raises(MemviewerError, match="top_k must be an integer from 2 to 7, not 8"):
        _Narrow.from_mapping({"query": "x", "top_k": 8})
    assert _Narrow.from_mapping({"query": "x"}).top_k == 4
