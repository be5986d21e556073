"""A look at a home's SQLite file without opening a ``Store`` (no migration, no WAL switch,
read-only): for callers that must decide whether a folder is theirs to use before anything
touches it (``eval.longmemeval.check_eval_home``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path


class UnreadableStore(Exception):
    """The file is no SQLite database, or has no ``sessions`` table; the message is SQLite's."""


def sessions_outside_scopes(db: Path, scopes: Sequence[str]) -> int:
    """How many sessions of the store file ``db`` have a scope not in ``scopes`` (a missing
    scope counts as ``""``). Raises ``UnreadableStore`` when SQLite cannot answer."""
    try:
        conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
        try:
            marks = ", ".join("?" for _ in scopes)
            return int(
                conn.execute(
                    f"SELECT COUNT(*) FROM sessions WHERE coalesce(scope, '') NOT IN ({marks})", tuple(scopes)
                ).fetchone()[0]
            )
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise UnreadableStore(str(exc)) from None
