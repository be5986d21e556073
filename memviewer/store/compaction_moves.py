"""The turn moves of a compaction round (``session.compaction.compact``), kept here so the
session layer states what moves where and runs no statements of its own.

Both keep ``idx`` equal to the position in the archived+active projection (the invariant
docs/architecture.md, "Compaction", describes).
"""

from __future__ import annotations

from sqlalchemy import Connection, and_, update

from memviewer.store.repos import T


def archive_first_round(conn: Connection, session_id: str, first: int, last: int) -> None:
    """The first round: archive the turns at ``first..last`` and move the active turns after
    them up by one, freeing ``last + 1`` for the summary the caller inserts there."""
    conn.execute(
        update(T)
        .where(and_(T.c.session_id == session_id, T.c.archived.is_(False), T.c.idx > last))
        .values(idx=T.c.idx + 1)
    )
    conn.execute(
        update(T)
        .where(and_(T.c.session_id == session_id, T.c.idx >= first, T.c.idx <= last))
        .values(archived=True)
    )


def archive_behind_summary(conn: Connection, session_id: str, first: int, last: int) -> None:
    """A later round: archive the real active turns at ``first..last`` and move each down by
    one into the slot the summary held (the caller then moves the summary to ``last``)."""
    conn.execute(
        update(T)
        .where(
            and_(
                T.c.session_id == session_id,
                T.c.archived.is_(False),
                T.c.is_compaction_summary.is_(False),
                T.c.idx >= first,
                T.c.idx <= last,
            )
        )
        .values(archived=True, idx=T.c.idx - 1)
    )
