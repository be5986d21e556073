"""Filling the Recall screen from elsewhere (a recall log entry, a Context view's item)."""

from __future__ import annotations

from typing import Any

from textual.widgets import Select

from memviewer.contract.requests import RECALL_MODES, RecallParams, default


def fill_recall_screen(screen: Any, query: str, params: dict[str, Any]) -> None:
    """Put ``query`` and ``params`` into the Recall screen's inputs and run it."""
    from textual.widgets import Input

    values = {
        "#query": query,
        "#scope": params.get("scope") or "",
        "#scope-id": params.get("scope_id") or "",
        # a parameter the entry did not record shows the model's default
        "#k": str(params.get("top_sessions") or default(RecallParams, "top_sessions")),
        "#m": str(params.get("chunks_per_session") or default(RecallParams, "chunks_per_session")),
        "#top-k": str(params.get("top_k") or default(RecallParams, "top_k")),
        "#as-of": "" if params.get("as_of") in (None, "") else str(params["as_of"]),
    }
    # No Changed messages: their debounced re-run would run the same recall a second time.
    with screen.prevent(Input.Changed, Select.Changed):
        for widget_id, value in values.items():
            screen.query_one(widget_id, Input).value = value
        mode = params.get("mode")
        if mode in RECALL_MODES:
            screen.query_one("#mode", Select).value = mode
    if screen.action_rerun():
        screen.action_focus_results()  # as after Enter: the screen keys act, not the query field
