"""``memviewer recall``, ``memviewer reindex`` and ``memviewer eval longmemeval``.

When a hub serves the home, recall and search go through it (``commands.via_hub``:
its model and index are warm). Otherwise recall runs in-process: this process is
then the only writer, so it first brings the vector index up to date.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from memviewer.commands.common import (
    check_text,
    dumps,
    emit_json,
    fail,
    fail_maybe_json,
    open_service,
    print_table,
    progress_callback,
    settings_of,
    short,
)
from memviewer.commands.contract_options import contract_option
from memviewer.contract.cli_table import RECALL_PARAMS
from memviewer.recall_log import RecordAs
from memviewer.words import plural

if TYPE_CHECKING:
    from memviewer.api import Reader
    from memviewer.service import MemoryService

_CLI = RecordAs("cli")
#: A batch line's keys: the request model's, but ``rerank`` (``--batch`` runs as configured).
BATCH_KEYS = tuple(k for k in RECALL_PARAMS if k != "rerank")


def _hub_running(ctx: click.Context) -> bool:
    """Whether the hub serving this home answers (``serving_hub`` decides; another
    home's hub is an error, never a reason to read this home read-only)."""
    from memviewer.commands.via_hub import served_socket

    return served_socket(ctx) is not None


def _model_errors() -> tuple[type[BaseException], ...]:
    from memviewer.errors import ModelChecksumError, ModelNotFoundError

    return (ModelNotFoundError, ModelChecksumError)


#: A plain ``recall`` without a hub embeds a backlog inline only when it is this small (a few
#: seconds of the model on 2 cores); a bigger one is left to a background indexer and recall
#: answers at once with what is indexed plus keyword results (``index:lagging``).
INLINE_CATCH_UP_TURNS = 256


def _prepare(svc: MemoryService, hub: bool, ctx: click.Context | None = None) -> None:
    """Catch the index up (only when this process may write) and load the model once.

    With ``ctx`` (a single recall, not an evaluation) a backlog over
    ``INLINE_CATCH_UP_TURNS`` is not embedded here: a background indexer is started for it
    (``background_index.catch_up_in_background``) and recall answers on the lagging index."""
    if not hub and not svc.readonly and ctx is not None and _leave_to_background(ctx, svc):
        svc.embedder.embed(["warm-up"])
        return
    if not hub and not svc.readonly:
        update, close = progress_callback("indexing")
        try:
            svc.indexer().sync(progress=update)  # also repairs an index that lost rows
        except _model_errors():
            raise
        except Exception as exc:  # a damaged index: recall still answers (keyword fallback)
            from memviewer.present.index_words import DAMAGE_HINT, damage_message

            click.echo(f"warning: the vector index could not be updated: {damage_message(exc)}", err=True)
            click.echo(f"hint: {DAMAGE_HINT}", err=True)
        finally:
            close()
    svc.embedder.embed(["warm-up"])


def _leave_to_background(ctx: click.Context, svc: MemoryService) -> bool:
    """True when the backlog is too big to embed before answering; starts (or finds) the
    background indexer for it and says so on stderr."""
    from memviewer.commands.background_index import catch_up_in_background
    from memviewer.commands.background_index import describe as describe_lag

    lag = svc.index_lag()
    if lag["lag"] <= INLINE_CATCH_UP_TURNS:
        return False
    info = catch_up_in_background(ctx, svc)
    if info.get("lag"):
        click.echo(f"note: {describe_lag(info)}; recall answers with what is indexed now", err=True)
    return True


def _human(out: dict[str, Any]) -> None:
    """The result table; a tool-call-only turn shows its calls (recall ran ``with_tool_calls``)."""
    from memviewer.present.snippets import text_or_tool_calls

    d = out["diagnostics"]
    rows = [
        (
            i,
            f"{r['score']:.3f}",
            r["session_id"],  # whole: pasted into `search --session`
            r["role"],
            r["index"],
            "archived" if r["archived"] else "active",
            short(text_or_tool_calls(r["content"], r.get("tool_calls")), 70),
        )
        for i, r in enumerate(out["results"], 1)
    ]
    scope = f"{out['scope'] or '*'}:{out['scope_id'] or '*'}"
    print_table(
        ("#", "score", "session", "role", "idx", "state", "snippet"),
        rows,
        title=f"recall ({d['mode']}) in {scope}: {plural(len(rows), 'result')}",
        whole=("session",),
    )
    if d["stage1"]:
        click.echo(
            "stage 1 sessions: " + ", ".join(f"{s['session_id']} ({s['score']:.3f})" for s in d["stage1"])
        )
    click.echo(
        f"stage 2 candidates: {d['stage2_candidates']}, kept by post-filter: {d['post_filter']}, "
        f"reranked: {'yes' if d['reranked'] else 'no'}, {d['timings_ms'].get('total', 0):.0f} ms"
    )
    if d["escalations"]:
        click.echo("escalations: " + ", ".join(d["escalations"]))
    lag_line = lag_warning(d)
    if lag_line:
        click.echo(lag_line)
    if d.get("index_damage"):  # memviewer.recall.index_guard: keyword results instead
        damage = d["index_damage"]
        click.echo(f"index damaged: {damage['error']}; these are keyword results. hint: {damage['hint']}")
    integrity = d.get("index_integrity") or {}
    if integrity.get("problems"):
        click.echo(f"index: {'; '.join(integrity['problems'])}. hint: {integrity['hint']}")


def lag_warning(diagnostics: dict[str, Any]) -> str | None:
    """The line under the table when turns wait for embeddings past the indexer's normal
    delay (``index:lagging``): how many, and who embeds them, or that no indexer runs."""
    from memviewer.present.index_words import NO_INDEXER_FIX, describe

    lag = diagnostics.get("index_lag")
    if "index:lagging" not in diagnostics.get("escalations", []) or not lag:
        return None
    who = {
        "hub": "the hub's indexer is embedding them",
        "background": "a background indexer is embedding them",
    }
    said = who.get(str(lag.get("indexer")))
    if said is None:
        said = f"no indexer runs: {lag.get('fix') or NO_INDEXER_FIX}"
    extra = lag.get("keyword_results")
    found = f"; {extra} keyword-only result{'s' if extra != 1 else ''} among them" if extra else ""
    return f"index: {describe(lag)}{found}; {said}"


def _batch_params(raw: bytes) -> dict[str, Any]:
    """One batch line as recall parameters, or a ``ValueError`` saying why it is unusable."""
    from memviewer.jsonvalues import check_value, loads_strict

    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})") from None
    if not line.strip():
        raise ValueError("empty line")
    try:
        obj = loads_strict(line)
    except ValueError as exc:
        raise ValueError(f"invalid JSON: {exc}") from None
    problem = check_value(obj)  # a lone surrogate would crash the tokenizer, not fail cleanly
    if problem is not None:
        raise ValueError(f"the line {problem}")
    if not isinstance(obj, dict):
        raise ValueError("each line must be a JSON object")
    unknown = sorted(set(obj) - set(BATCH_KEYS))
    if unknown:
        raise ValueError(f"unknown keys {unknown}; allowed: {list(BATCH_KEYS)}")
    if not isinstance(obj.get("query"), str) or not obj["query"].strip():
        raise ValueError("'query' must be a non-empty string")
    return obj


def _run_batch(svc: Reader, path: str, flat: bool) -> int:
    from memviewer.errors import MemviewerError

    errors = 0
    # Bytes, decoded line by line: one undecodable line is that line's error, not the batch's.
    stream = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    try:
        for n, line in enumerate(stream, 1):
            try:
                params = _batch_params(line)
                query = params.pop("query")
                if flat and "mode" not in params:
                    params["mode"] = "flat"
                click.echo(dumps(svc.recall(query, record=_CLI, **params)))
            except (ValueError, MemviewerError) as exc:
                errors += 1
                message = exc.message if isinstance(exc, MemviewerError) else str(exc)
                click.echo(dumps({"error": message, "line": n}))
            sys.stdout.flush()
    finally:
        if path != "-":
            stream.close()
    return errors


@click.command("recall")
@click.argument("query", required=False)
@contract_option(RECALL_PARAMS, "scope")
@contract_option(RECALL_PARAMS, "scope_id")
@contract_option(RECALL_PARAMS, "top_sessions")
@contract_option(RECALL_PARAMS, "chunks_per_session")
@contract_option(
    RECALL_PARAMS,
    "top_k",
    "--top-k",
    "--limit",
    help=f"{RECALL_PARAMS['top_k']['help']} (--limit is the same option, as in search and recalls)",
)
@click.option("--flat", is_flag=True, help="one turn query without Stage 1 (for comparison)")
@contract_option(RECALL_PARAMS, "as_of", metavar="WHEN")
@click.option(
    "--batch",
    "batch",
    type=click.Path(dir_okay=False, allow_dash=True),
    default=None,
    help="JSONL file of queries ('-' for stdin); one JSON result line per input line",
)
@click.option(
    "--why",
    "why_turn",
    default=None,
    metavar="TURN_ID",
    help="why is this turn not recalled: its fate at every stage, and a fix checked by re-running",
)
@click.option(
    "--vs",
    "vs_spec",
    default=None,
    metavar="'key=value,...'",
    help="A/B: run again with these parameters laid over the others (e.g. 'top_k=20', "
    "'mode=flat', 'w_dense=0.3') and show each turn's rank in both",
)
@click.option("--json", "as_json", is_flag=True, help="print the JSON result")
@click.pass_context
def recall_cmd(
    ctx: click.Context,
    query,
    scope,
    scope_id,
    top_sessions,
    chunks_per_session,
    top_k,
    flat,
    as_of,
    batch,
    why_turn,
    vs_spec,
    as_json,
) -> None:
    """Two-stage hierarchical recall with its explain trace (docs/cli.md).

    With --json every failure is a JSON object {"error", "code", "hint"} on
    stdout (exit 1; a usage error exits 2), as with search --json; --batch answers each bad line
    with {"error", "line"} and goes on.
    """
    from memviewer.errors import INVALID_ARGUMENT, MemviewerError

    json_out = as_json or batch is not None  # a batch prints JSON lines whether or not --json is given
    if batch is None and not query:
        fail_maybe_json(
            json_out,
            "give a QUERY or --batch FILE.jsonl",
            hint="memviewer recall 'what did I say about X'",
            code=INVALID_ARGUMENT,
        )
    if batch is not None and query:
        fail_maybe_json(json_out, "give either a QUERY or --batch, not both", code=INVALID_ARGUMENT)
    for value, what in (
        (query, "the query"),
        (scope, "--scope"),
        (scope_id, "--scope-id"),
        (as_of, "--as-of"),
    ):
        check_text(value, what, as_json=json_out)
    if batch is not None and (why_turn is not None or vs_spec is not None):
        fail_maybe_json(json_out, "--why and --vs take one QUERY, not --batch", code=INVALID_ARGUMENT)
    if why_turn is not None and vs_spec is not None:
        fail_maybe_json(json_out, "give --why or --vs, not both", code=INVALID_ARGUMENT)
    check_text(why_turn, "--why", as_json=json_out)
    overrides = None
    if vs_spec is not None:
        check_text(vs_spec, "--vs", as_json=json_out)
        from memviewer.contract.compare import parse_overrides

        try:
            overrides = parse_overrides(vs_spec)
        except MemviewerError as exc:
            fail_maybe_json(json_out, exc.message, hint=exc.hint, code=exc.code)
    if batch not in (None, "-") and not Path(batch).is_file():
        fail_maybe_json(json_out, f"batch file {batch} does not exist", code=INVALID_ARGUMENT)
    from memviewer.commands.via_hub import hub_reader

    # A hub serving the home answers a plain recall warm (its model, its index); --why and
    # --vs re-run recall with its internals, so they run in this process.
    reader = hub_reader(ctx) if why_turn is None and overrides is None else None
    hub = reader is not None or (why_turn is not None or overrides is not None) and _hub_running(ctx)
    with (
        contextlib.nullcontext(reader)
        if reader is not None
        else open_service(ctx, readonly=bool(hub), json_errors=json_out)
    ) as svc:
        # --why runs recall's stages itself, so it never gets the hub's reader (above): in its
        # branches ``svc`` is the service this process opened
        local = cast("MemoryService", svc)
        if why_turn is not None:  # an unknown or out-of-scope turn is refused before any model load
            try:
                local.check_turn(why_turn, scope, scope_id)
            except MemviewerError as exc:
                fail_maybe_json(json_out, exc.message, hint=exc.hint, code=exc.code)
        if reader is None:
            try:
                _prepare(local, bool(hub), ctx if batch is None else None)
            except _model_errors() as exc:
                fail_maybe_json(json_out, f"embedding model unavailable: {exc}")
        if batch is not None:
            errors = _run_batch(svc, batch, flat)
            if errors:
                click.echo(f"{plural(errors, 'batch line')} failed", err=True)
                ctx.exit(1)
            return
        params = {
            "scope": scope,
            "scope_id": scope_id,
            "top_sessions": top_sessions,
            "chunks_per_session": chunks_per_session,
            "top_k": top_k,
            "mode": "flat" if flat else "hierarchical",
            "as_of": as_of,
        }
        # The table shows a tool-call-only turn's calls; the JSON is the contract's rows.
        shown = {} if as_json else {"with_tool_calls": True}
        from memviewer.commands.recall_why import RerunMeter

        meter = RerunMeter()
        try:
            if why_turn is not None:
                with meter:
                    out, why = local.why(query, why_turn, {**params, **shown}, progress=meter)
                out["why"] = why
            elif overrides is not None:
                ab = svc.compare(query, params, overrides)
            else:
                out = svc.recall(query, **params, **shown, record=_CLI)
        except KeyboardInterrupt:
            if why_turn is None:
                raise
            click.echo(meter.cancelled_line(), err=True)  # nothing on stdout: no partial answer
            ctx.exit(130)
        except MemviewerError as exc:
            fail_maybe_json(as_json, exc.message, hint=exc.hint, code=exc.code)
        except Exception as exc:  # --why runs recall's stages itself: a damaged index fails here
            from memviewer.errors import INTERNAL
            from memviewer.present.index_words import DAMAGE_HINT, damage_message

            fail_maybe_json(
                as_json,
                f"the vector index cannot be read: {damage_message(exc)}",
                hint=DAMAGE_HINT,
                code=INTERNAL,
            )
        if overrides is not None:
            if as_json:
                emit_json(ab)
            else:
                from memviewer.commands.recall_why import human_ab

                human_ab(svc, ab)
            return
    if reader is not None:
        reader.close()
    if as_json:
        emit_json(out)
    else:
        _human(out)
        if why_turn is not None:
            from memviewer.commands.recall_why import human_why

            human_why(out["why"])


@click.command("reindex")
@click.option(
    "--catch-up",
    is_flag=True,
    help="only embed what is not indexed yet, until nothing is left (what `import` starts in the background)",
)
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON")
@click.pass_context
def reindex_cmd(ctx: click.Context, catch_up: bool, as_json: bool) -> None:
    """Rebuild the LanceDB vector index and session summaries from SQLite."""
    if catch_up:
        from memviewer.commands.background_index import run_catch_up

        report = run_catch_up(ctx)
        if as_json:
            emit_json(report)
        else:
            click.echo(report["message"])
        return
    if _hub_running(ctx):
        fail(
            "a hub is running and owns the index",
            hint="stop the hub (it catches up on start) or run reindex with the hub stopped",
        )
    update, close = progress_callback("reindexing")
    with open_service(ctx) as svc:
        try:
            report = svc.reindex(progress=update)
        except _model_errors() as exc:
            fail(f"embedding model unavailable: {exc}")
        finally:
            close()
        status = svc.indexer().status()
    report.update({k: status[k] for k in ("indexed_turns", "summaries", "sql_turns", "lag", "model")})
    if as_json:
        emit_json(report)
    else:
        click.echo(
            f"reindexed {plural(report['indexed_turns'], 'turn')} and "
            f"{plural(report['summaries'], 'session summary', 'session summaries')} "
            f"with {report['model']} in {report['seconds']:.1f}s"
        )


@click.group("eval")
def eval_group() -> None:
    """Retrieval evaluations."""


def _workspace_options(fn: Any) -> Any:
    """The options every evaluator shares: its embedding cache, a kept home, JSON output."""
    fn = click.option("--json", "as_json", is_flag=True)(fn)
    fn = click.option(
        "--keep-home",
        type=click.Path(file_okay=False),
        default=None,
        help="ingest into this folder and keep it (re-runs skip ingestion)",
    )(fn)
    return click.option(
        "--cache-dir",
        type=click.Path(file_okay=False),
        default=None,
        help="embedding cache folder (default: <tmp>/memviewer-eval-cache)",
    )(fn)


def _evaluate(ctx: click.Context, as_json: bool, run: Any) -> dict[str, Any] | None:
    """Run an evaluator with the real model and a progress line; a bad file or a missing model
    is a clear error. With ``--json`` the report is printed here and None is returned."""
    from memviewer.eval.workspace import model_embedder

    update, close = progress_callback("ingesting")
    try:
        report: dict[str, Any] = run(model_embedder(settings_of(ctx).model_dir), update)
    except ValueError as exc:
        fail(str(exc))
    except _model_errors() as exc:
        fail(f"embedding model unavailable: {exc}")
    finally:
        close()
    if as_json:
        emit_json(report)
        return None
    return report


@eval_group.command("longmemeval")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--limit", type=click.IntRange(1), default=None, help="only the first N questions")
@click.option(
    "--split",
    type=click.IntRange(0),
    default=50,
    show_default=True,
    help="report the first N questions (tuning) and the rest (hold-out) separately",
)
@_workspace_options
@click.pass_context
def eval_longmemeval(ctx: click.Context, file, limit, split, cache_dir, keep_home, as_json) -> None:
    """Session recall@5 and turn recall@10 on a LongMemEval JSON file (gzip or plain)."""
    from memviewer.eval.longmemeval import markdown_table, run

    report = _evaluate(
        ctx,
        as_json,
        lambda embedder, update: run(
            file,
            limit=limit,
            home=keep_home,
            cache_dir=cache_dir,
            split=split,
            embedder=embedder,
            progress=update,
        ),
    )
    if report is None:
        return
    m = report["meta"]
    click.echo(f"{plural(m['questions'], 'question')}, {plural(m['turns'], 'turn')}, model {m['model']}")
    click.echo(markdown_table(report))


@click.option("--limit", type=click.IntRange(1), default=None, help="only the first N conversations")
@click.option(
    "--split",
    type=click.IntRange(0),
    default=None,
    help="report the first N conversations (tuning) and the rest (hold-out) separately "
    "[default: half, rounded up]",
)
@click.option(
    "--system",
    "systems",
    multiple=True,
    help="only these systems (repeatable): hierarchical, flat, keyword, dense, bm25, blend",
)
@_workspace_options
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.pass_context
def _eval_conversations(
    ctx: click.Context, file, limit, split, systems, cache_dir, keep_home, as_json
) -> None:
    """Turn R@5/R@10, session R@5 and MRR on conversations with questions (REALTALK, LoCoMo or
    the conversation+QA format; gzip or plain JSON), per category and split half."""
    from memviewer.eval.conversations import SYSTEMS, markdown_table, run

    report = _evaluate(
        ctx,
        as_json,
        lambda embedder, update: run(
            file,
            limit=limit,
            home=keep_home,
            cache_dir=cache_dir,
            split=split,
            systems=tuple(systems) or SYSTEMS,
            embedder=embedder,
            progress=update,
        ),
    )
    if report is None:
        return
    m = report["meta"]
    click.echo(
        f"{plural(m['conversations'], 'conversation')}, {plural(m['sessions'], 'session')}, "
        f"{plural(m['turns'], 'turn')}, {plural(m['questions'], 'question')} "
        f"({m['skipped_questions']:,} without evidence turns skipped), "
        f"model {m['model']}"
    )
    click.echo(markdown_table(report))


_eval_conversations_cmd = click.command("realtalk")(_eval_conversations)
eval_group.add_command(_eval_conversations_cmd, "realtalk")
eval_group.add_command(_eval_conversations_cmd, "conversations")


COMMANDS = (recall_cmd, reindex_cmd, eval_group)
