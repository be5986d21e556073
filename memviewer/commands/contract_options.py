"""Click options derived from the request models (``memviewer.contract.requests``).

``search --limit`` and ``recall --top-k`` take their range, default and help from the model
field they set, so the CLI refuses what the hub and MCP refuse, with click's usage error
(exit 2; the ``--json`` usage error object with ``--json``), before anything runs. They read
the models through ``memviewer.contract.cli_table``, generated from them
(``python -m memviewer.cli_tables``): importing pydantic here cost every command's start.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import click


def contract_option(
    fields: Mapping[str, Mapping[str, Any]], name: str, *decls: str, **attrs: Any
) -> Callable[[Any], Any]:
    """A ``click.option`` for the field ``name`` of a model's table (``cli_table.SEARCH_PARAMS``,
    ``cli_table.RECALL_PARAMS``): the field's default and description, and for a bounded
    integer ``click.IntRange(ge, le)`` (a text field stays text); ``decls`` (default
    ``--field-name``) and ``attrs`` (e.g. ``help``, ``default=None``) override."""
    field = fields[name]
    options: dict[str, Any] = {"default": field["default"], "help": field["help"]}
    if field["bounds"] is not None:
        options.update(type=click.IntRange(*field["bounds"]), show_default=True)
    options.update(attrs)
    return click.option(*(decls or (f"--{name.replace('_', '-')}",)), name, **options)
