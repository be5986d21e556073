"""``memviewer calls``: the LLM calls an agent made, and one call's context anatomy."""

from __future__ import annotations

from typing import Any

import click

from memviewer.commands.common import check_text, emit_json, fail_maybe_json, open_service, print_table, short
from memviewer.words import plural


@click.group("calls", invoke_without_command=True)
@click.option("--session", "session_id", default=None, help="only this session's calls")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="print JSON (docs/cli.md, ## calls)")
@click.pass_context
def calls_group(ctx: click.Context, session_id: str | None, limit: int, as_json: bool) -> None:
    """LLM calls in call order: model, tokens, latency, recalls followed, problems."""
    if ctx.invoked_subcommand is not None:
        return
    check_text(session_id, "--session", as_json=as_json)
    with open_service(ctx, readonly=True, json_errors=as_json) as svc:
        page = svc.llm_calls(session_id=session_id, limit=limit)
    if as_json:
        emit_json(page)
        return
    rows = [
        (
            c["call_id"],
            (c["at"] or "")[:19],
            short(c["session_id"] or "-", 24),
            short(c["model"] or "", 20),
            c["input_messages"],
            "" if c["usage"]["input_tokens"] is None else c["usage"]["input_tokens"],
            "" if c["latency_ms"] is None else f"{c['latency_ms']:.0f}",
            len(c["recall_ids"]),
            ", ".join(c["problems"]),
        )
        for c in page["calls"]
    ]
    print_table(
        ("id", "at", "session", "model", "msgs", "in tok", "ms", "recalls", "problems"),
        rows,
        title=f"{page['total']} LLM calls",
    )
    if page["problems"]:
        kept = ", ".join(f"{n} {p}" for p, n in sorted(page["problems"].items()))
        click.echo(f"kept as received: {kept}", err=True)
    if page["calls"]:
        click.echo(f"open one: memviewer calls show {page['calls'][-1]['call_id']}", err=True)


@calls_group.command("show")
@click.argument("call_id")
@click.option("--json", "as_json", is_flag=True, help="print JSON (docs/cli.md, ## calls)")
@click.pass_context
def show_cmd(ctx: click.Context, call_id: str, as_json: bool) -> None:
    """One call's context anatomy: the window by part, what recall fed it, what changed."""
    from memviewer.errors import MemviewerError

    check_text(call_id, "CALL_ID", as_json=as_json)
    with open_service(ctx, readonly=True, json_errors=as_json) as svc:
        try:
            out = svc.llm_call(call_id)
        except MemviewerError as exc:
            fail_maybe_json(as_json, exc.message, hint=exc.hint, code=exc.code)
    if as_json:
        emit_json(out)
        return
    _print(out)


def _print(out: dict[str, Any]) -> None:
    c, a = out["call"], out["anatomy"]
    where = f"session {c['session_id']}" if c["session_id"] else "no session"
    click.echo(f"call {c['call_id']} at {c['at']} ({where}), model {c['model'] or '?'}")
    reported = a["reported_input_tokens"]
    click.echo(
        f"input: {plural(a['input_tokens'], 'token')} counted with {a['tokenizer']['name']}"
        + (f"; the model reported {reported}" if reported is not None else "")
        + (f"; window {a['context_window']}" if a["context_window"] else f"; {a['window_note']}")
    )
    print_table(
        ("part", "tokens", "share", "of window", "messages"),
        [
            (
                p["kind"],
                p["tokens"],
                f"{p['share']:.1%}",
                "" if p["share_of_window"] is None else f"{p['share_of_window']:.1%}",
                p["messages"],
            )
            for p in a["parts"]
        ],
        title="parts",
    )
    print_table(
        ("#", "role", "kind", "tokens", "recalled", "turn", "text"),
        [
            (
                m["position"],
                m["role"],
                m["kind"] + (" (archived)" if m["archived"] else ""),
                m["tokens"],
                m["recalled_tokens"] or "",
                short(m["turn_id"] or "", 14),
                short(m.get("reason") or m["preview"], 60),
            )
            for m in a["messages"]
        ],
        title="messages",
    )
    if a["recalled"]:
        print_table(
            ("recall", "rank", "in prompt", "by", "turn", "text"),
            [
                (
                    short(r["recall_id"], 14),
                    r["rank"],
                    {True: "yes", False: "NO", None: "?"}[r["in_prompt"]],
                    r["matched_by"] or r.get("reason") or "",
                    short(r["turn_id"] or r.get("doc_id") or "", 14),
                    short(r["preview"], 50),
                )
                for r in a["recalled"]
            ],
            title=f"recalled ({a['rules']['recalls_followed']})",
        )
    for gone in a["compacted_away"]:
        click.echo(
            f"compacted away: turn {gone['turn_id']} (#{gone['index']}) was recalled but is archived "
            f"and not in the prompt: {short(gone['preview'] or '', 60)}"
        )
    d = out["diff"]
    if d is not None:
        click.echo(
            f"since {d['previous_call_id']}: {len(d['entered'])} entered "
            f"(+{plural(d['entered_tokens'], 'token')}), "
            f"{len(d['left'])} left (-{d['left_tokens']}), {d['kept']} kept"
        )
        for m in d["entered"]:
            click.echo(f"  + #{m['position']} {m['kind']}: {short(m['preview'], 70)}")
        for m in d["left"]:
            click.echo(f"  - #{m['position']} {m['kind']}: {short(m['preview'], 70)}")


COMMANDS = (calls_group,)
