"""``recall --why``, ``recall --vs``, ``golden`` and ``eval golden`` through the CLI with the
real ONNX model, a real store and a real LanceDB index."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from why_data import QUERY, build

from memviewer.cli import cli
from memviewer.commands.common import short

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    from memviewer.config import load_settings
    from memviewer.service import MemoryService

    folder = tmp_path_factory.mktemp("why-cli") / "home"
    settings = load_settings(None, env={}, home=str(folder))
    with MemoryService(settings) as svc:  # the real model
        turns = build(svc)["turns"]
    return folder, turns


def run(home: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--home", str(home), *args])
    return result.exit_code, result.output


def test_why_json_contract_and_verified_fix(home: tuple[Path, dict[str, Any]]) -> None:
    folder, turns = home
    target = turns["garden"][-1]
    args = ["recall", QUERY, "--scope", "user", "--scope-id", "u1", "--top-sessions", "1"]
    code, out = run(folder, *args, "--chunks-per-session", "1", "--why", target, "--json")
    assert code == 0, out
    data = json.loads(out)
    why = data["why"]
    assert {"turn_id", "retrieved", "rank", "eliminated_at", "stages", "fix"} <= set(why)
    assert why["turn_id"] == target and why["retrieved"] is False
    assert why["eliminated_at"] in ("stage1", "post_filter", "pool")
    assert [s["stage"] for s in why["stages"]] == [
        "index", "stage1", "pool", "post_filter", "session_cap", "rerank", "top_k"
    ]  # fmt: skip
    assert set(data) == {"query", "scope", "scope_id", "results", "diagnostics", "why"}
    fix = why["fix"]
    assert fix, why
    flags = [x for k, v in fix.items() for x in (f"--{k.replace('_', '-')}", str(v))]
    base = [a for a in args if a not in ("--top-sessions", "1")]
    merged = {"--top-sessions": "1", "--chunks-per-session": "1"}
    merged.update(dict(zip(flags[::2], flags[1::2], strict=True)))
    code, out = run(folder, *base, *[x for kv in merged.items() for x in kv], "--json")
    assert code == 0, out
    got = [r["turn_id"] for r in json.loads(out)["results"]]
    assert got.index(target) + 1 == why["fix_rank"]  # the re-run by hand agrees

    code, out = run(folder, *args, "--why", target)
    assert code == 0 and f"why {target}: not retrieved" in out and "fix: --" in out


def test_plain_json_has_no_why_key(home: tuple[Path, dict[str, Any]]) -> None:
    code, out = run(home[0], "recall", QUERY, "--json")
    assert code == 0 and set(json.loads(out)) == {"query", "scope", "scope_id", "results", "diagnostics"}


def test_why_errors(home: tuple[Path, dict[str, Any]]) -> None:
    folder, turns = home
    code, out = run(folder, "recall", QUERY, "--why", "nope", "--json")
    assert code == 1 and json.loads(out)["code"] == "not_found" and json.loads(out)["hint"]
    code, out = run(folder, "recall", QUERY, "--scope-id", "u1", "--why", turns["elsewhere"][0], "--json")
    assert code == 1 and json.loads(out)["code"] == "invalid_argument"
    code, out = run(folder, "recall", QUERY, "--why", turns["garden"][0], "--vs", "top_k=3")
    assert code != 0 and "not both" in out


def test_vs_json_and_human(home: tuple[Path, dict[str, Any]]) -> None:
    folder, _ = home
    code, out = run(folder, "recall", QUERY, "--top-k", "3", "--vs", "top_k=6,mode=flat", "--json")
    assert code == 0, out
    ab = json.loads(out)
    assert ab["a"]["params"]["top_k"] == 3 and ab["b"]["params"]["top_k"] == 6
    assert ab["b"]["params"]["mode"] == "flat"
    a = [r["turn_id"] for r in ab["a"]["results"]]
    b = [r["turn_id"] for r in ab["b"]["results"]]
    assert [d["turn_id"] for d in ab["diff"]] == a + [t for t in b if t not in a]
    code, out = run(folder, "recall", QUERY, "--top-k", "3", "--vs", "top_k=6")
    assert code == 0 and "new" in out and "↑" in out
    code, out = run(folder, "recall", QUERY, "--vs", "w_dense=7", "--json")
    assert code == 1 and json.loads(out)["code"] == "invalid_argument"


def test_golden_cli_round_trip(home: tuple[Path, dict[str, Any]]) -> None:
    folder, turns = home
    code, out = run(folder, "golden", "add", QUERY, "--turn", turns["dentist"][0], "--json")
    assert code == 0, out
    case = json.loads(out)
    code, out = run(folder, "golden", "list", "--json")
    assert [c["id"] for c in json.loads(out)["cases"]] == [case["id"]]
    code, out = run(folder, "eval", "golden", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert {"cases", "recall@5", "recall@10", "mrr", "ndcg@10", "per_case"} <= set(report)
    assert report["cases"] == 1 and report["model"]
    code, out = run(folder, "eval", "golden", "--top-k", "1", "--json")
    code, out = run(folder, "eval", "golden", "--history", "--json")
    runs = json.loads(out)["runs"]
    assert [r["params"]["top_k"] for r in runs] == [1, 10]
    code, out = run(folder, "eval", "golden", "--history")
    assert code == 0 and "top_k=1" in out
    code, out = run(folder, "golden", "remove", str(case["id"]))
    assert code == 0
    code, out = run(folder, "golden", "remove", str(case["id"]), "--json")
    assert code == 1 and json.loads(out)["code"] == "not_found"
    code, out = run(folder, "golden", "add", QUERY, "--turn", "nope")
    assert code == 1 and "unknown turn" in out


def test_eval_golden_vs_shows_a_and_b_side_by_side(home: tuple[Path, dict[str, Any]]) -> None:
    """As ``recall --vs``: both runs, their averages and each case's change, not B alone."""
    folder, turns = home
    code, out = run(folder, "golden", "add", QUERY, "--turn", turns["dentist"][0], "--json")
    case_id = json.loads(out)["id"]
    try:
        code, out = run(folder, "eval", "golden", "--vs", "top_k=1,top_sessions=1", "--no-record", "--json")
        assert code == 0, out
        ab = json.loads(out)
        assert set(ab) == {"a", "b", "diff"}
        assert (ab["a"]["params"]["top_k"], ab["b"]["params"]["top_k"]) == (10, 1)
        assert (ab["a"]["params"]["top_sessions"], ab["b"]["params"]["top_sessions"]) == (5, 1)
        for m in ("recall@5", "recall@10", "mrr", "ndcg@10"):
            assert ab["diff"][m] == round(ab["b"][m] - ab["a"][m], 4)
        (case,) = [d for d in ab["diff"]["per_case"] if d["id"] == case_id]
        (scored_a,) = [c for c in ab["a"]["per_case"] if c["id"] == case_id]
        assert case["a"]["ranks"] == scored_a["ranks"] and case["change"] in ("up", "down", "same")
        code, text = run(folder, "eval", "golden", "--vs", "top_k=1", "--no-record")
        assert code == 0, text
        lines = text.splitlines()
        assert lines[0].split("\t") == [
            "case", "query", "found A", "found B", "mrr A", "mrr B", "ndcg@10 A", "ndcg@10 B", "B"
        ]  # fmt: skip
        assert lines[1].split("\t")[:2] == [str(case_id), short(QUERY, 40)]
        assert "\t".join(("metric", "A", "B", "B − A")) in lines
        assert any(ln.startswith("mrr\t") and ln.split("\t")[3][0] in "+-" for ln in lines)
        assert lines[-1].startswith("B: ") and "↑" in lines[-1]
        code, out = run(folder, "eval", "golden", "--history", "--json")
        before = len(json.loads(out)["runs"])
        run(folder, "eval", "golden", "--vs", "top_k=1")  # recorded: both runs are kept
        code, out = run(folder, "eval", "golden", "--history", "--json")
        assert [r["params"]["top_k"] for r in json.loads(out)["runs"][:2]] == [1, 10]
        assert len(json.loads(out)["runs"]) == before + 2
    finally:
        run(folder, "golden", "remove", str(case_id))


def test_limit_is_the_top_k_option(home: tuple[Path, dict[str, Any]]) -> None:
    """``--limit`` (the name search and recalls use) cuts the results exactly as ``--top-k``."""
    by_name: dict[str, list[str]] = {}
    for flag in ("--limit", "--top-k"):
        code, out = run(home[0], "recall", QUERY, flag, "2", "--json")
        assert code == 0, out
        by_name[flag] = [r["turn_id"] for r in json.loads(out)["results"]]
    assert len(by_name["--limit"]) == 2 and by_name["--limit"] == by_name["--top-k"]
    code, out = run(home[0], "recall", QUERY, "--limit", "0")
    assert code == 2 and "0 is not in the range" in out
