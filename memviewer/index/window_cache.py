"""Each scope's chat-window vectors kept in memory, for Stage 1 of hierarchical recall.

One LanceDB query costs ~10-18 ms on this machine whatever the table's size (measured on the
REALTALK home: a dense query over 214 windows 18 ms, reading them 21 ms), while the dot
product of a query with a scope's windows takes microseconds. So a scope's windows are read
once and kept while the windows table's version is unchanged (any write makes a new version:
a new summary, a deleted session). The memory is bounded by ``max_rows`` vectors in all (384
floats each: 50,000 rows are ~75 MB), least recently used scope first out; a scope larger than
that is answered by a nearest-windows query every time (``depth`` of them).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from memviewer.index.lance import LanceIndex

MAX_ROWS = 50_000


class _Scope:
    __slots__ = ("version", "sessions", "starts", "vectors")

    def __init__(self, version: int, sessions: list[str], starts: np.ndarray, vectors: np.ndarray) -> None:
        self.version = version
        self.sessions = sessions  # one per run of rows (rows sorted by session)
        self.starts = starts  # where each session's run begins
        self.vectors = vectors


class WindowVectors:
    """``best(index, where, qvec, depth)``: each session's best window cosine in a scope, and
    whether every window of the scope was scored (False for a scope too big to keep)."""

    def __init__(self, max_rows: int = MAX_ROWS) -> None:
        self.max_rows = max_rows
        self._scopes: OrderedDict[str | None, _Scope] = OrderedDict()
        self._rows = 0
        self._lock = threading.Lock()

    def best(
        self, index: LanceIndex, where: str | None, qvec: np.ndarray, depth: int
    ) -> tuple[dict[str, float], bool]:
        """``({session: cosine of its best window, floored at 0}, complete)`` for the sessions
        of ``where`` that have windows (none on a home indexed before windows existed);
        ``complete``: every session with windows is in it."""
        import numpy as np

        from memviewer.index.lance import WINDOWS

        version = index.table_version(WINDOWS)
        if version is None:
            return {}, True
        scope = self._get(where, version)
        if scope is None:
            rows = index.rows(WINDOWS, where, ("session_id", "vector"))
            if len(rows) > self.max_rows:  # too big to keep: the nearest windows, every time
                out: dict[str, float] = {}
                for r in index.dense(WINDOWS, qvec, where, depth, ("session_id",)):
                    sim = max(0.0, 1.0 - float(r["_distance"]))
                    out[r["session_id"]] = max(out.get(r["session_id"], 0.0), sim)
                return out, False
            if not rows:
                return {}, True
            rows.sort(key=lambda r: r["session_id"])
            ids = [r["session_id"] for r in rows]
            starts = [i for i in range(len(ids)) if i == 0 or ids[i] != ids[i - 1]]
            scope = _Scope(
                version,
                [ids[i] for i in starts],
                np.asarray(starts, dtype=np.int64),
                np.asarray([r["vector"] for r in rows], dtype=np.float32),
            )
            self._put(where, scope)
        sims = np.maximum.reduceat(scope.vectors @ np.asarray(qvec, dtype=np.float32), scope.starts)
        return {sid: max(0.0, float(s)) for sid, s in zip(scope.sessions, sims, strict=True)}, True

    def _get(self, where: str | None, version: int) -> _Scope | None:
        with self._lock:
            scope = self._scopes.get(where)
            if scope is None:
                return None
            if scope.version != version:
                self._drop(where)
                return None
            self._scopes.move_to_end(where)
            return scope

    def _put(self, where: str | None, scope: _Scope) -> None:
        with self._lock:
            if where in self._scopes:
                self._drop(where)
            self._scopes[where] = scope
            self._rows += len(scope.vectors)
            while self._rows > self.max_rows and len(self._scopes) > 1:
                self._drop(next(iter(self._scopes)))

    def _drop(self, where: str | None) -> None:
        self._rows -= len(self._scopes.pop(where).vectors)
