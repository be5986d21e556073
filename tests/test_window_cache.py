"""The in-memory chat-window vectors of Stage 1: the same answer as reading the table, read
again after any write (a new table version), bounded in rows. A fake index for speed; the real
LanceDB path is in tests/test_chat_windows.py."""

from __future__ import annotations

from typing import Any

import numpy as np

from memviewer.index.window_cache import WindowVectors


class FakeIndex:
    def __init__(self, rows: dict[str | None, list[dict[str, Any]]]) -> None:
        self.by_scope = rows
        self.version = 1
        self.reads = 0
        self.dense_calls = 0

    def table_version(self, name: str) -> int | None:
        return self.version

    def rows(self, name: str, where: str | None, columns: Any) -> list[dict[str, Any]]:
        self.reads += 1
        return [dict(r) for r in self.by_scope.get(where, [])]

    def dense(self, name: str, q: Any, where: str | None, depth: int, columns: Any) -> list[dict[str, Any]]:
        self.dense_calls += 1
        rows = self.by_scope.get(where, [])
        ranked = sorted(rows, key=lambda r: -float(np.dot(r["vector"], q)))[:depth]
        return [
            {"session_id": r["session_id"], "_distance": 1.0 - float(np.dot(r["vector"], q))} for r in ranked
        ]


def _rows(rng: np.random.Generator, sessions: int, per: int, prefix: str) -> list[dict[str, Any]]:
    out = []
    for s in range(sessions):
        for _ in range(per):
            v = rng.normal(size=8).astype(np.float32)
            out.append({"session_id": f"{prefix}{s}", "vector": v / np.linalg.norm(v)})
    rng.shuffle(out)  # the table's order is not the sessions' order
    return out


def _brute(rows: list[dict[str, Any]], q: np.ndarray) -> dict[str, float]:
    best: dict[str, float] = {}
    for r in rows:
        best[r["session_id"]] = max(best.get(r["session_id"], -2.0), float(np.dot(r["vector"], q)))
    return {k: max(0.0, v) for k, v in best.items()}


def test_best_equals_each_sessions_best_window_and_reads_once_per_version() -> None:
    rng = np.random.default_rng(7)
    rows = _rows(rng, 6, 5, "s")
    index = FakeIndex({"scope = 'a'": rows})
    cache = WindowVectors()
    for _ in range(3):
        q = rng.normal(size=8).astype(np.float32)
        q /= np.linalg.norm(q)
        got, complete = cache.best(index, "scope = 'a'", q, depth=100)
        assert complete
        assert got.keys() == _brute(rows, q).keys()
        assert all(abs(got[k] - v) < 1e-6 for k, v in _brute(rows, q).items())
    assert index.reads == 1
    index.version = 2  # a write: the rows are read again, and the new ones count
    index.by_scope["scope = 'a'"] = rows + _rows(rng, 1, 2, "new")
    assert "new0" in cache.best(index, "scope = 'a'", q, depth=100)[0]
    assert index.reads == 2
    assert cache.best(index, "scope = 'none'", q, depth=100) == ({}, True)


def test_rows_are_bounded_and_a_scope_too_big_to_keep_is_queried() -> None:
    rng = np.random.default_rng(3)
    scopes = {f"s{i}": _rows(rng, 4, 5, f"x{i}-") for i in range(5)}  # 20 rows each
    index = FakeIndex(scopes)
    cache = WindowVectors(max_rows=50)
    q = np.ones(8, dtype=np.float32) / np.sqrt(8)
    for where in scopes:
        cache.best(index, where, q, depth=100)
    assert index.reads == 5
    cache.best(index, "s4", q, depth=100)  # the newest two are kept (40 rows)...
    cache.best(index, "s3", q, depth=100)
    assert index.reads == 5
    cache.best(index, "s0", q, depth=100)  # ...the oldest was let go
    assert index.reads == 6
    big = FakeIndex({"big": _rows(rng, 20, 5, "b")})  # 100 rows > 50
    got, complete = cache.best(big, "big", q, depth=7)
    assert big.dense_calls == 1 and 0 < len(got) <= 7 and not complete
    top = sorted(_brute(big.by_scope["big"], q).items(), key=lambda kv: -kv[1])[0]
    assert abs(got[top[0]] - top[1]) < 1e-6  # the best session is among the nearest windows
    cache.best(big, "big", q, depth=7)
    assert big.dense_calls == 2  # never kept


def test_no_windows_table_means_no_window_scores() -> None:
    class NoTable(FakeIndex):
        def table_version(self, name: str) -> int | None:
            return None

    assert WindowVectors().best(NoTable({}), None, np.ones(8, dtype=np.float32), depth=10) == ({}, True)
