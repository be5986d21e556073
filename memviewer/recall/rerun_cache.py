"""What recall runs of one question share: LanceDB reads, Stage 2, Stage 1.

A why-not search (``recall/why.py``) re-runs one query up to ``MAX_RERUNS`` times with other
K, M, top_k or weights. Most of a run's cost is the same from one re-run to the next, so a
``RerunCache`` handed to ``recall(..., cache=...)`` keeps, for the life of one search:

* every LanceDB read (dense, full-text, row and count reads), keyed by its arguments: weights
  never change what the index returns, only how it is blended;
* Stage 2's scored candidates, keyed by everything that goes into them (the searched text and
  its vector, the scope and ``as_of`` filter, the fetch depth, weights, tuning, time window,
  aliases); a run cuts its own ``n`` off the shared list, as an independent run would;
* Stage 1's session ranking, keyed by the same and by the candidates it was given (their ids,
  sessions, scores and authorship, which is all Stage 1 reads of them) and its own depth.

So a re-run that changes only ``top_k`` re-does only the post-filter and hydration, one
that changes M within the same fetch depth re-does Stage 1's arithmetic over cached reads.
The results are those of independent runs (``tests/test_recall_why_cache.py`` checks it);
one cache also reads one snapshot of an index a hub may be writing meanwhile. It is
deliberately short-lived: never kept across questions or user actions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from memviewer.index.lance import LanceIndex


def _copy_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [dict(r) for r in rows]


def copy_candidates(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fresh candidate dicts (and breakdowns) over the shared ones: later steps may rescore."""
    return [{**r, "score_breakdown": dict(r["score_breakdown"])} for r in rows]


class SharedReads:
    """A ``LanceIndex`` whose reads are answered once per argument set; anything else is the
    index's own. Rows come back as copies, so a caller's edits never reach the cache."""

    def __init__(self, index: LanceIndex, stats: Counter[str]) -> None:
        self._index = index
        self._memo: dict[tuple[Any, ...], Any] = {}
        self._stats = stats
        self._refreshed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)

    def _get(self, key: tuple[Any, ...], read: Callable[[], Any]) -> Any:
        if key in self._memo:
            self._stats["reads_shared"] += 1
        else:
            self._stats["reads"] += 1
            self._memo[key] = read()
        return self._memo[key]

    def refresh(self) -> None:
        """One snapshot for the whole search: refreshed before the first run only."""
        if not self._refreshed:
            self._refreshed = True
            self._index.refresh()

    def check_model(self, name: str, dim: int) -> None:
        key = ("check_model", name, dim)
        if key not in self._memo:
            self._index.check_model(name, dim)  # raises on a mismatch: never remembered
            self._memo[key] = True

    def has_vector_index(self) -> bool:
        return bool(self._get(("ann",), self._index.has_vector_index))

    def table_version(self, name: str) -> int | None:
        value = self._get(("version", name), lambda: self._index.table_version(name))
        return None if value is None else int(value)

    def count(self, name: str, where: str | None = None) -> int:
        return int(self._get(("count", name, where), lambda: self._index.count(name, where)))

    def rows(self, name: str, where: str | None, columns: Sequence[str]) -> list[dict[str, Any]]:
        key = ("rows", name, where, tuple(columns))
        return _copy_rows(self._get(key, lambda: self._index.rows(name, where, columns)))

    def dense(
        self,
        name: str,
        vector: np.ndarray,
        where: str | None,
        limit: int,
        columns: Sequence[str],
        *,
        use_ann: bool = False,
    ) -> list[dict[str, Any]]:
        key = ("dense", name, vector_key(vector), where, limit, tuple(columns), use_ann)
        return _copy_rows(
            self._get(key, lambda: self._index.dense(name, vector, where, limit, columns, use_ann=use_ann))
        )

    def fulltext(
        self, name: str, query: str, where: str | None, limit: int, columns: Sequence[str]
    ) -> list[dict[str, Any]]:
        key = ("fulltext", name, query, where, limit, tuple(columns))
        return _copy_rows(self._get(key, lambda: self._index.fulltext(name, query, where, limit, columns)))


def vector_key(vector: Any) -> bytes:
    import numpy as np

    return np.asarray(vector, dtype=np.float32).tobytes()


class RerunCache:
    """Shared reads and stage results for the recall runs of one question (see the module)."""

    def __init__(self) -> None:
        self.stats: Counter[str] = Counter()
        self._reads: SharedReads | None = None
        self._read_of: int | None = None
        self._stage2: dict[str, list[dict[str, Any]]] = {}
        self._stage1: dict[str, list[dict[str, Any]]] = {}

    def index(self, index: LanceIndex) -> LanceIndex:
        """``index`` with shared reads (one view per cache; another index gets a fresh one)."""
        if self._reads is None or self._read_of != id(index):
            self._reads, self._read_of = SharedReads(index, self.stats), id(index)
        from typing import cast

        return cast("LanceIndex", self._reads)

    def stage2(self, key: str, compute: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """Stage 2's whole scored list for ``key`` (the caller cuts and copies it)."""
        if key in self._stage2:
            self.stats["stage2_shared"] += 1
        else:
            self.stats["stage2"] += 1
            self._stage2[key] = compute()
        return self._stage2[key]

    def stage1(self, key: str, compute: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """Stage 1's whole ranked session list for ``key`` (the caller cuts it to K)."""
        if key in self._stage1:
            self.stats["stage1_shared"] += 1
        else:
            self.stats["stage1"] += 1
            self._stage1[key] = compute()
        return self._stage1[key]


def candidates_key(candidates: Sequence[dict[str, Any]]) -> tuple[Any, ...]:
    """What Stage 1 reads of its candidates: order, sessions, scores, authorship, emptiness."""
    return tuple(
        (c["turn_id"], c["session_id"], c["score"], bool(c.get("_authored")), bool(str(c["text"]).strip()))
        for c in candidates
    )
