"""docs/cli-reference.md is what ``python -m memviewer.cli_reference`` makes of the click app
today: a new option, a changed default or help text fails here until the file is regenerated."""

from __future__ import annotations

import click

from memviewer import cli_reference
from memviewer.cli import cli


def test_the_reference_is_current() -> None:
    fresh = cli_reference.render()
    current = cli_reference.REFERENCE.read_text(encoding="utf-8")
    assert current == fresh, (
        f"docs/cli-reference.md is out of date with memviewer.cli: run `.venv/bin/{cli_reference.REGENERATE}`"
    )


def _commands(cmd: click.Command, words: list[str]) -> list[tuple[str, click.Command]]:
    found = [(" ".join(words), cmd)]
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            if not sub.hidden:
                found += _commands(sub, [*words, name])
    return found


def test_every_command_and_visible_option_is_in_it() -> None:
    text = cli_reference.render()
    for name, cmd in _commands(cli, ["memviewer"]):
        section = text.split(f"## `{name}`\n", 1)
        assert len(section) == 2, f"no section for {name}"
        body = section[1].split("\n## ", 1)[0]
        for param in cmd.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert all(f"`{opt}`" in body for opt in param.opts), (name, param.opts)


def test_defaults_ranges_and_hidden_options() -> None:
    text = cli_reference.render()
    assert "| `--top-k` / `--limit` | integer, 1<=x<=1000 | `10` |" in text  # recall: range and default
    assert "| `--format` | `json` \\| `jsonl` \\| `md` \\| `praisonai` | — |" in text  # a choice
    assert "--keep-open" not in text  # serve's hidden no-op is not advertised
    assert "&lt;tmp&gt;" not in text and "&lt;tmp>/memviewer-eval-cache" in text  # not an HTML tag
