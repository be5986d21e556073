"""Registers the command modules of each area (hub, search, recall, export, demo)."""

from __future__ import annotations

import importlib

import click

AREAS = (
    "memviewer.commands.hub",
    "memviewer.commands.search",
    "memviewer.commands.recall",
    "memviewer.commands.export",
    "memviewer.commands.demo",
    "memviewer.commands.mcp",
    "memviewer.commands.recalls",
)


def register(group: click.Group) -> None:
    for name in AREAS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue  # area not built into this checkout
            raise
        for cmd in module.COMMANDS:
            group.add_command(cmd)
