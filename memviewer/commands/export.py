"""``memviewer export`` (and, by importing its module, ``memviewer import json``)."""

from __future__ import annotations

import click

from memviewer.commands.common import check_text, fail, open_service, progress_callback
from memviewer.errors import MemviewerError
from memviewer.words import plural


@click.command("export")
@click.argument("session_ids", nargs=-1)
@click.option("--all", "all_sessions", is_flag=True, help="export every session")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "jsonl", "md", "praisonai"]),
    required=True,
    help="json: full fidelity (re-importable); jsonl: one turn per line; md: transcript; "
    "praisonai: one PraisonAI session file per session",
)
@click.option(
    "-o",
    "--output",
    "output",
    default=None,
    help="file (json/jsonl/md; '-' or absent = stdout) or folder (praisonai); never inside "
    "the memviewer home. A pipe or device (/dev/stdout) is written through",
)
@click.option(
    "--redact",
    type=click.Choice(["standard", "strict"]),
    default=None,
    help="mask secrets and personal data in content, metadata and titles",
)
@click.option("--force", is_flag=True, help="praisonai: replace session files already in the folder")
@click.pass_context
def export_cmd(ctx: click.Context, session_ids, all_sessions, fmt, output, redact, force) -> None:
    """Export sessions with their episodes and archived + active turns."""
    if all_sessions and session_ids:
        fail("pass session ids or --all, not both")
    if not all_sessions and not session_ids:
        fail("name the sessions to export", hint="memviewer export ID... --format json, or --all")
    for sid in session_ids:
        check_text(sid, "session id")
    if fmt == "praisonai" and output in (None, "-"):
        fail("the praisonai format writes one file per session", hint="pass -o DIR")
    update, close = progress_callback("exporting")
    with open_service(ctx, readonly=True) as svc:
        try:
            result = svc.export(
                None if all_sessions else list(session_ids),
                fmt,
                output,
                redact=redact,
                progress=update,
                force=force,
            )
        except MemviewerError as exc:
            close()
            fail(exc.message, hint=exc.hint)
        close()
    masked = sum(result["redactions"].values())
    summary = (
        f"exported {plural(result['sessions'], 'session')} ({plural(result['turns'], 'turn')}) "
        f"as {fmt} to {result['path']}" + (f"; {plural(masked, 'value')} masked ({redact})" if redact else "")
    )
    # Keep stdout clean when it carries the export itself (also through -o /dev/stdout or a pipe).
    import os

    special = fmt != "praisonai" and not os.path.isfile(result["path"])
    click.echo(summary, err=result["path"] == "-" or special)
    # One bad session never stops the rest: each failure is named, and the exit code says so.
    for failure in result.get("failed", []):
        click.echo(f"failed: {failure['session_id']}: {failure['error']}", err=True)
    if result.get("failed"):
        ctx.exit(1)


COMMANDS = (export_cmd,)
