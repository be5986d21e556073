"""Fixtures for the viewer tests: a populated service (HashEmbedder, no model)
and an app factory that injects it. The root conftest isolates home/socket."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tui_data import populate

from memviewer.config import Settings


@pytest.fixture
def filled(settings: Settings) -> Iterator[Any]:
    """A writable service over the fixture memory (see tui_data.populate)."""
    from memviewer.index.embedder import HashEmbedder
    from memviewer.service import MemoryService

    svc = MemoryService(settings, embedder=HashEmbedder())
    populate(svc)
    try:
        yield svc
    finally:
        svc.close()


@pytest.fixture
def make_app(filled: Any) -> Callable[..., Any]:
    """``make_app(**kw)``: the viewer over ``filled``, no hub unless asked for."""
    from memviewer.tui.app import MemviewerApp

    def factory(**kwargs: Any) -> Any:
        kwargs.setdefault("hub", "off")
        return MemviewerApp(filled.settings, service=filled, **kwargs)

    return factory


def _svg_rows(svg: str) -> list[str]:
    """The text of an SVG screenshot, one string per terminal row."""
    import html
    import re

    rows: dict[float, str] = {}
    for y, text in re.findall(r'<text class="[^"]*" x="[\d.]+" y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        rows[float(y)] = rows.get(float(y), "") + html.unescape(text).replace("\xa0", " ")
    return [rows[y] for y in sorted(rows)]


@pytest.fixture
def snap_compare(snap_compare: Callable[..., bool], request: pytest.FixtureRequest) -> Callable[..., bool]:
    """The plugin's comparison, and on a mismatch the rows that differ printed (the HTML
    report stays on the machine that ran the test; CI shows only the output)."""
    import difflib
    import pickle

    from pytest_textual_snapshot import node_to_report_path

    def compare(*args: Any, **kwargs: Any) -> bool:
        same = snap_compare(*args, **kwargs)
        if not same:
            data = pickle.loads(node_to_report_path(request.node).read_bytes())
            expected, actual = _svg_rows(data[1]), _svg_rows(data[2])
            print("snapshot rows, expected (-) and drawn (+):")
            diff = list(difflib.unified_diff(expected, actual, lineterm="", n=1))
            print("\n".join(diff) or "(the same text: only styles or colours differ)")
        return same

    return compare
