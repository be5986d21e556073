"""``memviewer recalls``: the recall log, and one recorded recall beside a re-run now."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from memviewer.commands.common import (
    check_text,
    emit_json,
    fail_maybe_json,
    open_service,
    print_table,
    settings_of,
    short,
)
from memviewer.recall_log import SOURCES
from memviewer.words import plural

if TYPE_CHECKING:
    from memviewer.api import Reader

REDACT_HELP = (
    "mask secrets and personal data in queries, result texts, params and diagnostics, as "
    "export --redact does (the log itself keeps the text as it was)"
)


def _redactor(ctx: click.Context, level: str | None) -> Any:
    if level is None:
        return None
    from memviewer.io.redact import Redactor, installation_key

    return Redactor(level, id_key=installation_key(settings_of(ctx).home_path))


def _redact_result(r: Any, result: dict[str, Any]) -> dict[str, Any]:
    out = dict(result)
    for key in ("text", "title"):
        if isinstance(out.get(key), str):
            out[key] = r.redact(out[key])
    for key, prefix in (("session_id", "session"), ("turn_id", "turn")):
        if key in out:
            out[key] = r.redact_id(out[key], prefix)
    if isinstance(out.get("result"), dict):  # a diff item wraps its result
        out["result"] = _redact_result(r, out["result"])
    if isinstance(out.get("key"), str):  # "text:<what an agent reported>"
        out["key"] = r.redact(out["key"])
    return out


def redact_entry(r: Any, entry: dict[str, Any]) -> dict[str, Any]:
    """A recall log entry (or a re-run) with its free text redacted; ids that hold a secret
    become the same pseudonyms an export writes, other ids (``recall_id``) stay usable."""
    out = dict(entry)
    if isinstance(out.get("query"), str):
        out["query"] = r.redact(out["query"])
    for key in ("params", "diagnostics"):
        if key in out:
            out[key] = r.redact_obj(out[key])
    if "session_id" in out:
        out["session_id"] = r.redact_id(out["session_id"], "session")
    if isinstance(out.get("results"), list):
        out["results"] = [_redact_result(r, x) if isinstance(x, dict) else x for x in out["results"]]
    if isinstance(out.get("diff"), dict):
        out["diff"] = {
            k: [_redact_result(r, x) for x in v] if isinstance(v, list) else v for k, v in out["diff"].items()
        }
    return out


@click.group("recalls", invoke_without_command=True)
@click.option("--source", type=click.Choice(SOURCES), default=None, help="only this front end's")
@click.option("--session", "session_id", default=None, help="only recalls made by this (caller) session")
@click.option(
    "--kind", type=click.Choice(("search", "recall")), default=None, help="only searches or recalls"
)
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@click.option("--redact", type=click.Choice(("standard", "strict")), default=None, help=REDACT_HELP)
@click.option("--json", "as_json", is_flag=True, help="print JSON (docs/cli.md, ## recalls)")
@click.pass_context
def recalls_group(ctx: click.Context, source, session_id, kind, limit, redact, as_json) -> None:
    """Searches and recalls as they happened, newest first (CLI, viewer, hub, MCP, agents)."""
    if ctx.invoked_subcommand is not None:
        return
    check_text(session_id, "--session", as_json=as_json)
    with open_service(ctx, readonly=True, json_errors=as_json) as svc:
        page = svc.recalls(source=source, session_id=session_id, kind=kind, limit=limit)
    redactor = _redactor(ctx, redact)
    if redactor is not None:
        page = {**page, "recalls": [redact_entry(redactor, e) for e in page["recalls"]]}
    if as_json:
        emit_json(page)
        return
    rows = [
        (
            r["recall_id"],
            r["at"],
            r["source"],
            r["kind"],
            short(r["session_id"] or "", 20),
            r["result_count"],
            short(r["query"], 60),
        )
        for r in page["recalls"]
    ]
    print_table(
        ("id", "at", "source", "kind", "caller session", "results", "query"),
        rows,
        title=plural(page["total"], "recorded search or recall", "recorded searches and recalls")
        + ", newest first",
    )
    log = page.get("log") or {}
    if log.get("entries") is not None:
        gone = {k: log.get(k, 0) for k in ("evicted_count", "evicted_age", "evicted_bytes")}
        click.echo(
            f"the log holds {log['entries']:,} entries in {log.get('bytes', 0) / 1048576:.1f} MiB "
            f"(limits: {log['max_entries']:,} entries, {log['max_days']:g} days, "
            f"{log['max_bytes'] / 1048576:g} MiB); {log.get('entries_cut', 0):,} cut to fit; "
            f"removed: {gone['evicted_count']:,} over the count, {gone['evicted_age']:,} by age, "
            f"{gone['evicted_bytes']:,} over the size",
            err=True,
        )
    if page["recalls"]:
        click.echo(f"open one: memviewer recalls show {page['recalls'][0]['recall_id']} --rerun", err=True)


def _rerun(svc: Reader, entry: dict[str, Any]) -> dict[str, Any]:
    """Run the recorded search or recall again now, with the parameters memviewer knows."""
    from memviewer import recall_log
    from memviewer.api import RecallParams, SearchParams
    from memviewer.recall_log import RecordAs

    record = RecordAs("cli")
    params = dict(entry.get("params") or {})
    if entry["kind"] == "search":
        known = set(SearchParams.model_fields) - {"query"}
        use = {k: v for k, v in params.items() if k in known}
        sp = SearchParams.from_mapping({"query": entry["query"] or None, **use})
        kwargs = sp.as_kwargs()
        query = kwargs.pop("query")
        out = svc.search(query, **kwargs, record=record)
        results = recall_log.search_command(query, kwargs, out, record)["results"]
        diagnostics: dict[str, Any] = {k: out[k] for k in ("mode", "total_found", "error") if k in out}
    else:
        known = set(RecallParams.model_fields) - {"query"}
        use = {k: v for k, v in params.items() if k in known}
        rp = RecallParams.from_mapping({"query": entry["query"], **use})
        out = svc.recall(rp.query, **rp.as_kwargs(), record=record)
        results = recall_log.recall_command(rp.query, {}, out, record)["results"]
        diagnostics = out.get("diagnostics") or {}
        use = rp.as_kwargs()
    return {
        "params": use,
        "ignored_params": sorted(set(params) - set(use)),
        "results": results,
        "diagnostics": diagnostics,
        "diff": recall_log.diff(entry.get("results") or [], results),
    }


@recalls_group.command("show")
@click.argument("recall_id")
@click.option("--rerun", is_flag=True, help="run it again now and show what changed (new, dropped, moved)")
@click.option("--redact", type=click.Choice(("standard", "strict")), default=None, help=REDACT_HELP)
@click.option("--json", "as_json", is_flag=True, help="print JSON (docs/cli.md, ## recalls)")
@click.pass_context
def show_cmd(ctx: click.Context, recall_id: str, rerun: bool, redact: str | None, as_json: bool) -> None:
    """One recorded search or recall: what the caller got at that moment (and, with
    --rerun, what the same question returns now)."""
    from memviewer.errors import MemviewerError

    check_text(recall_id, "RECALL_ID", as_json=as_json)
    hub = False
    if rerun:
        from memviewer.commands.via_hub import served_socket

        hub = served_socket(ctx) is not None
    with open_service(ctx, readonly=hub or not rerun, json_errors=as_json) as svc:
        try:
            entry = svc.recall_entry(recall_id)
        except MemviewerError as exc:
            fail_maybe_json(as_json, exc.message, hint=exc.hint, code=exc.code)
        out: dict[str, Any] = {"recall": entry}
        if rerun:
            if entry["kind"] == "recall":
                from memviewer.commands.recall import _model_errors, _prepare

                try:
                    _prepare(svc, hub)
                except _model_errors() as exc:
                    fail_maybe_json(as_json, f"embedding model unavailable: {exc}", code="internal")
            try:
                out["rerun"] = _rerun(svc, entry)
            except MemviewerError as exc:
                fail_maybe_json(as_json, exc.message, hint=exc.hint, code=exc.code)
    redactor = _redactor(ctx, redact)
    if redactor is not None:  # one redactor: a secret gets the same mask in the entry and the re-run
        out = {k: redact_entry(redactor, v) for k, v in out.items()}
        entry = out["recall"]
    if as_json:
        emit_json(out)
        return
    _print_entry(entry)
    if rerun:
        _print_rerun(out["rerun"])


def _row(r: dict[str, Any]) -> tuple[Any, ...]:
    score = r.get("score")
    where = r.get("session_id") or ""
    if r.get("index") is not None:
        where = f"{short(where, 24)} #{r['index']}"
    return (
        r.get("rank"),
        "" if score is None else f"{float(score):.3f}",
        short(where, 30),
        short(r.get("text") or r.get("turn_id") or r.get("title") or "", 80),
    )


def _print_entry(e: dict[str, Any]) -> None:
    caller = f" for session {e['session_id']}" if e.get("session_id") else ""
    click.echo(f"{e['kind']} {e['recall_id']} at {e['at']} from {e['source']}{caller}")
    click.echo(f"query: {e['query']!r}")
    who = e.get("caller") or {}
    if who:  # what the process that logged it knew, not what the client claimed
        click.echo("asked by: " + ", ".join(f"{k} {who[k]}" for k in sorted(who)))
    if e.get("cut"):
        click.echo("cut to fit the log: " + ", ".join(f"{k}={v}" for k, v in sorted(e["cut"].items())))
    if e.get("params"):
        click.echo("params: " + ", ".join(f"{k}={v}" for k, v in sorted(e["params"].items())))
    print_table(
        ("#", "score", "where", "result"), [_row(r) for r in e.get("results") or []], title="recorded"
    )


def _print_rerun(rr: dict[str, Any]) -> None:
    diff = rr["diff"]
    moved = {m["key"]: m for m in diff["moved"]}
    new = {n["key"] for n in diff["new"]}
    from memviewer.recall_log import result_key

    rows = []
    for r in rr["results"]:
        key = result_key(r)
        mark = (
            "new" if key in new else f"moved {moved[key]['from']}→{moved[key]['to']}" if key in moved else ""
        )
        rows.append((*_row(r), mark))
    print_table(("#", "score", "where", "result", "change"), rows, title="now")
    for d in diff["dropped"]:
        click.echo(f"dropped: #{d['rank']} {_row(d['result'])[2]} {short(d['result'].get('text') or '', 60)}")
    if rr["ignored_params"]:
        click.echo("not memviewer parameters (ignored on re-run): " + ", ".join(rr["ignored_params"]))
    click.echo(
        "unchanged"
        if not diff["changed"]
        else f"{len(diff['new'])} new, {len(diff['dropped'])} dropped, {len(diff['moved'])} moved"
    )


COMMANDS = (recalls_group,)
