"""Helpers for driving the viewer in tests: wait for workers, wait for a
condition, read what the screen shows as plain text."""

from __future__ import annotations

import asyncio
import html
import re
import time
from collections.abc import Callable
from typing import Any

LONG_LIVED = frozenset({"live", "hub", "index-lag"})  # workers that run as long as the app


async def _settle(app: Any, timeout: float) -> None:
    """Until every message queued so far on the app and its screens' widgets was handled: a
    callback queued behind them on each node (the public ``call_later``) has run."""
    loop = asyncio.get_running_loop()
    nodes: list[Any] = [app]
    for screen in app.screen_stack:
        nodes.extend(screen.walk_children(with_self=True))
    done: list[asyncio.Future[None]] = []
    for node in nodes:
        fut: asyncio.Future[None] = loop.create_future()
        if node.call_later(lambda f=fut: f.done() or f.set_result(None)):
            done.append(fut)
    if done:
        await asyncio.wait_for(asyncio.gather(*done), timeout)


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
        if not busy:
            # twice: messages posted while the first round was handled are handled by the second
            await _settle(app, timeout)
            await _settle(app, timeout)
            if not any(
                not w.is_finished and w.group not in LONG_LIVED and (groups is None or w.group in groups)
                for w in app.workers
            ):
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


_SVG_TEXT = re.compile(
    r'<text [^>]*?x="([0-9.]+)" y="[0-9.]+" textLength="([0-9.]+)" '
    r'clip-path="url\(#[\w-]+-line-(\d+)\)">(.*?)</text>'
)


def screen_raw(app: Any) -> str:
    """Every character the screen shows, as Textual's own screenshot renders it (public
    ``export_screenshot``): control bytes that reached a widget would be here too."""
    return "".join(html.unescape(m.group(4)) for m in _SVG_TEXT.finditer(app.export_screenshot()))


def screen_text(app: Any) -> str:
    """The current screen as plain text (what a user would read), rebuilt line by line from
    Textual's screenshot: each run of text is placed at its column."""
    lines: dict[int, list[str]] = {}
    for m in _SVG_TEXT.finditer(app.export_screenshot()):
        x, length, row, raw = float(m.group(1)), float(m.group(2)), int(m.group(3)), m.group(4)
        text = html.unescape(raw).replace("\u00a0", " ")
        col = round(x / (length / len(text))) if text else 0
        line = lines.setdefault(row, [])
        line.extend(" " * (col - len(line)))
        line[col : col + len(text)] = list(text)
    return "\n".join("".join(lines.get(row, [])).rstrip() for row in range(max(lines, default=-1) + 1)) + "\n"


def notifications(app: Any) -> list[str]:
    """Start recording what the app says in toasts: wraps the public ``notify``."""
    seen: list[str] = []
    notify = app.notify

    def recording(message: Any, *args: Any, **kwargs: Any) -> None:
        seen.append(str(message))
        notify(message, *args, **kwargs)

    app.notify = recording
    return seen


def cell_texts(table: Any, row: int) -> list[str]:
    return [getattr(c, "plain", str(c)) for c in table.get_row_at(row)]
