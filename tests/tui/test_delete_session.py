"""Deleting a session: asked first, then gone from SQLite, the FTS5 keyword index and the
LanceDB turn and summary rows alike (the real stores, HashEmbedder)."""

from __future__ import annotations

import asyncio

import pytest
from tui_helpers import wait_for_workers, wait_until

from memviewer.errors import MemviewerError
from memviewer.tui.screens.confirm import ConfirmScreen


def _index_counts(svc, sid: str) -> tuple[int, int]:
    from memviewer.index.lance import SUMMARIES, TURNS

    index = svc.indexer().index
    where = f"session_id = '{sid}'"
    return index.count(TURNS, where), index.count(SUMMARIES, where)


def test_delete_leaves_every_index_consistent(filled) -> None:
    filled.sync_index()
    assert _index_counts(filled, "s-research")[0] > 0
    assert any(h["session_id"] == "s-research" for h in filled.search(query="retrieval")["results"])
    out = filled.delete_session("s-research")
    assert out["turns"] == 9 and out["episodes"] == 3  # 4 archived, 4 active, 1 summary
    filled.sync_index()
    assert all(r["session_id"] != "s-research" for r in filled.sessions()["sessions"])
    assert not any(h["session_id"] == "s-research" for h in filled.search(query="retrieval")["results"])
    assert _index_counts(filled, "s-research") == (0, 0)
    status = filled.indexer().status()
    assert status["indexed_turns"] == status["sql_turns"] and status["lag"] == 0
    recall = filled.recall("cited papers retrieval", top_k=20)
    assert all(r["session_id"] != "s-research" for r in recall["results"])
    assert not recall["diagnostics"].get("stale")
    assert filled.events(0, 10_000)[-1].kind == "session.deleted"
    with pytest.raises(MemviewerError) as err:
        filled.delete_session("s-research")
    assert err.value.code == "session_not_found"


def test_viewer_asks_before_deleting(make_app, filled) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for_workers(pilot)
            screen = app.screen
            sid = screen.current_id()
            await pilot.press("D")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("n")  # kept
            await wait_for_workers(pilot)
            assert app.screen is screen and sid in [r["session_id"] for r in screen.rows]
            await pilot.press("D")
            await pilot.press("y")
            await wait_until(pilot, lambda: sid not in [r["session_id"] for r in screen.rows], what="gone")
            assert screen.total == 5

    asyncio.run(scenario())
