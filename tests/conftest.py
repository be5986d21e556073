"""Shared fixtures: an isolated home per test, settings and a service on it."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from memviewer.config import Settings, load_settings

# fake_llm: an OpenAI-compatible server; store_backends: backend_store, SQLite and PostgreSQL
pytest_plugins = ["fake_llm", "store_backends"]


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test may read the user's config or data, or reach a real hub.

    Each test gets its own home and its own runtime folder (``XDG_RUNTIME_DIR``, a
    short folder in /tmp so socket paths stay under the 107-byte limit), so the
    default socket of every home a test uses is private to that test: a hub running
    on the machine (``.ci/run`` starts one on purpose) is never reached.
    """
    runtime = Path(tempfile.mkdtemp(prefix="mvrt-", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("MEMVIEWER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MEMVIEWER_CONFIG", os.devnull)  # a named config file must exist: an empty one
    for key in list(os.environ):
        if key.startswith("MEMVIEWER_") and key not in ("MEMVIEWER_HOME", "MEMVIEWER_CONFIG"):
            monkeypatch.delenv(key, raising=False)
    try:
        yield
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short folder for Unix sockets (their paths are limited to ~107 bytes)."""
    d = Path(tempfile.mkdtemp(prefix="mv-", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def settings(tmp_path: Path, short_tmp: Path) -> Settings:
    return load_settings(
        tmp_path / "no-config.toml",
        env={},
        home=str(tmp_path / "home"),
        socket=str(short_tmp / "hub.sock"),
    )


@pytest.fixture
def service(settings: Settings):
    from memviewer.index.embedder import HashEmbedder
    from memviewer.service import MemoryService

    svc = MemoryService(settings, embedder=HashEmbedder())
    try:
        yield svc
    finally:
        svc.close()
