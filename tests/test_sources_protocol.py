"""Every source ``build_sources`` makes has what the hub calls (``sources.source.Source``):
``kind``, ``start(hub)`` and ``stop()`` as coroutines, ``status()`` as the dict ``stats``
lists. mypy checks the same structurally; this checks the objects the settings really make."""

from __future__ import annotations

import inspect
from pathlib import Path

from memviewer.config import Settings
from memviewer.sources import build_sources
from memviewer.sources.source import Source

METHODS = ("start", "stop", "status")


def test_the_protocol_names_what_the_hub_calls() -> None:
    members = {n for n in vars(Source) if not n.startswith("_")} | set(Source.__annotations__)
    assert members == {"kind", *METHODS}
    assert inspect.iscoroutinefunction(Source.start) and inspect.iscoroutinefunction(Source.stop)


def test_both_sources_satisfy_it(settings: Settings, tmp_path: Path) -> None:
    folder = tmp_path / "praisonai"
    folder.mkdir()
    built = build_sources(settings.with_overrides(watch_praisonai=[str(folder)], otlp="127.0.0.1:0"))
    assert [s.kind for s in built] == ["praisonai", "otlp"]
    for source in built:
        for name in METHODS:
            want = inspect.iscoroutinefunction(getattr(Source, name))
            assert inspect.iscoroutinefunction(getattr(source, name)) == want, (source.kind, name)
        assert list(inspect.signature(source.start).parameters) == ["hub"]
        status = source.status()  # not started: what stats shows before it connects
        assert status["kind"] == source.kind and status["connected"] is False
        assert {"target", "last_delivery", "last_error", "counters"} <= set(status)
