"""All SQL lives in ``memviewer/store/``: recall (keyword search, hierarchical recall) builds
no statements of its own, neither as SQL text nor with SQLAlchemy's query builders."""

from __future__ import annotations

import ast
import re
from pathlib import Path

RECALL = Path(__file__).resolve().parents[1] / "memviewer" / "recall"
SQL_TEXT = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|PRAGMA|BEGIN|ROLLBACK)\b", re.I)
BUILDERS = {"select", "insert", "update", "delete", "text", "exists", "case", "and_", "or_", "func"}


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL_TEXT.match(node.value):
            out.append(f"{path.name}:{node.lineno}: SQL text {node.value[:40]!r}")
        elif isinstance(node, ast.JoinedStr):
            head = next((v.value for v in node.values if isinstance(v, ast.Constant)), "")
            if isinstance(head, str) and SQL_TEXT.match(head):
                out.append(f"{path.name}:{node.lineno}: SQL f-string {head[:40]!r}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sqlalchemy"):
            used = {a.name for a in node.names} & BUILDERS
            if used:
                out.append(f"{path.name}:{node.lineno}: imports query builders {sorted(used)}")
    return out


def test_recall_holds_no_sql() -> None:
    files = sorted(RECALL.glob("*.py"))
    assert any(f.name == "keyword.py" for f in files)
    offences = [o for f in files for o in _offences(f)]
    assert offences == []


def test_the_check_sees_sql(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        'from sqlalchemy import select\nQ = "SELECT 1 FROM turns"\nR = f"UPDATE {1} SET x = 1"\n',
        encoding="utf-8",
    )
    assert {o.split(":")[1] for o in _offences(sample)} == {"1", "2", "3"}
