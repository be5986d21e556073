"""How many rows the store holds, for ``MemoryService.stats`` (``memviewer stats``)."""

from __future__ import annotations

from sqlalchemy import Connection, text

_TABLES = ("sessions", "episodes", "turns", "events")


def row_counts(conn: Connection) -> dict[str, int]:
    """Rows per table, then archived turns and compaction summaries (the keys of
    ``stats``'s ``counts``, in its order: docs/cli.md)."""

    def count(sql: str) -> int:
        return int(conn.execute(text(sql)).scalar() or 0)

    out = {name: count(f"SELECT COUNT(*) FROM {name}") for name in _TABLES}
    out["archived_turns"] = count("SELECT COUNT(*) FROM turns WHERE archived")
    out["compaction_summaries"] = count("SELECT COUNT(*) FROM turns WHERE is_compaction_summary")
    return out
