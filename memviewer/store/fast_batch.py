"""The raw SQLite statements for the rest of a batch's hot commands (``session.fastpath``).

What the OTLP receiver sends most, a chat span at a time, is ``finalize_episode`` (the
conversation's previous episode), ``start_episode``, the answer's ``add_turn`` and
``record_llm_call``. Through SQLAlchemy these cost ~11 built statements a command (building
and cache keys were half the writer's time); here each is a prepared statement on the
driver connection, inside the transaction ``Store.write`` opened, writing the same rows
(``store.fast_turns`` for the turns and events; ``store.llm_calls.write_raw`` for calls).
"""

from __future__ import annotations

from typing import Any

from memviewer.store import llm_calls
from memviewer.store.fast_turns import RawTurnStatements, sa_json

_INSERT_EPISODE = (
    "INSERT INTO episodes (id, session_id, status, closed_by, started_at, ended_at, intent_kind,"
    " intent_confidence, intent_rule, intent_source, r_task, meta)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_EPISODE_COLS = (
    "id",
    "session_id",
    "status",
    "closed_by",
    "started_at",
    "ended_at",
    "intent_kind",
    "intent_confidence",
    "intent_rule",
    "intent_source",
    "r_task",
)


class RawBatchStatements(RawTurnStatements):
    """Turns (inherited), episodes, session titles and LLM calls, in one write transaction."""

    def has_episode(self, episode_id: str) -> bool:
        return self.raw.execute("SELECT 1 FROM episodes WHERE id = ?", (episode_id,)).fetchone() is not None

    def insert_episode(self, row: dict[str, Any]) -> None:
        self.raw.execute(_INSERT_EPISODE, (*(row[c] for c in _EPISODE_COLS), sa_json(row["meta"])))

    def update_episode(self, episode_id: str, values: dict[str, Any]) -> None:
        """``repos.update_episode`` for a close's columns (status, closed_by, ended_at, meta, r_task)."""
        cols = list(values)
        sets = ", ".join(f"{c} = ?" for c in cols)
        params = [sa_json(values[c]) if c == "meta" else values[c] for c in cols]
        self.raw.execute(f"UPDATE episodes SET {sets} WHERE id = ?", (*params, episode_id))

    def set_title(self, session_id: str, title: str) -> None:
        self.raw.execute("UPDATE sessions SET title = ? WHERE id = ?", (title, session_id))

    def write_llm_call(self, values: dict[str, Any]) -> bool:
        return llm_calls.write_raw(self.raw, values)
