"""An on-disk embedding cache keyed by ``sha256(model name, text)``.

Evaluation runs embed the same ~50k LongMemEval turns again and again while
scoring choices are tuned; re-running the model every time would make each
iteration take minutes. The cache wraps any ``Embedder`` and is only used by
the evaluation and benchmarks, never by the live indexer.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


def text_key(model: str, text: str) -> str:
    return hashlib.sha256(f"{model}\x00{text}".encode()).hexdigest()[:32]


class CachedEmbedder:
    """Delegates to ``inner`` for texts it has not seen; persists with ``save()``.

    Storage is one ``.npz`` per model (keys + matrix), loaded fully in memory:
    50k × 384 float32 is ~75 MB, small next to the time it saves.
    """

    def __init__(self, inner: Any, folder: str | Path) -> None:
        self.inner = inner
        self.folder = Path(folder)
        self.name = inner.name
        self._lock = threading.Lock()
        self._rows: dict[str, np.ndarray] = {}
        self._dirty = False
        self.hits = 0
        self.misses = 0
        self._load()

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    @property
    def path(self) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.name)
        return self.folder / f"embeddings-{safe}.npz"

    def _load(self) -> None:
        import numpy as np

        if not self.path.is_file():
            return
        with np.load(self.path, allow_pickle=False) as data:
            keys, matrix = data["keys"], data["vectors"]
        self._rows = {str(k): matrix[i] for i, k in enumerate(keys)}

    def save(self) -> None:
        import numpy as np

        with self._lock:
            if not self._dirty:
                return
            self.folder.mkdir(parents=True, exist_ok=True)
            keys = np.array(list(self._rows.keys()))
            matrix = (
                np.stack(list(self._rows.values())).astype(np.float32)
                if self._rows
                else np.zeros((0, self.dim), np.float32)
            )
            tmp = self.path.with_suffix(".tmp.npz")
            np.savez(tmp, keys=keys, vectors=matrix)
            tmp.replace(self.path)
            self._dirty = False

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        keys = [text_key(self.name, t) for t in texts]
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in self._rows}.items())
        if missing:
            vectors = self.inner.embed([t for _, t in missing])
            with self._lock:
                for (k, _), v in zip(missing, vectors, strict=True):
                    self._rows[k] = np.asarray(v, dtype=np.float32)
                self._dirty = True
        self.misses += len(missing)
        self.hits += len(keys) - len(missing)
        if not keys:
            return np.zeros((0, self.dim), np.float32)
        return np.stack([self._rows[k] for k in keys]).astype(np.float32, copy=False)
