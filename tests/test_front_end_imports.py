"""Front ends read and write memory through ``memviewer.api`` (``Reader``, ``Inspector``,
``Writer``) and show it with ``memviewer.present``: no module of ``commands/``, ``tui/``,
``mcp/``, ``eval/`` or ``cli.py`` imports ``memviewer.recall``, ``memviewer.store`` or
``memviewer.index`` (at the top or inside a function; ``if TYPE_CHECKING:`` blocks name types
and are left out), but the few listed in ``ALLOWED`` with the reason."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "memviewer"
FRONT_ENDS = ("commands", "tui", "mcp", "eval", "cli.py")
INTERNALS = ("memviewer.recall", "memviewer.store", "memviewer.index")

#: module -> (what it may import, why). Keep it short: a read a front end needs goes in the API.
ALLOWED: dict[str, tuple[set[str], str]] = {
    "commands/background_index.py": (
        {"memviewer.index.progress"},
        "is `reindex --catch-up` itself: the catch-up's pid file is the index's",
    ),
    "commands/hub.py": ({"memviewer.index.indexer"}, "`serve` builds the hub: it exits past a busy indexer"),
    "tui/app.py": ({"memviewer.index.indexer"}, "the viewer hosts a hub: it exits past a busy indexer"),
    # The evaluators are harnesses over a throw-away home: their baselines read the vector
    # table, their workspace builds the model, golden sets are tables of their own.
    "eval/conversations.py": ({"memviewer.index.lance"}, "the BM25/cosine baselines read the vector table"),
    "eval/longmemeval.py": (
        {"memviewer.index.lance", "memviewer.store.home_probe"},
        "its baselines read the vector table; --keep-home looks at the kept home",
    ),
    "eval/workspace.py": ({"memviewer.index.embedder"}, "builds the model an evaluation embeds with"),
    "eval/golden.py": ({"memviewer.store"}, "golden sets are store tables of their own, not memory"),
}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def internal_imports(source: str) -> set[str]:
    """The recall/store/index modules ``source`` imports, lazily or not (not for typing only)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = (
                [node.module] if node.module != "memviewer" else [f"memviewer.{a.name}" for a in node.names]
            )
        found.update(n for n in names if any(n == i or n.startswith(i + ".") for i in INTERNALS))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(source))
    return found


def _front_end_files() -> list[Path]:
    out: list[Path] = []
    for name in FRONT_ENDS:
        path = PACKAGE / name
        out += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return out


def test_front_ends_import_no_recall_store_or_index_internals() -> None:
    offending: dict[str, set[str]] = {}
    for path in _front_end_files():
        rel = path.relative_to(PACKAGE).as_posix()
        found = internal_imports(path.read_text(encoding="utf-8"))
        allowed = ALLOWED.get(rel, (set(), ""))[0]
        extra = {m for m in found if m not in allowed}
        if extra:
            offending[rel] = extra
    assert offending == {}


def test_the_allowed_list_is_still_needed() -> None:
    """An entry whose imports are gone is taken out of ``ALLOWED``, so the list stays short."""
    stale = []
    for rel, (allowed, _why) in ALLOWED.items():
        found = internal_imports((PACKAGE / rel).read_text(encoding="utf-8"))
        stale += [f"{rel}: {m}" for m in sorted(allowed - found)]
    assert stale == []


def test_the_walker_sees_lazy_imports_and_skips_type_checking() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "import memviewer.index.lance\n"
        "from memviewer import store\n"
        "from memviewer.recall_log import RecordAs\n"
        "if TYPE_CHECKING:\n    from memviewer.store.db import Store\n"
        "def f():\n    from memviewer.recall.why import why_not\n"
    )
    assert internal_imports(source) == {"memviewer.index.lance", "memviewer.store", "memviewer.recall.why"}
