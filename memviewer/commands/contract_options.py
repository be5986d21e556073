"""Click options derived from the request models (``memviewer.contract.requests``).

``search --limit`` and ``recall --top-k`` take their range, default and help from the model
field they set, so the CLI refuses what the hub and MCP refuse, with click's usage error
(exit 2; the ``--json`` usage error object with ``--json``), before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
from pydantic import BaseModel

from memviewer.contract.requests import int_bounds


def contract_option(model: type[BaseModel], name: str, *decls: str, **attrs: Any) -> Callable[[Any], Any]:
    """A ``click.option`` for the field ``name`` of ``model``: the field's default and
    description, and for an integer ``click.IntRange(ge, le)`` (a text field stays text);
    ``decls`` (default ``--field-name``) and ``attrs`` (e.g. ``help``, ``default=None``) override."""
    field = model.model_fields[name]
    options: dict[str, Any] = {"default": field.default, "help": field.description}
    if field.annotation is int:
        options.update(type=click.IntRange(*int_bounds(model, name)), show_default=True)
    options.update(attrs)
    return click.option(*(decls or (f"--{name.replace('_', '-')}",)), name, **options)
