"""The package's layers, read from the code's own imports (lazy ones included, only
``if TYPE_CHECKING:`` blocks left out): no import circles between modules, and no
import that runs back up a layer. Imports made only for type checking may cross layers
(a type names what it needs) but still close no circle. docs/architecture.md draws the
same table."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "memviewer"

# Lower numbers sit lower; a module may import its own layer and the layers below.
LAYERS: dict[str, int] = {
    "memviewer": 0,  # the package face (__version__)
    "memviewer.errors": 0,
    "memviewer.ids": 0,
    "memviewer.paths": 0,
    "memviewer.locks": 0,
    "memviewer.logctx": 0,
    "memviewer.timeutil": 0,
    "memviewer.jsonvalues": 0,
    "memviewer.params": 0,
    "memviewer.contract": 0,  # the request models: search and recall parameters, declared once
    "memviewer.recall_log": 0,
    "memviewer.words": 0,
    "memviewer.generated": 0,  # writes or checks a generated file (the CLI reference, the CLI table)
    "memviewer.tool_call_text": 0,  # a tool call on one line (recall rows, tail, Live)
    "memviewer.access": 0,  # the HTTP listeners' token (standard library only)
    "memviewer.ops": 0,  # the publish ops and their arguments, declared once (standard library only)
    "memviewer.events": 0,  # the event log's record and kinds (the store writes them, front ends show them)
    "memviewer.present": 0,  # what front ends show alike: snippets, highlighting, why-not and lag wording
    "memviewer.config": 1,
    "memviewer.root_config": 1,  # the CLI root's home and socket, standard library only
    "memviewer.llm": 1,
    "memviewer.context": 1,
    "memviewer.store": 2,
    "memviewer.index": 3,
    "memviewer.session": 3,
    "memviewer.recall": 4,
    "memviewer.wire": 4,
    "memviewer.client": 4,  # the publisher's public face (stdlib only)
    "memviewer.publisher": 4,  # the publisher's parts: commands, queue, spooler, sender, orphans
    "memviewer.demo": 4,
    "memviewer.io": 5,
    "memviewer.sources": 5,
    "memviewer.praisonai": 5,  # PraisonAI: file format, import, export, the folder watcher
    "memviewer.doctor": 6,
    "memviewer.service": 6,
    "memviewer.api": 7,
    "memviewer.eval": 8,
    "memviewer.mcp": 8,
    "memviewer.commands": 8,
    "memviewer.tui": 9,
    "memviewer.cli": 10,
    "memviewer.cli_reference": 10,  # writes docs/cli-reference.md from the click app
    "memviewer.cli_tables": 10,  # writes contract/cli_table.py from the request models and Settings
    "memviewer.__main__": 10,  # `python -m memviewer` runs the entry point
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> int:
    best = ""
    for prefix in LAYERS:
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
            best = prefix
    if not best:
        raise AssertionError(f"{module} belongs to no layer: add it to LAYERS and docs/architecture.md")
    return LAYERS[best]


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, modules: set[str], *, type_only: bool = False) -> set[str]:
    """The package modules ``path`` imports; with ``type_only`` also those it imports only
    under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_only:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("memviewer"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")
                parent = parent[: len(parent) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            if base.startswith("memviewer"):
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    found.add(sub if sub in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(me)
    return {m for m in found if m in modules}


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in files}
    return {_module_name(p): _imports(p, modules) for p in files}


def test_every_module_has_a_layer(graph: dict[str, set[str]]) -> None:
    for module in graph:
        _layer(module)


def test_no_import_runs_back_up_a_layer(graph: dict[str, set[str]]) -> None:
    upward = sorted(
        f"{src} (layer {_layer(src)}) -> {dst} (layer {_layer(dst)})"
        for src, targets in graph.items()
        for dst in targets
        if _layer(dst) > _layer(src) and dst != "memviewer"
    )
    assert upward == []


@pytest.fixture(scope="module")
def typed_graph() -> dict[str, set[str]]:
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in files}
    return {_module_name(p): _imports(p, modules, type_only=True) for p in files}


def test_no_import_circles(graph: dict[str, set[str]]) -> None:
    assert _circles(graph) == []


def test_no_import_circles_through_type_only_imports(typed_graph: dict[str, set[str]]) -> None:
    """A screen typed against the app that composes it is still a circle a reader must
    untangle: screens name ``tui.viewer_app.ViewerApp``, never ``tui.app``."""
    assert _circles(typed_graph) == []


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    # Tarjan's strongly connected components; a component of two or more is a circle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = [0]

    def strongconnect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in graph:
        if v not in index:
            strongconnect(v)
    return circles


def test_the_checker_sees_a_circle(tmp_path: Path) -> None:
    """The graph reader itself: a lazy import inside a function counts, TYPE_CHECKING does not."""
    pkg = tmp_path / "memviewer"
    pkg.mkdir()
    (pkg / "a.py").write_text("def f():\n    from memviewer import b\n", encoding="utf-8")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from memviewer import a\n",
        encoding="utf-8",
    )
    global PACKAGE
    saved, PACKAGE = PACKAGE, pkg
    try:
        modules = {"memviewer.a", "memviewer.b"}
        assert _imports(pkg / "a.py", modules) == {"memviewer.b"}
        assert _imports(pkg / "b.py", modules) == set()
        assert _imports(pkg / "b.py", modules, type_only=True) == {"memviewer.a"}
        assert _circles({m: _imports(pkg / f"{m[10:]}.py", modules, type_only=True) for m in modules})
    finally:
        PACKAGE = saved
