"""The viewer's hosted hub honours ``watch_praisonai``, and the header names the source."""

from __future__ import annotations

import asyncio
import json

import pytest
from tui_helpers import wait_until

from memviewer.tui import app as app_module
from memviewer.tui.app import MemviewerApp

pytestmark = pytest.mark.integration


def test_hosted_hub_follows_a_praisonai_folder_and_the_header_says_so(
    settings, tmp_path, monkeypatch
) -> None:
    folder = tmp_path / "praison"
    folder.mkdir()
    settings = settings.with_overrides(watch_praisonai=[str(folder)])
    monkeypatch.setattr(app_module, "SOURCES_REFRESH_S", 0.2)

    async def scenario() -> None:
        app = MemviewerApp(settings, hub="auto", hub_indexer=False)
        async with app.run_test(size=(160, 36)) as pilot:
            await wait_until(pilot, lambda: app.hosted is not None, what="hub hosted")
            await wait_until(pilot, lambda: "nothing yet" in app.sub_title, what="the source in the header")
            (folder / "p1.json").write_text(
                json.dumps({"session_id": "p1", "messages": [{"role": "user", "content": "hi from praison"}]})
            )
            await wait_until(pilot, lambda: "s ago" in app.sub_title, timeout=15, what="a delivery")
            assert f"praisonai {folder}" in app.sub_title
            assert app.service.session("p1")["turns"][0]["content"] == "hi from praison"

    asyncio.run(scenario())
