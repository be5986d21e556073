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
