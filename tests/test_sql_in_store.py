"""All SQL lives in ``memviewer/store/`` (docs/architecture.md, "Layers and where they live").

Every module of the package outside ``memviewer/store/`` is read with ``ast`` (lazy imports and
``if TYPE_CHECKING:`` blocks included: a type import of SQLAlchemy is a dependency too) and fails
on: an import of a database library (SQLAlchemy, SQLModel, sqlite3, psycopg), an import of the
``text`` construct, an import of the table definitions (``memviewer.store.tables``) or a
``__table__`` reference (both are only there to build statements), a statement run on a connection
(``.execute(``, ``.exec(``, ``.exec_driver_sql(`` …), and SQL written out in a string. A module that
needs a connection's type imports ``memviewer.store.db.Connection``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "memviewer"

STORE = "memviewer/store/"
# SQL in these files is text, not statements memviewer runs: the demo's scripted agent reads
# a file holding `conn.execute(INSERT, row)` and runs a `SELECT count(*) FROM invoices` tool
# call (memviewer/demo/scripts.py), so only the SQL-in-a-string check skips them.
_SQL_AS_DEMO_TEXT = ("memviewer/demo/scripts.py",)

DATABASE_LIBRARIES = frozenset({"sqlalchemy", "sqlmodel", "sqlite3", "psycopg", "psycopg2"})
STATEMENT_METHODS = frozenset({"execute", "executemany", "executescript", "exec", "exec_driver_sql"})
# SQL's shapes, upper case as this code base writes them (prose says "select a session").
SQL = re.compile(
    r"\bSELECT\b.*\bFROM\b|\bINSERT\s+INTO\b|\bDELETE\s+FROM\b|\bUPDATE\s+\w+\s+SET\b|\bPRAGMA\s+\w"
    r"|\bCREATE\s+(?:TABLE|INDEX|TRIGGER|VIRTUAL)\b|\bDROP\s+(?:TABLE|INDEX|TRIGGER)\b",
    re.DOTALL,
)
TRANSACTION = re.compile(r"^\s*(?:BEGIN|COMMIT|ROLLBACK|SAVEPOINT)\b(?:\s+\w+)?\s*;?\s*$")
TABLES = "memviewer.store.tables"


def _forbidden_module(name: str) -> bool:
    return name.split(".")[0] in DATABASE_LIBRARIES or name == TABLES


def _lance_builder(node: ast.AST) -> bool:
    """``table.merge_insert(key)….execute(rows)``: LanceDB's upsert builder, not SQL."""
    while isinstance(node, ast.Call | ast.Attribute):
        if isinstance(node, ast.Attribute) and node.attr == "merge_insert":
            return True
        node = node.func if isinstance(node, ast.Call) else node.value
    return False


def _outside_store() -> list[Path]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(STORE):
            continue
        out.append(path)
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes (prose may quote SQL)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _string(node: ast.AST) -> str | None:
    """A string literal's text; an f-string's with ``x`` for each value put in."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "x" for v in node.values)
    return None


def sql_outside_store(rel: str, source: str) -> list[str]:
    """What the module at ``rel`` (holding ``source``) does with the database itself, one
    ``path:line: what`` per finding."""
    tree = ast.parse(source, filename=rel)
    docs = _docstrings(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        where = f"{rel}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            found += [f"{where}: import {a.name}" for a in node.names if _forbidden_module(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            top = node.module.split(".")[0]
            names = {a.name for a in node.names}
            if top in DATABASE_LIBRARIES:
                found.append(f"{where}: from {node.module} import {', '.join(sorted(names))}")
            elif "text" in names:
                found.append(f"{where}: from {node.module} import text")
            elif node.module == TABLES or (node.module == "memviewer.store" and "tables" in names):
                found.append(f"{where}: imports the table definitions")
        elif isinstance(node, ast.Attribute) and node.attr == "__table__":
            found.append(f"{where}: .__table__")
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in STATEMENT_METHODS and not _lance_builder(f.value):
                found.append(f"{where}: .{f.attr}(…)")
            elif (
                isinstance(f, ast.Name)
                and f.id in ("__import__", "import_module")
                or isinstance(f, ast.Attribute)
                and f.attr == "import_module"
            ):
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Constant) and str(arg.value).split(".")[0] in DATABASE_LIBRARIES:
                    found.append(f"{where}: imports {arg.value}")
        elif rel not in _SQL_AS_DEMO_TEXT and id(node) not in docs and (string := _string(node)) is not None:
            if SQL.search(string) or TRANSACTION.match(string):
                found.append(f"{where}: SQL in a string: {string[:60]!r}")
    return list(dict.fromkeys(found))  # an f-string's parts are strings too: report once


def test_no_sql_outside_store() -> None:
    found = [
        f
        for path in _outside_store()
        for f in sql_outside_store(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"))
    ]
    assert not found, "SQL belongs in memviewer/store/ (a typed function there):\n" + "\n".join(found)


def test_exemptions_name_real_files() -> None:
    """An exemption that names nothing left would hide nothing and should go."""
    for rel in _SQL_AS_DEMO_TEXT:
        assert (ROOT / rel).exists(), rel


@pytest.mark.parametrize(
    "source",
    [
        "import sqlite3\n",
        "from sqlalchemy import select\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sqlmodel import Session\n",
        "def f():\n    from sqlalchemy.engine import make_url\n",
        "import psycopg\n",
        "import memviewer.store.tables\n",
        "from memviewer.store import tables\n",
        "from memviewer.store.db import text\n",
        "from memviewer.store.tables import Turn\n",
        "T = repos.Turn.__table__\n",
        "def f(conn):\n    conn.execute(q)\n",
        "def f(conn):\n    conn.exec_driver_sql('BEGIN')\n",
        "Q = 'SELECT COUNT(*) FROM turns'\n",
        "Q = f'PRAGMA {name}'\n",
        "Q = 'BEGIN IMMEDIATE'\n",
        "Q = f'UPDATE {table} SET x = 1'\n",
        "import importlib\nimportlib.import_module('sqlite3')\n",
    ],
)
def test_the_check_sees(source: str) -> None:
    """Each shape the check names is found (so a pass above means something)."""
    assert sql_outside_store("memviewer/probe.py", source), source


@pytest.mark.parametrize(
    "source",
    [
        'def f():\n    """Select the newest session FROM the list; SELECT … FROM in prose."""\n',
        "from memviewer.store.db import Connection, Store\n",
        "x = 'select a session from the list'\n",
        "ok = session.get('id')\n",
        "from textual.widgets import Static\n",
        "def f(t, rows):\n    t.merge_insert('turn_id').when_matched_update_all().execute(rows)\n",
    ],
)
def test_the_check_passes(source: str) -> None:
    assert not sql_outside_store("memviewer/probe.py", source), source
