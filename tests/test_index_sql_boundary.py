"""The indexer's SQL lives in ``memviewer/store/`` (``store/indexing.py``,
``store/index_progress.py``): no module of ``memviewer/index/`` imports a SQL library or
runs a SQL statement itself, so a change of schema touches the store alone."""

from __future__ import annotations

import ast
from pathlib import Path

INDEX = Path(__file__).resolve().parents[1] / "memviewer" / "index"
SQL_LIBRARIES = {"sqlalchemy", "sqlmodel", "sqlite3"}


def _sql_uses(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            names = []
        found += [f"{path.name}:{node.lineno} imports {n}" for n in names if n.split(".")[0] in SQL_LIBRARIES]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "execute"
            and not (isinstance(node.func.value, ast.Call) and _is_merge_insert(node.func.value))
        ):
            found.append(f"{path.name}:{node.lineno} calls .execute(")
    return found


def _is_merge_insert(call: ast.Call) -> bool:
    """LanceDB's ``table.merge_insert(key)...execute(rows)`` chain is not SQL."""
    node: ast.AST = call
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "merge_insert":
            return True
        node = node.func.value
    return False


def test_no_module_of_the_index_package_runs_sql() -> None:
    uses = [use for path in sorted(INDEX.glob("*.py")) for use in _sql_uses(path)]
    assert uses == []


def test_the_checker_sees_sql(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from sqlalchemy import select\nimport sqlite3\n"
        "def f(conn, t):\n    conn.execute(select(1))\n"
        "    t.merge_insert('k').when_matched_update_all().execute([])\n",
        encoding="utf-8",
    )
    assert [u.split(" ", 1)[1] for u in _sql_uses(bad)] == [
        "imports sqlalchemy",
        "imports sqlite3",
        "calls .execute(",
    ]
