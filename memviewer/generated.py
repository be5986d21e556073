"""Files the project generates from its own code (docs/cli-reference.md from the click app,
contract/cli_table.py from the request models): one way to write them or check they are
current, so a test and CI fail the same way for each."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path


def write_or_check(path: Path, fresh: str, regenerate: str, argv: Sequence[str] | None = None) -> int:
    """Write ``fresh`` to ``path`` when it differs; with ``--check`` in ``argv`` write nothing
    and return 1 (naming ``regenerate``, the command that rewrites it) when it is stale."""
    args = sys.argv[1:] if argv is None else argv
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    if "--check" in args:
        if current != fresh:
            print(f"{path} is out of date: run `{regenerate}`", file=sys.stderr)
            return 1
        return 0
    if current != fresh:
        path.write_text(fresh, encoding="utf-8")
        print(f"wrote {path}")
    return 0
