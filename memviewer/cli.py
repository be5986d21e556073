"""The ``memviewer`` command line (contract: docs/cli.md).

With no sub-command it opens the TUI. Command modules are imported here so
``memviewer --help`` lists everything; each keeps heavy imports inside its
functions so that simple commands start fast.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, NoReturn

import click

from memviewer import __version__
from memviewer.commands import (
    annotate,
    calls,
    core,
    demo,
    export,
    golden,
    hub,
    mcp,
    recall,
    recalls,
    search,
    tokens,
)

if TYPE_CHECKING:
    from memviewer.config import Settings

_ARGV = "memviewer.argv"  # ctx.meta key: the arguments after the program name


class _Cli(click.Group):
    """The root group; its ``invoke`` is the last net under every sub-command.

    A ``MemviewerError`` that a command did not catch (the store cannot be
    opened, say) and a plain ``click.ClickException`` both become the usual
    ``error: ...`` line (+ ``hint:``) and exit 1, never a traceback or click's
    capitalised ``Error:``. Usage errors keep click's own usage output (exit 2),
    except for a command given ``--json``: its caller parses stdout, so it gets
    the JSON error object there instead (still exit 2), for every command at once.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_ARGV] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        from memviewer.errors import MemviewerError

        try:
            return super().invoke(ctx)
        except MemviewerError as exc:
            _fail(exc.message, exc.hint)
        except click.ClickException as exc:
            if isinstance(exc, click.UsageError):
                _usage_error_as_json(exc, ctx.meta.get(_ARGV, []))
                raise
            _fail(exc.format_message(), None, exc.exit_code)


def _usage_error_as_json(exc: click.UsageError, argv: list[str]) -> None:
    """Print ``exc`` as the JSON error object and exit 2 when ``--json`` is among the
    arguments (before a ``--``) of a command that has ``--json``; else return."""
    words = argv[: argv.index("--")] if "--" in argv else argv
    failed = exc.ctx
    if "--json" not in words or failed is None:
        return
    if not any(isinstance(p, click.Option) and "--json" in p.opts for p in failed.command.params):
        return  # `memviewer eval --json` (no such command) or a command without --json
    from memviewer.commands.common import emit_json, usage_error_object

    emit_json(usage_error_object(exc))
    sys.exit(exc.exit_code)


def _fail(message: str, hint: str | None, code: int = 1) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    if hint:
        click.echo(f"hint: {hint}", err=True)
    sys.exit(code)


def _from_command_line(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE


@click.group(cls=_Cli, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="memviewer")
@click.option(
    "--home",
    type=click.Path(),
    default=None,
    envvar="MEMVIEWER_HOME",
    help="data folder (env MEMVIEWER_HOME)",
)
@click.option(
    "--socket",
    "socket_path",
    type=click.Path(),
    default=None,
    envvar="MEMVIEWER_SOCKET",
    help="hub socket (env MEMVIEWER_SOCKET)",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(),
    default=None,
    envvar="MEMVIEWER_CONFIG",
    help="settings TOML file (env MEMVIEWER_CONFIG)",
)
@click.option(
    "--hub",
    "hub_url",
    default=None,
    metavar="tls://HOST:PORT",
    help="read through a remote hub (env MEMVIEWER_HUB; token: MEMVIEWER_TOKEN or MEMVIEWER_TOKEN_FILE)",
)
@click.option(
    "--tls-ca",
    default=None,
    type=click.Path(),
    help="CA certificate of the remote hub (env MEMVIEWER_TLS_CA)",
)
@click.option("--log-level", default="WARNING", show_default=True, help="logging level")
@click.pass_context
def cli(ctx: click.Context, home, socket_path, config_file, hub_url, tls_ca, log_level) -> None:
    """memviewer: browse, search and debug the memory of your AI agents."""
    from pathlib import Path

    from memviewer.logctx import configure_logging

    if ctx.invoked_subcommand not in (None, "mcp"):  # the TUI draws itself; mcp's stdout is a protocol
        # Stored text printed on a terminal shows its control characters as escapes, for
        # every command at once (``VisibleStream``); before logging binds stderr.
        from memviewer.commands.common import install_visible_output

        ctx.call_on_close(install_visible_output())
    configure_logging(log_level.upper())
    # Only a real flag is a flag: MEMVIEWER_HOME/MEMVIEWER_SOCKET reach the env layer
    # themselves, so `memviewer config` names them as the source.
    layers: dict[str, Any] = {
        "config_file": Path(config_file) if config_file else None,
        "config_required": bool(config_file),
        "home": home if _from_command_line(ctx, "home") else None,
        "socket": socket_path if _from_command_line(ctx, "socket_path") else None,
    }
    remote_flags = {k: v for k, v in (("hub", hub_url), ("tls_ca", tls_ca)) if v}
    if ctx.invoked_subcommand in ("config", "doctor"):  # every setting at once; doctor probes itself
        settings = _load_settings(ctx, layers)
        if remote_flags:  # MEMVIEWER_HUB / MEMVIEWER_TLS_CA reach the env layer themselves
            settings = settings.with_overrides(**remote_flags)
        for warning in settings.warnings:
            click.echo(f"warning: {warning}", err=True)
        ctx.obj = {"settings": settings}
        return
    # Every other command (and the viewer): the home and the socket with the standard library
    # (pydantic-settings costs ~0.1 s to import, which a search through the hub never needs);
    # the full Settings is built on first use (``commands.common.settings_of``), with the
    # socket the probe found.
    from memviewer.root_config import RootConfig, resolve

    place = resolve(
        layers["config_file"],
        config_required=layers["config_required"],
        home=layers["home"],
        socket=layers["socket"],
    )
    obj: dict[str, Any] = {}
    if place is None or remote_flags:  # not plain (a bad file, a remote hub): Settings says
        obj["settings"] = full = _load_settings(ctx, layers)
        if remote_flags:
            obj["settings"] = full = full.with_overrides(**remote_flags)
        if full.hub and ctx.invoked_subcommand not in ("serve", "token"):
            for warning in full.warnings:
                click.echo(f"warning: {warning}", err=True)
            _remote_hub(ctx, full)  # a remote hub (``--hub tls://…``) serves this command
            if ctx.invoked_subcommand is None:
                from memviewer.tui.app import run_app

                run_app(full)
            return
        sources = {k: full.sources[k] for k in ("home", "socket")}
        place = RootConfig(full.home, full.socket, sources, full.warnings)
    for warning in place.warnings:
        click.echo(f"warning: {warning}", err=True)
    # One home, one hub: serving_hub decides (and refuses another home's hub or another
    # user's socket with one error); a hub found elsewhere becomes this command's socket.
    # The probe's connection stays open: a command that reads through the hub goes on
    # over it (``commands.via_hub.hub_reader``), so it opens one connection in all.
    from memviewer.errors import MemviewerError
    from memviewer.wire import fastjson
    from memviewer.wire.probe import serving_connection

    try:
        serving = serving_connection(place, client="memviewer.cli", decode=fastjson.decode_answer)
    except MemviewerError as exc:
        _fail(exc.message, exc.hint)
    found = serving[0] if serving is not None else None
    if found is not None and found != place.socket_path:
        place = place.with_socket(str(found))
        layers["socket"] = str(found)
        if "settings" in obj:
            obj["settings"] = obj["settings"].with_overrides(socket=str(found))
    obj.update(place=place, load_settings=lambda: _load_settings(ctx, layers), hub_socket=found)
    ctx.obj = obj  # probed once per command
    if serving is not None:
        probe_conn, ctx.obj["hub_hello"] = serving[2], serving[1]
        ctx.obj["hub_connection"] = probe_conn
        ctx.call_on_close(lambda: _close_unadopted(ctx.obj))
    if ctx.invoked_subcommand is None:
        from memviewer.commands.common import settings_of
        from memviewer.tui.app import run_app

        run_app(settings_of(ctx))


def _load_settings(ctx: click.Context, layers: dict[str, Any]) -> Settings:
    """The full ``Settings`` from the root's layers; a bad value ends the command with the
    error naming the key and its layer (exit 1), as at the start of every command."""
    from memviewer.config import load_settings

    try:
        return load_settings(**layers)
    except ValueError as exc:
        hint = None  # a bad value: the message names the key and the layer it came from
        if str(exc).startswith("config file") and layers["config_file"]:
            from_env = ctx.get_parameter_source("config_file") == click.core.ParameterSource.ENVIRONMENT
            hint = f"point {'MEMVIEWER_CONFIG' if from_env else '--config'} at a TOML file, or unset it"
        _fail(str(exc), hint)


def _remote_hub(ctx: click.Context, settings: Any) -> None:
    """A remote hub (``--hub tls://…``) serves this command: connect and say hello with the
    token now, so a bad certificate or token is one ``error:`` line before anything runs."""
    from memviewer.errors import MemviewerError
    from memviewer.wire.remote import hub_address, open_remote

    try:
        addr = hub_address(settings)
        assert addr is not None
        conn, hello = open_remote(addr, client="memviewer.cli")
    except MemviewerError as exc:
        _fail(f"{exc.message} [{exc.code}]", exc.hint)
    ctx.obj = {"settings": settings, "hub_socket": addr, "hub_hello": hello, "hub_connection": conn}
    ctx.call_on_close(lambda: _close_unadopted(ctx.obj))


def _close_unadopted(obj: dict[str, Any]) -> None:
    """The probe's connection, unless a reader took it over (it closes it then)."""
    conn = obj.pop("hub_connection", None)
    if conn is not None:
        conn.close()


# One command module per area, registered here and nowhere else.
for _area in (core, hub, search, recall, export, demo, golden, recalls, calls, mcp, annotate, tokens):
    for _cmd in _area.COMMANDS:
        cli.add_command(_cmd)


def main() -> None:
    import os

    # The home holds private memory: every file memviewer creates is 0600 and every
    # folder 0700 whatever the caller's umask (SQLite, its WAL/SHM, LanceDB, spool, cache).
    os.umask(0o077)
    cli(prog_name="memviewer")


if __name__ == "__main__":
    main()
