"""The benchmark suite's conventions (bench/harness.py, python -m bench): the shared percentiles,
--quick defaults, the skip of a benchmark whose inputs are missing, and that every script uses
the harness instead of its own path hacks. The benchmarks themselves run in CI's quick step."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import harness
from bench.__main__ import HELPERS, benchmarks

BENCH = Path(harness.__file__).parent


def test_percentiles_are_nearest_rank_values_that_were_measured() -> None:
    values = [float(v) for v in range(1, 101)]
    assert harness.pct(values, 50) == 51.0 and harness.pct(values, 99) == 99.0
    assert harness.percentiles([0.001, 0.002, 0.003], scale=1000) == {"p50": 2.0, "p90": 3.0, "p99": 3.0}
    assert harness.pct([], 50) == 0.0
    assert harness.median_of_runs([3.0, 1.0, 2.0]) == 2.0


def test_quick_sets_defaults_and_explicit_options_still_win() -> None:
    ap = harness.parser("doc")
    ap.add_argument("--turns", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=5)
    quick = {"turns": 50, "runs": 1}
    assert harness.parse(ap, quick, argv=[]).turns == 5000
    args = harness.parse(ap, quick, argv=["--quick", "--runs", "3"])
    assert (args.turns, args.runs, args.quick) == (50, 3, True)


def test_quick_calls_a_callable_default_only_in_quick_mode() -> None:
    calls: list[int] = []
    ap = harness.parser(None)
    ap.add_argument("--work", default="kept")
    assert harness.parse(ap, {"work": lambda: calls.append(1) or "scratch"}, argv=[]).work == "kept"
    assert calls == []
    assert harness.parse(ap, {"work": lambda: "scratch"}, argv=["--quick"]).work == "scratch"


def test_quick_without_the_inputs_it_needs_skips_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    ap = harness.parser(None)
    ap.add_argument("--home", required=True)
    with pytest.raises(SystemExit) as exc:
        harness.parse(ap, needs="a kept home", argv=["--quick"])
    assert exc.value.code == 0
    assert "# skip" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:  # without --quick a missing input is an error
        harness.parse(ap, needs="a kept home", argv=[])
    assert exc.value.code == 2


def test_a_missing_data_file_skips(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMVIEWER_BENCH_DATA", str(tmp_path))
    with pytest.raises(SystemExit) as exc:
        harness.data_file("nothing.json.gz")
    assert exc.value.code == 0
    (tmp_path / "there.json.gz").write_bytes(b"")
    assert harness.data_file("there.json.gz") == tmp_path / "there.json.gz"


def test_the_header_names_the_machine_and_the_load(capsys: pytest.CaptureFixture[str]) -> None:
    harness.header("bench_x")
    out = capsys.readouterr().out
    assert out.startswith("# bench_x: ") and "load " in out and "cores" in out and "Python" in out


def test_every_script_is_listed_and_uses_the_harness_not_its_own_helpers() -> None:
    scripts = {p.stem for p in BENCH.glob("*.py")} - {"__init__", "__main__", "harness"} - HELPERS
    listed = benchmarks()
    assert set(listed) == scripts
    assert all(listed.values()), "every benchmark has a docstring"
    for name in scripts | HELPERS:
        text = (BENCH / f"{name}.py").read_text()
        assert not re.search(r"^\s*sys\.path\.insert\(.*__file__", text, re.M), name
        assert not re.search(r"^\s*def _?pcts?\(", text, re.M), name
        assert "platform.python_version" not in text and "os.cpu_count" not in text, name
