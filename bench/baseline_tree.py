"""A git revision's ``memviewer/`` package in a folder, so a benchmark can run it side by
side with the working tree in one run (each in its own child process, cwd outside both)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def extract(rev: str, dest: Path, paths: tuple[str, ...] = ("memviewer",)) -> Path:
    """``rev``'s ``paths`` (the package by default; ``()`` for the whole tree) under ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, *paths], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest
