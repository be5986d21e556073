"""Core commands: sessions, import praisonai, config, doctor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from memviewer.commands.common import (
    check_text,
    emit_json,
    fail,
    fail_maybe_json,
    open_service,
    print_table,
    progress_callback,
    settings_of,
    short,
)
from memviewer.commands.keyword_merge import merge_after_import
from memviewer.commands.via_hub import hub_reader
from memviewer.errors import MemviewerError
from memviewer.words import plural


@click.command("sessions")
@click.option("--scope", default=None, help="only sessions of this scope (user, agent, …)")
@click.option("--scope-id", default=None, help="only sessions of this scope id")
@click.option("--filter", "text_filter", default=None, help="substring of title/agent/id")
@click.option("--limit", type=int, default=None, help="at most this many (newest first)")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def sessions_cmd(ctx: click.Context, scope, scope_id, text_filter, limit, as_json) -> None:
    """Sessions with their episode, active and archived turn counts.

    When a hub serves the home, the hub answers (same JSON as in-process)."""
    if limit is not None and limit < 0:
        fail(f"--limit must be 0 or more, not {limit}", hint="pass --limit N with N ≥ 0, or leave it out")
    for value, what in ((scope, "--scope"), (scope_id, "--scope-id"), (text_filter, "--filter")):
        check_text(value, what, as_json=as_json)
    query = {"scope": scope, "scope_id": scope_id, "filter": text_filter, "limit": limit}
    reader = hub_reader(ctx)  # a hub serves the home: it answers (no store opened here)
    if reader is not None:
        with reader:
            try:
                page = reader.sessions(**query)
            except MemviewerError as exc:
                fail_maybe_json(as_json, exc.message, hint=exc.hint, code=exc.code)
    else:
        with open_service(ctx, readonly=True, json_errors=as_json) as svc:
            page = svc.sessions(**query)
    if as_json:
        emit_json(page)
        return
    rows = [
        (
            s["session_id"],
            short(s["title"], 40),
            s["agent"],
            f"{s['scope']}:{s['scope_id']}",
            s["last_seen_at"],
            s["episodes"],
            s["active_turns"],
            s["archived_turns"],
            s["status"],
        )
        for s in page["sessions"]
    ]
    cols = ("id", "title", "agent", "scope", "last seen", "episodes", "active", "archived", "status")
    print_table(cols, rows, title=plural(page["total"], "session"))


@click.group("import")
def import_group() -> None:
    """Import sessions from other tools."""


@import_group.command("praisonai")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--no-index", is_flag=True, help="skip embedding (keyword search only)")
@click.option(
    "--wait",
    is_flag=True,
    help="return only once every turn is embedded (default: return when keyword search is "
    "ready; the hub or a background indexer embeds the rest)",
)
@click.option("--json", "as_json", is_flag=True, help="print the import report as JSON")
@click.option(
    "--replace",
    is_flag=True,
    help="let a file replace a session that exists from elsewhere (published live, another file)",
)
@click.pass_context
def import_praisonai(ctx: click.Context, paths, no_index, wait, as_json, replace) -> None:
    """PraisonAI session JSON files or folders of them (.json.lock files are ignored).

    Re-importing a file updates its session to what the file holds now. A bad file,
    or one whose session id exists from elsewhere (without --replace), is reported as
    `failed: PATH: reason` and skipped; the exit code is then 1. Without --wait the
    import returns once keyword search is ready and says how many turns are still
    being embedded (by the hub serving the home, else a background
    `memviewer reindex --catch-up`).
    """
    update, close = progress_callback("importing")
    reading, close_reading = progress_callback("reading")
    from memviewer.errors import ModelChecksumError, ModelNotFoundError

    started: set[str] = set()

    def file_progress(done: int, size: int, path: str) -> None:
        """A big file is read in chunks: say so once, then draw its bytes on a TTY
        (``size`` counts every pass over the file: checking it, then storing it)."""
        if path not in started:
            started.add(path)
            try:
                mb = Path(path).stat().st_size / 1e6
            except OSError:
                mb = size / 1e6
            click.echo(f"reading {path} ({mb:.0f} MB) …", err=True)
        if reading is not None:
            reading(done, size, path)
            if done >= size:
                close_reading()

    pending: dict[str, Any] | None = None
    with open_service(ctx) as svc:
        try:
            report = svc.import_praisonai(
                paths,
                update,
                index=wait and not no_index,
                replace=replace,
                file_progress=file_progress,
            )
        except (ModelNotFoundError, ModelChecksumError) as exc:
            fail(
                f"sessions were stored, but embedding them failed: {exc}",
                hint="fix the model, then run `memviewer reindex` (keyword search works already)",
            )
        finally:
            close_reading()
            close()
        merged = merge_after_import(ctx, svc) if report.imported else None
        if not wait and not no_index and report.imported:
            from memviewer.commands.background_index import catch_up_in_background

            pending = catch_up_in_background(ctx, svc)
    if as_json:
        out = report.to_dict()
        if merged is not None:
            out["keyword_index"] = merged
        if pending is not None:
            out["index"] = pending
        emit_json(out)
    else:
        n_turns = sum(r["turns"] for r in report.imported)
        new = sum(r["new_turns"] for r in report.imported)
        removed = sum(r.get("removed_turns", 0) for r in report.imported)
        click.echo(
            f"imported {plural(len(report.imported), 'session')} ({plural(n_turns, 'turn')}, {new:,} new"
            + (f", {removed:,} no longer in the files removed)" if removed else ")")
            + (f"; {plural(len(report.failed), 'file')} failed" if report.failed else "")
        )
        for path, err in report.failed:
            click.echo(f"  failed: {path}: {err}", err=True)
        if pending is not None:
            from memviewer.commands.background_index import describe

            click.echo(describe(pending))
    if report.failed:
        ctx.exit(1)


class _ConfigCommand(click.Command):
    """``config --help`` lists every key from its one declaration: env var, what it accepts, help."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from memviewer.config import describe

        with formatter.section("Keys (TOML file key, env var, accepted values)"):
            rows = describe()
            formatter.write_dl(
                [(f"{k}  {env}", f"{what} (default {d}). {help_}") for k, env, what, d, help_ in rows]
            )
        super().format_epilog(ctx, formatter)


@click.command("config", cls=_ConfigCommand)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def config_cmd(ctx: click.Context, as_json: bool) -> None:
    """Effective settings and where each value came from (secrets such as llm_api_key masked)."""
    s = settings_of(ctx)
    data = {name: {"value": value, "source": s.sources[name]} for name, value in s.shown().items()}
    if as_json:
        emit_json(data)
        return
    state = "read" if s.config_found else "not found, defaults apply"
    click.echo(f"config file: {s.config_file} ({state})")
    print_table(("key", "value", "source"), [(k, v["value"], v["source"]) for k, v in data.items()])


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def doctor_cmd(ctx: click.Context, as_json: bool) -> None:
    """Store integrity, schema, FTS, model, index lag, free disk space and hub reachability."""
    from memviewer.doctor import run_checks

    checks = run_checks(settings_of(ctx))
    if as_json:
        emit_json({"ok": all(c["ok"] for c in checks), "checks": checks})
    else:
        print_table(
            ("check", "ok", "detail"),
            [(c["name"], "yes" if c["ok"] else "NO", c["detail"]) for c in checks],
        )
    if not all(c["ok"] for c in checks):
        ctx.exit(1)


@import_group.command("json")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--no-index", is_flag=True, help="skip embedding (keyword search only)")
@click.option("--json", "as_json", is_flag=True, help="print the import report as JSON")
@click.option(
    "--replace",
    is_flag=True,
    help="let a session replace one that exists from elsewhere (published live, another file)",
)
@click.pass_context
def import_json(
    ctx: click.Context, paths: tuple[str, ...], no_index: bool, as_json: bool, replace: bool
) -> None:
    """`memviewer export --format json` files (idempotent: re-importing changes nothing).

    A malformed file is reported as `failed: PATH: reason` and stores nothing; a session
    that exists from elsewhere is skipped unless --replace. Exit code 1 if anything failed.
    """
    from memviewer.io.json_import import ExportFileError, import_file

    imported: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    with open_service(ctx) as svc:
        for path in paths:
            try:
                report = import_file(
                    svc.import_session,
                    path,
                    replace=replace,
                    annotate=svc.import_annotations,
                    record_calls=svc.import_llm_calls,
                )
            except ExportFileError as exc:
                where = str(Path(path).expanduser())
                failed.append({"path": where, "error": str(exc).removeprefix(f"{where}: ")})
                continue
            imported += report["imported"]
            failed += report["failed"]
        merged = merge_after_import(ctx, svc) if imported else None
        if not no_index and imported:
            svc.sync_index([r["session_id"] for r in imported])
    if as_json:
        out: dict[str, Any] = {
            "imported": imported,
            "failed": failed,
            "turns": sum(r["turns"] for r in imported),
        }
        if merged is not None:
            out["keyword_index"] = merged
        emit_json(out)
    else:
        new = sum(r["new_turns"] for r in imported)
        removed = sum(r.get("removed_turns", 0) for r in imported)
        click.echo(
            f"imported {plural(len(imported), 'session')} "
            f"({plural(sum(r['turns'] for r in imported), 'turn')}, {new:,} new"
            + (f", {removed:,} no longer in the files removed)" if removed else ")")
            + (f"; {len(failed):,} failed" if failed else "")
        )
        for f in failed:
            click.echo(f"  failed: {f['path']}: {f['error']}", err=True)
    if failed:
        ctx.exit(1)


COMMANDS = (sessions_cmd, import_group, config_cmd, doctor_cmd)
