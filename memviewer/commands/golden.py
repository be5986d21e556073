"""``memviewer golden add|list|remove`` and ``memviewer eval golden [--history]``."""

from __future__ import annotations

from typing import Any

import click

from memviewer.commands.common import check_text, emit_json, fail_maybe_json, open_service, print_table, short
from memviewer.commands.contract_options import contract_option
from memviewer.commands.recall import _hub_running, _model_errors, _prepare, eval_group
from memviewer.contract.cli_table import RECALL_PARAMS
from memviewer.eval.golden_view import (
    COMPARE_COLUMNS,
    HISTORY_COLUMNS,
    METRICS,
    compare_rows,
    compare_runs,
    history_rows,
    metric_rows,
)
from memviewer.eval.golden_view import fmt as _f
from memviewer.timeutil import iso
from memviewer.words import plural


@click.group("golden")
def golden_group() -> None:
    """Golden sets: (query, expected turns) cases that `eval golden` scores."""


def _fail(as_json: bool, exc: Any) -> None:
    fail_maybe_json(as_json, exc.message, hint=exc.hint, code=exc.code)


@golden_group.command("add")
@click.argument("query")
@click.option("--turn", "turns", multiple=True, required=True, metavar="ID", help="an expected turn (repeat)")
@click.option("--scope", default=None, help="the scope the case is asked in (default: every scope)")
@click.option("--scope-id", default=None, help="the scope id the case is asked in")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def golden_add(
    ctx: click.Context, query: str, turns: tuple[str, ...], scope, scope_id, as_json: bool
) -> None:
    """Add a case: QUERY should recall every --turn."""
    from memviewer.errors import MemviewerError
    from memviewer.eval import golden

    for value, what in ((query, "the query"), (scope, "--scope"), (scope_id, "--scope-id")):
        check_text(value, what, as_json=as_json)
    for t in turns:
        check_text(t, "--turn", as_json=as_json)
    with open_service(ctx, json_errors=as_json) as svc:
        try:
            case = golden.add_case(svc, query, list(turns), scope, scope_id)
        except MemviewerError as exc:
            _fail(as_json, exc)
    if as_json:
        emit_json(case)
    else:
        click.echo(
            f"golden case {case['id']}: {short(case['query'], 60)} → {plural(len(case['turn_ids']), 'turn')}"
        )


@golden_group.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def golden_list(ctx: click.Context, as_json: bool) -> None:
    """The cases of this home."""
    from memviewer.eval import golden

    with open_service(ctx, readonly=True, json_errors=as_json) as svc:
        rows = golden.cases(svc)
    if as_json:
        emit_json({"cases": rows})
        return
    print_table(
        ("id", "query", "scope", "turns", "added"),
        [
            (
                c["id"],
                short(c["query"], 60),
                f"{c['scope'] or '*'}:{c['scope_id'] or '*'}",
                len(c["turn_ids"]),
                iso(c["created_at"]),
            )
            for c in rows
        ],
        title=plural(len(rows), "golden case"),
    )


@golden_group.command("remove")
@click.argument("case_id", type=int)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def golden_remove(ctx: click.Context, case_id: int, as_json: bool) -> None:
    """Remove one case (its past scores stay in the run history)."""
    from memviewer.errors import MemviewerError
    from memviewer.eval import golden

    with open_service(ctx, json_errors=as_json) as svc:
        try:
            golden.remove_case(svc, case_id)
        except MemviewerError as exc:
            _fail(as_json, exc)
    if as_json:
        emit_json({"removed": case_id})
    else:
        click.echo(f"removed golden case {case_id}")


@eval_group.command("golden")
@contract_option(
    RECALL_PARAMS,
    "top_sessions",
    default=None,
    show_default=False,
    help=f"K (default {RECALL_PARAMS['top_sessions']['default']})",
)
@contract_option(
    RECALL_PARAMS,
    "chunks_per_session",
    default=None,
    show_default=False,
    help=f"M (default {RECALL_PARAMS['chunks_per_session']['default']})",
)
@contract_option(
    RECALL_PARAMS,
    "top_k",
    default=None,
    show_default=False,
    help=f"results per case (default {RECALL_PARAMS['top_k']['default']})",
)
@click.option("--flat", is_flag=True, help="score the flat turn query instead")
@click.option(
    "--vs", "vs_spec", default=None, metavar="'key=value,...'", help="other parameters (weights too)"
)
@click.option("--history", "show_history", is_flag=True, help="show the stored runs side by side")
@click.option("--no-record", is_flag=True, help="score without storing the run")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def eval_golden(
    ctx: click.Context,
    top_sessions,
    chunks_per_session,
    top_k,
    flat,
    vs_spec,
    show_history,
    no_record,
    as_json,
) -> None:
    """Score recall on this home's golden cases (recall@5, recall@10, MRR, nDCG@10); each run is stored."""
    from memviewer.errors import MemviewerError
    from memviewer.eval import golden

    if show_history:
        with open_service(ctx, readonly=True, json_errors=as_json) as svc:
            runs = golden.history(svc)
        if as_json:
            emit_json({"runs": runs})
        else:
            print_table(
                HISTORY_COLUMNS, history_rows(runs), title=f"{plural(len(runs), 'golden run')}, newest first"
            )
        return
    params: dict[str, Any] = {
        "top_sessions": top_sessions,
        "chunks_per_session": chunks_per_session,
        "top_k": top_k,
        "mode": "flat" if flat else None,
    }
    params = {k: v for k, v in params.items() if v is not None}
    params_b: dict[str, Any] | None = None
    changed: dict[str, Any] = {}
    if vs_spec is not None:
        from memviewer.contract.compare import apply_overrides, parse_overrides

        try:
            over = parse_overrides(vs_spec)
        except MemviewerError as exc:
            _fail(as_json, exc)
        changed = {k: v for k, v in over.items() if k not in ("scope", "scope_id")}  # each case has its own
        params_b = apply_overrides(params, changed)
    hub = _hub_running(ctx)
    with open_service(ctx, json_errors=as_json) as svc:
        try:
            _prepare(svc, hub)
        except _model_errors() as exc:
            fail_maybe_json(as_json, f"embedding model unavailable: {exc}")
        try:
            report = golden.evaluate(svc, params, record=not no_record)
            report_b = None if params_b is None else golden.evaluate(svc, params_b, record=not no_record)
        except MemviewerError as exc:
            _fail(as_json, exc)
    if report_b is not None:
        _print_ab(compare_runs(report, report_b), changed, as_json)
        return
    if as_json:
        emit_json(report)
        return
    print_table(
        ("case", "query", "found", *METRICS, "note"),
        [
            (
                c["id"],
                short(c["query"], 40),
                f"{sum(1 for r in (c.get('ranks') or {}).values() if r)}/{len(c['expected'])}",
                *(_f(c.get(m)) for m in METRICS),
                (f"{plural(len(c['missing']), 'expected turn')} deleted" if c["missing"] else "")
                + (" (skipped)" if c["status"] == "skipped" else ""),
            )
            for c in report["per_case"]
        ],
        title=f"golden: {plural(report['cases'], 'case')}, model {report['model']}",
    )
    click.echo("  ".join(f"{m} {_f(report[m])}" for m in METRICS))


def _print_ab(ab: dict[str, Any], changed: dict[str, Any], as_json: bool) -> None:
    """``eval golden --vs``: A and B side by side per case, then each average and B − A."""
    if as_json:
        emit_json(ab)
        return
    shown = ", ".join(f"{k}={v}" for k, v in changed.items()) or "no change"
    title = f"golden A/B: {plural(ab['a']['cases'], 'case')}, model {ab['a']['model']}; B = A with {shown}"
    print_table(COMPARE_COLUMNS, [(*r[:1], short(r[1], 40), *r[2:]) for r in compare_rows(ab)], title=title)
    print_table(("metric", "A", "B", "B − A"), metric_rows(ab))
    counts = {c: sum(1 for d in ab["diff"]["per_case"] if d["change"] == c) for c in ("up", "down", "same")}
    click.echo(f"B: {counts['up']} ↑  {counts['down']} ↓  {counts['same']} =")


COMMANDS = (golden_group,)
