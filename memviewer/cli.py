"""The ``memviewer`` command line.

With no sub-command it opens the TUI. Command modules are imported here so
``memviewer --help`` lists everything; each keeps heavy imports inside its
functions so that simple commands start fast.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from memviewer import __version__
from memviewer.commands import core


class _Cli(click.Group):
    """The root group; its ``invoke`` is the last net under every sub-command.

    A ``MemviewerError`` that a command did not catch (the store cannot be
    opened, say) and a plain ``click.ClickException`` both become the usual
    ``error: ...`` line (+ ``hint:``) and exit 1, never a traceback or click's
    capitalised ``Error:``. Usage errors keep click's own usage output.
    """

    def invoke(self, ctx: click.Context) -> Any:
        from memviewer.errors import MemviewerError

        try:
            return super().invoke(ctx)
        except MemviewerError as exc:
            _fail(exc.message, (exc.data or {}).get("hint"))
        except click.ClickException as exc:
            if isinstance(exc, click.UsageError):
                raise
            _fail(exc.format_message(), None, exc.exit_code)


def _fail(message: str, hint: str | None, code: int = 1) -> None:
    click.echo(f"error: {message}", err=True)
    if hint:
        click.echo(f"hint: {hint}", err=True)
    sys.exit(code)


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
@click.option("--log-level", default="WARNING", show_default=True, help="logging level")
@click.pass_context
def cli(ctx: click.Context, home, socket_path, config_file, log_level) -> None:
    """memviewer: browse, search and debug the memory of your AI agents."""
    from pathlib import Path

    from memviewer.config import load_settings
    from memviewer.logctx import configure_logging

    configure_logging(log_level.upper())
    try:
        settings = load_settings(
            Path(config_file) if config_file else None,
            config_required=bool(config_file),
            home=home,
            socket=socket_path,
        )
    except ValueError as exc:
        hint = None  # a bad value: the message names the key and the layer it came from
        if str(exc).startswith("config file") and config_file:
            from_env = ctx.get_parameter_source("config_file") == click.core.ParameterSource.ENVIRONMENT
            hint = f"point {'MEMVIEWER_CONFIG' if from_env else '--config'} at a TOML file, or unset it"
        _fail(str(exc), hint)
    for warning in settings.warnings:
        click.echo(f"warning: {warning}", err=True)
    if settings.sources.get("socket") == "default":  # not chosen: follow the hub serving this home
        from memviewer.wire.probe import home_hub_socket

        found = home_hub_socket(settings.home_path)
        if found is not None and found != settings.socket_path:
            settings = settings.with_overrides(socket=str(found))
    ctx.obj = {"settings": settings}
    if ctx.invoked_subcommand is None:
        from memviewer.tui.app import run_app

        run_app(settings)


for _cmd in core.COMMANDS:
    cli.add_command(_cmd)

# Areas built in their own modules register themselves here.
from memviewer.commands import optional_areas  # noqa: E402

optional_areas.register(cli)


def main() -> None:
    cli(prog_name="memviewer")


if __name__ == "__main__":
    main()
