"""Every width from 80 to 200 columns: the Recall parameter row, the header and the Sessions
table show their key texts whole (issue 34.3)."""

from __future__ import annotations

import asyncio

import pytest
from tui_helpers import screen_text, wait_for_workers

from memviewer.tui.hub_link import HubStatus, header_forms
from memviewer.tui.live_feed import short_id
from memviewer.tui.messages import HubChanged

WIDTHS = (80, 100, 120, 160, 200)
SOURCES = [
    {"kind": "praisonai", "target": "/home/user/.praisonai/sessions", "connected": True},
    {"kind": "otlp", "target": "127.0.0.1:4318", "connected": True},
]


@pytest.mark.parametrize("width", WIDTHS)
def test_recall_parameters_and_header_fit(make_app, tmp_path, width: int) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(width, 30)) as pilot:
            status = HubStatus("hosting", tmp_path / "a-rather-long-runtime-folder" / "hub.sock")
            app.post_message(HubChanged(*header_forms(status, SOURCES)))
            await pilot.press("3")
            screen = app.screen
            screen.query_one("#mode").value = "compare"
            await wait_for_workers(pilot)
            await pilot.pause()
            text = screen_text(app)
            for word in ("scope", "top_k", "as of", "rerank", "compare flat | hier.", "B: key=value"):
                assert word in text, (width, word, text)
            header = text.splitlines()[0]
            assert header.count(" yet") == 2 and "…" not in header[-3:], header  # each state kept
            screen.query_one("#mode").value = "hierarchical"
            await pilot.pause()
            assert "hierarchical" in screen_text(app)

    asyncio.run(scenario())


@pytest.mark.parametrize("width", WIDTHS)
def test_sessions_columns(make_app, width: int) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(width, 30)) as pilot:
            await wait_for_workers(pilot)
            text = screen_text(app)
            for word in ("Title", "Last seen", "Ep", "Act", "Arch", "Status"):
                assert word in text, (width, word)
            if width >= 200:
                assert "Find the three most cited papers on retrieval augmented generation" in text

    asyncio.run(scenario())


def test_short_id_keeps_both_ends() -> None:
    assert short_id("praisonai-demo-1", 20) == "praisonai-demo-1"
    cut = short_id("s-demo-93869b9c027a83696a67", 12)
    assert len(cut) == 12 and cut.startswith("s-dem") and cut.endswith("96a67") and "…" in cut
