"""docs/cli-reference.md, generated from the click app so the option lists cannot drift.

``python -m memviewer.cli_reference`` rewrites the file; ``--check`` only compares and exits 1
when it is out of date. Nothing runs at import: ``tests/test_cli_reference.py`` calls
:func:`render` and compares. docs/cli.md stays the hand-written JSON and exit-code contract.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import click

from memviewer.cli import cli
from memviewer.generated import write_or_check

#: Where the reference lives in a checkout (the package sits beside docs/).
REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "cli-reference.md"
#: What to run when the file is out of date.
REGENERATE = "python -m memviewer.cli_reference"
#: click's "no default given" marker (click 8.2+; absent before).
_UNSET = getattr(click.core, "UNSET", object())

_HEADER = f"""# Command-line reference

Generated from the click app (`memviewer.cli`) by `{REGENERATE}`; do not edit by hand
(`tests/test_cli_reference.py` fails when this file is out of date). What the commands
print, their JSON shapes, error codes and exit codes are in [cli.md](cli.md).

Every command takes `-h` / `--help`. The root group's options (`--home`, `--socket`,
`--config`, `--log-level`) go before the command's name: `memviewer --home DIR sessions`.
"""


def _text(raw: str | None) -> str:
    """A help text as Markdown: click's ``\\b`` (no-rewrap) markers dropped, ``\\f`` cut."""
    if not raw:
        return ""
    text = inspect.cleandoc(raw).split("\f", 1)[0].replace("<", "&lt;")  # `<tmp>` is no HTML tag
    return "\n".join(line for line in text.splitlines() if line.strip() != "\b").strip()


def _cell(text: str) -> str:
    """One Markdown table cell: a single line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _type(param: click.Parameter, ctx: click.Context) -> str:
    """What the value is: a flag, a choice, a range, or click's type name."""
    if isinstance(param, click.Option) and param.is_flag:
        return "flag"
    kind = param.type
    if isinstance(kind, click.Choice):
        return " \\| ".join(f"`{c}`" for c in kind.choices)
    if isinstance(kind, (click.IntRange, click.FloatRange)):
        base = "integer" if isinstance(kind, click.IntRange) else "float"
        return f"{base}, {kind._describe_range()}"
    return kind.name


def _default(param: click.Parameter, ctx: click.Context) -> str:
    """The default as the command sees it when the option is absent (flags: off)."""
    if isinstance(param, click.Option) and param.is_flag and not param.multiple:
        value = param.get_default(ctx, call=False)
        return "on" if value is True else "off"
    value = param.get_default(ctx, call=False)
    if param.multiple and not isinstance(value, (list, tuple)):
        return "—"  # click's "not given" marker: an empty list
    if value is None or value is _UNSET or value == ():
        return "—"
    if callable(value):
        return "(computed)"
    if isinstance(value, (list, tuple)):
        return ", ".join(f"`{v}`" for v in value)
    return f"`{value}`"


def _option_name(param: click.Option) -> str:
    """The option's names, and its own metavar when it has one (``--vs 'key=value,...'``)."""
    names = " / ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
    if param.metavar and not param.is_flag:
        names += f" `{param.metavar}`"
    return names


def _notes(param: click.Option, help_text: str) -> str:
    """What the help does not already say: required, repeatable, the environment variable."""
    extra = []
    if param.required:
        extra.append("required")
    if param.multiple and "repeat" not in help_text:
        extra.append("repeatable")
    if isinstance(param.envvar, str) and param.envvar not in help_text:
        extra.append(f"env `{param.envvar}`")
    return f" ({'; '.join(extra)})" if extra else ""


def _command(cmd: click.Command, ctx: click.Context, words: list[str], out: list[str]) -> None:
    """The section of one command, then of each sub-command of a group, in name order."""
    name = " ".join(words)
    out += [f"## `{name}`", ""]
    pieces = " ".join(cmd.collect_usage_pieces(ctx))
    out += ["```text", f"{name} {pieces}".rstrip(), "```", ""]
    if cmd.deprecated:
        out += ["*Deprecated.*", ""]
    help_text = _text(cmd.help)
    if help_text:
        out += [help_text, ""]
    arguments = [p for p in cmd.params if isinstance(p, click.Argument)]
    if arguments:
        out += ["| argument | type | |", "|---|---|---|"]
        for arg in arguments:
            shape = "required" if arg.required else "optional"
            if arg.nargs == -1:
                shape += ", any number"
            label = arg.human_readable_name.strip("[]").removesuffix("...")
            out.append(f"| `{label}` | {_type(arg, ctx)} | {shape} |")
        out.append("")
    options = [p for p in cmd.params if isinstance(p, click.Option) and not p.hidden]
    if options:
        out += ["| option | type | default | help |", "|---|---|---|---|"]
        for opt in options:
            help_text = _cell(_text(opt.help))
            help_cell = (help_text + _notes(opt, help_text)).strip()
            out.append(f"| {_option_name(opt)} | {_type(opt, ctx)} | {_default(opt, ctx)} | {help_cell} |")
        out.append("")
    epilog = _text(cmd.epilog)
    if epilog:
        out += [epilog, ""]
    if isinstance(cmd, click.Group):
        for sub_name in sorted(cmd.list_commands(ctx)):
            sub = cmd.get_command(ctx, sub_name)
            if sub is None or sub.hidden:
                continue
            with click.Context(sub, info_name=sub_name, parent=ctx) as sub_ctx:
                _command(sub, sub_ctx, [*words, sub_name], out)


def render() -> str:
    """The whole reference, from the live click app (same input, same bytes)."""
    out = [_HEADER]
    with click.Context(cli, info_name="memviewer") as ctx:
        _command(cli, ctx, ["memviewer"], out)
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the reference (or, with ``--check``, say whether it is current)."""
    return write_or_check(REFERENCE, render(), REGENERATE, argv)


if __name__ == "__main__":
    sys.exit(main())
