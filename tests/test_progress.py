"""The CLI's progress bar: one bar per phase, never one per item."""

from __future__ import annotations

import io

import pytest

from memviewer.commands.common import progress_callback


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_new_phase_starts_a_new_bar_and_items_do_not(monkeypatch: pytest.MonkeyPatch) -> None:
    err = FakeTty()
    monkeypatch.setattr("sys.stderr", err)
    update, close = progress_callback("indexing")
    assert update is not None
    for done in (100, 200, 300):
        update(done, 300, "turns")
    for done in (256, 300):  # the summaries: same total, the count starts again
        update(done, 300, "summaries")
    for done in (1, 2, 3):  # an importer names each file: still one bar
        update(done, 3, f"file-{done}.json")
    close()
    out = err.getvalue()
    assert out.count("\n") == 3  # each finished bar ends its line once
    assert out.count("100%") >= 3


def test_no_bar_without_a_tty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stderr", io.StringIO())
    update, close = progress_callback("indexing")
    assert update is None
    close()
