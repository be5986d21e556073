"""``memviewer search``: discovery, scroll and browse over archived and active turns."""

from __future__ import annotations

import sys
from typing import Any

import click

from memviewer.commands import via_hub
from memviewer.commands.common import emit_json, fail, fail_maybe_json, open_service, print_table, short
from memviewer.commands.contract_options import contract_option
from memviewer.commands.via_hub import hub_reader
from memviewer.contract.cli_table import SEARCH_PARAMS
from memviewer.errors import MemviewerError
from memviewer.present.snippets import anchor_archived as _anchor_archived
from memviewer.words import plural

QUERY_HELP = """\b
QUERY syntax: plain words (each optional; more matches and rarer words rank
higher; the exact phrase ranks highest), "quoted phrases", and CJK text (a run
without spaces is an exact substring; separate words with spaces). Operators
and punctuation are plain text, so any input is safe.
"""


class _SearchCommand(click.Command):
    json_error_head = {"success": False, "mode": None}  # search's error shape (docs/cli.md)


@click.command("search", cls=_SearchCommand, epilog=QUERY_HELP)
@click.argument("query", required=False, default=None)
@contract_option(SEARCH_PARAMS, "session_id", "--session")
@contract_option(SEARCH_PARAMS, "around")
@contract_option(SEARCH_PARAMS, "limit")
@contract_option(SEARCH_PARAMS, "window")
@contract_option(SEARCH_PARAMS, "scope")
@contract_option(SEARCH_PARAMS, "scope_id")
@click.option("--json", "as_json", is_flag=True, help="print the JSON contract (docs/cli.md)")
@click.pass_context
def search_cmd(
    ctx: click.Context, query, session_id, around, limit, window, scope, scope_id, as_json
) -> None:
    """Keyword search across sessions (QUERY), scroll one (--session), or browse recent ones.

    When a hub serves the home, the hub answers (warm; same JSON as in-process)."""
    params = {
        "session_id": session_id,
        "around": around,
        "limit": limit,
        "window": window,
        "scope": scope,
        "scope_id": scope_id,
    }
    from memviewer.recall_log import RecordAs

    reader = hub_reader(ctx)  # --limit and --window are in range (click checked them)
    if reader is not None:
        with reader:
            try:
                result = reader.search(query, **params, record=RecordAs("cli"))
                if not as_json and result.get("success") and result.get("mode") == "scroll":
                    via_hub.attach_tool_calls_by_index(reader, result["session_id"], result["messages"])
            except MemviewerError as exc:
                fail_maybe_json(as_json, exc.message, hint=exc.hint, code=exc.code)
    else:
        with open_service(ctx, readonly=True) as svc:
            result = svc.search(query, **params, record=RecordAs("cli"))
            if not as_json and result.get("success") and result.get("mode") == "scroll":
                svc.attach_tool_calls(result["session_id"], result["messages"])
    if not result.get("success"):
        if as_json:
            fail(result["error"], data=result)
        fail(result["error"], hint=result.get("hint"))
    if as_json:
        emit_json(result)
        return
    _print_human(result)


def _print_annotations(found: list[dict[str, Any]]) -> None:
    """Tags and notes whose text matched the query (``memviewer.session.annotations``)."""
    if not found:
        return
    print_table(
        ("kind", "id", "session", "turn", "matched", "tags", "note"),
        [
            (
                a["target_kind"],
                a["target_id"],
                a["session_id"],
                a.get("index", ""),
                a["matched"],
                ", ".join(a.get("tags") or []),
                short(a.get("note") or "", 60),
            )
            for a in found
        ],
        title=plural(len(found), "tagged or noted item matches", "tagged or noted items match"),
        whole=("id", "session"),
    )


def _print_human(result: dict[str, Any]) -> None:
    from memviewer.present.highlight import query_terms
    from memviewer.present.snippets import text_or_tool_calls

    mode = result["mode"]
    terms = query_terms(result.get("query"))
    rows: list[tuple[Any, ...]]  # one shape per mode
    if mode == "discovery":
        noted = result.get("annotations") or []
        _print_annotations(noted)
        if not result["results"]:
            if noted:  # "no matches" under a table of matches would be untrue
                does = plural(len(noted), "tagged or noted item does", "tagged or noted items do")
                click.echo(f"no turn matches {result['query']!r}; {does} (above)")
            else:
                click.echo(f"no matches for {result['query']!r}")
            return
        rows = [
            (
                h["session_id"],
                short(h["title"], 32),
                f"{h['score']:.3f}",
                short(h["snippet"], 90),
                h["when"],
                f"{h['anchor_index']} archived" if _anchor_archived(h) else h["anchor_index"],
            )
            for h in result["results"]
        ]
        n = result["total_found"]
        title = f"{plural(n, 'session matches', 'sessions match')} {result['query']!r}"
        if result.get("ranked_window"):
            title += (
                f" (ranked on the newest {plural(result['ranked_window'], 'matching turn')}: common words)"
            )
        if sys.stdout.isatty():
            _print_hits(title, result["results"], terms)
        else:
            print_table(("id", "title", "score", "snippet", "when", "anchor"), rows, title=title)
        top = result["results"][0]
        click.echo(
            f"read more: memviewer search --session {top['session_id']} --around {top['anchor_index']}",
            err=True,
        )
    elif mode == "scroll":
        rows = [
            (
                m["index"],
                "archived" if m["archived"] else "active",
                m["role"],
                m["timestamp"],
                short(text_or_tool_calls(m["content"], m.get("tool_calls")), 100),
            )
            for m in result["messages"]
        ]
        print_table(
            ("#", "state", "role", "timestamp", "content"),
            rows,
            title=f"{result['session_id']} around {result['around_message_id']}",
            highlight=terms,
        )
    else:
        rows = [
            (r["session_id"], short(r["title"], 48), r["when"], r["message_count"]) for r in result["results"]
        ]
        n = result["total_found"]
        print_table(
            ("id", "title", "when", "messages"),
            rows,
            title=f"{plural(n, 'session')}, most recent first",
            whole=("id",),
        )


def _print_hits(title: str, hits: list[dict[str, Any]], terms: tuple[str, ...]) -> None:
    """Hits for a person on a terminal: the whole id (to paste into --session) on the first
    line of each, the snippet below with the matched terms highlighted; fits 80 columns."""
    from rich.console import Console
    from rich.text import Text

    from memviewer.commands.common import raw_stream, visible
    from memviewer.present.highlight import match_spans

    # Rich styles the terminal itself, so it writes under the escaping stream; every stored
    # string it prints goes through ``visible`` here instead.
    console = Console(file=raw_stream(sys.stdout), highlight=False)
    console.print(Text(visible(title), style="bold"))
    for h in hits:
        head = Text()
        head.append(visible(str(h["session_id"])), style="cyan")
        head.append(f"  score {h['score']:.3f}  at #{h['anchor_index']}")
        if _anchor_archived(h):
            head.append(" (archived)", style="magenta")
        head.append(f"  {h['when']}", style="dim")
        console.print(head, overflow="fold")
        body = Text("  " + visible(short(h["title"], 70)), style="bold")
        snippet = Text("  " + visible(" ".join(str(h["snippet"] or "").split())))
        for start, end in match_spans(snippet.plain, terms):
            snippet.stylize("bold yellow", start, end)
        console.print(body)
        console.print(snippet)


COMMANDS = (search_cmd,)
