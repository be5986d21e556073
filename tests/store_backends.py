"""The ``backend_store`` fixture: one test, run on SQLite and (when ``MEMVIEWER_TEST_PG_URL``
points at a server, as ``.ci/run`` arranges) on a fresh PostgreSQL database of its own.

The URL is read when this plugin is imported: the autouse ``_isolated_env`` fixture clears
every ``MEMVIEWER_*`` variable before a test runs.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memviewer.store.db import Store

PG_URL = os.environ.get("MEMVIEWER_TEST_PG_URL")
BACKENDS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.skipif(not PG_URL, reason="MEMVIEWER_TEST_PG_URL not set")),
]


@contextmanager
def fresh_pg_database() -> Iterator[str]:
    """The URL of a new, empty database on the test server, dropped afterwards."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    assert PG_URL
    name = f"mv_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE \"{name}\" ENCODING 'UTF8' TEMPLATE template0"))
        yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def store_on(backend: str, folder: Path) -> Iterator[Store]:
    """A migrated store: a SQLite file in ``folder``, or a fresh PostgreSQL database."""
    if backend == "sqlite":
        store = Store.open(folder / "kw.db")
        try:
            yield store
        finally:
            store.close()
        return
    with fresh_pg_database() as url:
        store = Store(url)
        try:
            yield store
        finally:
            store.close()
            store.engine.dispose()


@pytest.fixture(params=BACKENDS)
def backend_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A migrated store on each backend in turn."""
    with store_on(request.param, tmp_path) as store:
        yield store
