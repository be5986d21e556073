"""The two records that are not conversation: a recall log entry and an LLM call.

Each is checked (``memviewer.recall_log`` / ``memviewer.context.calls``), written with its
event in one transaction and idempotent by its id; ``SessionManager.record_recall`` and
``record_llm_call`` are their faces (the manager stays the only code that changes memory).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memviewer.session.turn_rules import timestamp
from memviewer.store.db import Store
from memviewer.timeutil import now


@dataclass(frozen=True)
class RecallLogLimits:
    """The recall log's retention (the service copies it from ``Settings``)."""

    max_entries: int
    max_days: float
    max_mb: float


def record_recall(store: Store, keep: RecallLogLimits, args: dict[str, Any], ts: Any) -> dict[str, Any]:
    """Store one recall log entry, emit ``recall.performed`` and prune what ``keep`` no longer keeps."""
    from memviewer import recall_log
    from memviewer.store import recall_log as rows

    values = recall_log.check_command(args)
    t = timestamp(ts)
    rid = values["id"]
    if keep.max_entries <= 0:
        return {"recall_id": rid, "recorded": False}
    top = [
        {k: item[k] for k in ("turn_id", "session_id", "index", "score") if item.get(k) is not None}
        for item in values["results"][:3]
    ]
    payload = {
        "recall_id": rid,
        "source": values["source"],
        "kind": values["kind"],
        "query": values["query"][:500],
        "result_count": len(values["results"]),
        "top": top,
    }
    with store.write() as tx:
        rows.write_entry(
            tx,
            {**values, "ts": t},
            max_rows=keep.max_entries,
            max_age_s=keep.max_days * 86400.0 if keep.max_days > 0 else None,
            max_bytes=int(keep.max_mb * 1024 * 1024),
            now=now(),
            event_kind="recall.performed",
            event_payload=payload,
        )
    return {"recall_id": rid}


def record_llm_call(store: Store, args: dict[str, Any], ts: Any) -> dict[str, Any]:
    """Store one LLM call and emit ``llm_call.recorded`` (once: a replay writes nothing)."""
    from memviewer.context import calls
    from memviewer.store import llm_calls as rows

    values = calls.check_command(args)
    values["ts"] = timestamp(ts)
    with store.write() as tx:
        if rows.write(tx.conn, values):
            tx.append_event(
                "llm_call.recorded",
                values["session_id"],
                values["episode_id"],
                calls.recorded_payload(values),
                ts=values["ts"],
            )
    return {"call_id": values["id"]}
