"""``IndexParts``: the store, settings and the lazily opened heavy pieces (embedder,
LanceDB index, summarizer) that the indexer and recall share.

One small typed object instead of the whole service passed down as ``Any``: a layer
below the service says exactly what it uses, and a test can build one over a store
without a ``MemoryService``. Opening is lazy because onnxruntime and LanceDB cost
seconds to import; a caller that only lists sessions never pays for them.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from memviewer import paths

if TYPE_CHECKING:
    from memviewer.config import Settings
    from memviewer.index.embedder import Embedder
    from memviewer.index.lance import LanceIndex
    from memviewer.index.summarizer import Summarizer
    from memviewer.index.window_cache import WindowVectors
    from memviewer.llm import LlmEndpoint
    from memviewer.store.authors import ScopeAuthors
    from memviewer.store.db import Store


class IndexParts:
    """What the derived index is built from and read with, for one home."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        readonly: bool = False,
        embedder: Embedder | None = None,
        home: Path | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.readonly = readonly
        self.home = home if home is not None else settings.home_path
        self._embedder = embedder
        self._lance: LanceIndex | None = None
        self._summarizer: Summarizer | None = None
        self._lock = threading.Lock()
        from memviewer.index.window_cache import WindowVectors
        from memviewer.store.authors import ScopeAuthors  # this module stays import-light

        #: Each scope's turn authors, for recall to know a chat's names before it searches.
        self.authors: ScopeAuthors = ScopeAuthors(store)
        #: Each scope's chat-window vectors, for Stage 1 (index/window_cache.py).
        self.windows: WindowVectors = WindowVectors()

    def with_embedder(self, embedder: Embedder) -> IndexParts:
        """The same parts (one store, one LanceDB handle) with another embedder, e.g. one
        that caches the query's vector across the re-runs of a why-not search."""
        other = IndexParts(
            self.store, self.settings, readonly=self.readonly, embedder=embedder, home=self.home
        )
        other._lance, other._summarizer = self.lance, self._summarizer
        other.authors = self.authors
        other.windows = self.windows
        return other

    @property
    def embedder(self) -> Embedder:
        """The configured ONNX embedder (or the one given, e.g. a test's ``HashEmbedder``)."""
        with self._lock:
            if self._embedder is None:
                from memviewer.index.embedder import OnnxEmbedder

                self._embedder = OnnxEmbedder(
                    self.settings.model_dir,
                    threads=self.settings.embed_threads or None,
                    batch_size=self.settings.embed_batch,
                )
            return self._embedder

    @property
    def lance(self) -> LanceIndex:
        """The one ``LanceIndex`` of this home, shared by the indexer and recall."""
        with self._lock:
            if self._lance is None:
                from memviewer.index.lance import LanceIndex

                self._lance = LanceIndex(paths.lance_dir(self.home), readonly=self.readonly)
            return self._lance

    @property
    def summarizer(self) -> Summarizer:
        with self._lock:
            if self._summarizer is None:
                from memviewer.index.summarizer import Summarizer

                endpoint = self.llm_endpoint() if self.settings.summary_llm else None
                self._summarizer = Summarizer(endpoint, paths.cache_dir(self.home) / "summaries")
            return self._summarizer

    def llm_endpoint(self) -> LlmEndpoint | None:
        """The OpenAI-compatible endpoint when one is configured, else None (no network)."""
        s = self.settings
        if not (s.llm_base_url and s.llm_model):
            return None
        from memviewer.llm import LlmEndpoint

        return LlmEndpoint(
            base_url=s.llm_base_url,
            model=s.llm_model,
            timeout=s.llm_timeout,
            api_key=s.llm_api_key.get_secret_value() if s.llm_api_key else None,
        )
