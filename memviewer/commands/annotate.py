"""``memviewer tag``, ``memviewer note`` and ``memviewer tags``: the user's labels on
sessions and turns (``memviewer.session.annotations``; JSON shapes in docs/cli.md)."""

from __future__ import annotations

from typing import Any

import click

from memviewer.commands.common import check_text, emit_json, fail_maybe_json, open_service, print_table, short
from memviewer.errors import MemviewerError


def _fail(as_json: bool, exc: MemviewerError) -> None:
    fail_maybe_json(as_json, exc.message, hint=exc.hint, code=exc.code)


def _where(a: dict[str, Any]) -> str:
    if a["target_kind"] == "turn":
        return f"turn {a['target_id']} (#{a.get('index', '?')} of session {a['session_id']})"
    return f"session {a['target_id']}"


@click.command("tag")
@click.argument("target_id", metavar="SESSION_OR_TURN_ID")
@click.argument("tags", nargs=-1, required=True, metavar="TAG...")
@click.option("--remove", is_flag=True, help="take the tags away instead")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def tag_cmd(ctx: click.Context, target_id: str, tags: tuple[str, ...], remove: bool, as_json: bool) -> None:
    """Tag a session or a turn (tags: lower case, no spaces; `search "tag:NAME"` finds them)."""
    check_text(target_id, "the id", as_json=as_json)
    for t in tags:
        check_text(t, "a tag", as_json=as_json)
    with open_service(ctx, readonly=True, json_errors=as_json) as svc:
        try:
            result = svc.tag(target_id, list(tags), remove=remove)
        except MemviewerError as exc:
            _fail(as_json, exc)
    if as_json:
        emit_json(result)
        return
    verb = "removed" if remove else "added"
    changed = ", ".join(result["changed"]) or "nothing (no change)"
    click.echo(f"{verb} {changed} on {_where(result)}; tags now: {', '.join(result['tags']) or '(none)'}")


@click.command("note")
@click.argument("target_id", metavar="SESSION_OR_TURN_ID")
@click.argument("text", required=False)
@click.option("--remove", is_flag=True, help="remove the note")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def note_cmd(ctx: click.Context, target_id: str, text: str | None, remove: bool, as_json: bool) -> None:
    """Set (replace) the note of a session or a turn, or --remove it."""
    check_text(target_id, "the id", as_json=as_json)
    check_text(text, "the note", as_json=as_json)
    if remove == (text is not None):
        fail_maybe_json(
            as_json,
            "give the note's TEXT, or --remove (not both)",
            hint='memviewer note ID "why this turn matters"',
            code="invalid_argument",
        )
    with open_service(ctx, readonly=True, json_errors=as_json) as svc:
        try:
            result = svc.note(target_id, None if remove else text)
        except MemviewerError as exc:
            _fail(as_json, exc)
    if as_json:
        emit_json(result)
    elif remove:
        click.echo(
            f"{'removed the note of' if result['changed'] else 'no note to remove on'} {_where(result)}"
        )
    else:
        click.echo(f"note set on {_where(result)}")


@click.command("tags")
@click.argument("target_id", required=False, metavar="[SESSION_OR_TURN_ID]")
@click.option("--tag", "tag", default=None, help="only what carries this tag")
@click.option("--limit", type=click.IntRange(1, 100_000), default=None, help="at most this many")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def tags_cmd(
    ctx: click.Context, target_id: str | None, tag: str | None, limit: int | None, as_json: bool
) -> None:
    """List tagged or noted sessions and turns (of one id, or all), most recently changed first."""
    check_text(target_id, "the id", as_json=as_json)
    check_text(tag, "--tag", as_json=as_json)
    with open_service(ctx, readonly=True, json_errors=as_json) as svc:
        try:
            found = svc.annotations(target_id, tag=tag, limit=limit)
        except MemviewerError as exc:
            _fail(as_json, exc)
    if as_json:
        emit_json({"annotations": found})
        return
    if not found:
        click.echo("no tags or notes" + (f" with tag {tag}" if tag else ""))
        return
    print_table(
        ("kind", "id", "session", "turn", "tags", "note"),
        [
            (
                a["target_kind"],
                a["target_id"],
                a["session_id"],
                "" if a["target_kind"] == "session" else a.get("index", ""),
                ", ".join(a["tags"]),
                short(a["note"] or "", 60),
            )
            for a in found
        ],
        title=f"{len(found)} annotated",
        whole=("id", "session"),
    )


COMMANDS = (tag_cmd, note_cmd, tags_cmd)
