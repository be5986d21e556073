"""The evaluators' shared workspace: an embedding cache folder, a kept or temporary home,
a cached embedder and a service over it, and the ingest-then-index step.

``eval longmemeval`` and ``eval realtalk`` / ``eval conversations`` differ in what they
read and how they score; everything around that is here once.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memviewer.eval.embed_cache import CachedEmbedder
    from memviewer.index.embedder import Embedder
    from memviewer.service import MemoryService


def model_embedder(model_dir: str | Path | None) -> Embedder:
    """The packaged ONNX model an evaluation embeds with (``eval`` commands build it here)."""
    from memviewer.index.embedder import OnnxEmbedder

    return OnnxEmbedder(model_dir)


@dataclass
class Workspace:
    service: MemoryService
    cache: CachedEmbedder
    model: str
    ingest_s: float = 0.0
    index_s: float = 0.0

    def ingest(
        self, scope: str, todo_of: Callable[[set[str]], Sequence[Any]], ingest: Callable[[Any], object]
    ) -> None:
        """Ingest what the home does not hold yet (``todo_of(scope ids present)``), then
        bring the vector index up to date; timings go to ``ingest_s`` / ``index_s``."""
        t0 = time.perf_counter()
        have = {s["scope_id"] for s in self.service.sessions(scope=scope)["sessions"]}
        todo = todo_of(have)
        if todo:
            ingest(todo)
        self.ingest_s = time.perf_counter() - t0
        self.service.sync_index()
        self.cache.save()
        self.index_s = time.perf_counter() - t0 - self.ingest_s

    def meta(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "ingest_s": round(self.ingest_s, 1),
            "index_s": round(self.index_s, 1),
            "embed_cache": {"hits": self.cache.hits, "misses": self.cache.misses},
        }


@contextmanager
def eval_workspace(
    home: str | Path | None,
    cache_dir: str | Path | None,
    embedder: Embedder | None,
    *,
    check_home: Callable[[Path], None],
) -> Iterator[Workspace]:
    """A service over ``home`` (checked by ``check_home``; a temporary folder, removed
    afterwards, when None) with the embeddings cached in ``cache_dir``."""
    from memviewer.config import load_settings
    from memviewer.eval.embed_cache import CachedEmbedder
    from memviewer.index.embedder import OnnxEmbedder
    from memviewer.service import MemoryService

    folder = Path(cache_dir or Path(tempfile.gettempdir()) / "memviewer-eval-cache")
    try:  # now, not when the cache is first saved after the whole ingest
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(
            f"cannot use {folder} as the embedding cache folder: {exc.strerror or exc}"
        ) from None
    if home is not None:
        check_home(Path(home))
    tmp = tempfile.mkdtemp(prefix="memviewer-eval-") if home is None else None
    settings = load_settings(env={}, home=str(home or tmp), retention="keep_all")
    inner = embedder or OnnxEmbedder(settings.model_dir)
    cache = CachedEmbedder(inner, folder)
    service = MemoryService(settings, embedder=cache)
    try:
        yield Workspace(service, cache, inner.name)
    finally:
        cache.save()  # the query embeddings too
        service.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
