"""Helpers for driving the viewer in tests: wait for workers, wait for a
condition, read what the screen shows as plain text."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console

LONG_LIVED = frozenset({"live", "hub", "index-lag"})  # workers that run as long as the app


def _queues_empty(app: Any) -> bool:
    nodes: list[Any] = [app]
    for screen in app.screen_stack:
        nodes.append(screen)
        nodes.extend(screen.walk_children())
    return all(node._message_queue.empty() for node in nodes)


async def wait_for_workers(pilot: Any, timeout: float = 15.0, groups: set[str] | None = None) -> None:
    """Until every worker (except the long-lived subscriber/hub ones) has finished and the
    messages it posted were handled, then a repaint. Does not lean on Textual's CPU-idle
    heuristic alone, which a busy machine defeats."""
    app = pilot.app
    deadline = time.monotonic() + timeout
    while True:
        busy = [
            w
            for w in app.workers
            if not w.is_finished and w.group not in LONG_LIVED and (groups is None or w.group in groups)
        ]
        if not busy and _queues_empty(app):
            await asyncio.sleep(0.01)
            if _queues_empty(app):
                break
        if time.monotonic() > deadline:
            raise AssertionError(f"workers still running after {timeout}s: {busy}")
        await asyncio.sleep(0.01)
    await pilot.pause()


async def wait_until(pilot: Any, predicate: Callable[[], Any], timeout: float = 15.0, what: str = "") -> Any:
    """Poll ``predicate`` between UI cycles; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        await pilot.pause(0.02)


def screen_text(app: Any) -> str:
    """The current screen as plain text (what a user would read)."""
    update = app.screen._compositor.render_update(full=True)
    console = Console(width=app.size.width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(update)
    return console.export_text()


def cell_texts(table: Any, row: int) -> list[str]:
    return [getattr(c, "plain", str(c)) for c in table.get_row_at(row)]
