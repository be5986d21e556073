"""What every benchmark shares: a timer, percentiles, the machine header, throwaway homes and hubs,
the ``--quick`` convention and the data folder, so each script holds only its own measurement.

Numbers from a shared machine are noisy: every script prints :func:`header` (date, load, CPU,
cores, RAM, Python, the stack's versions) first, so a figure always travels with its conditions.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
STACK = ("memviewer", "lancedb", "pyarrow", "onnxruntime", "tokenizers", "sqlmodel", "textual")


def _export_root() -> None:
    """Children spawned as ``python -m bench x`` import ``bench`` too: the repo root is on their path."""
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(ROOT) not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([*parts, str(ROOT)])


_export_root()


# --- timing -----------------------------------------------------------------------------------


class Timer:
    """``with Timer() as t: ...`` then ``t.s`` / ``t.ms``: wall time on the monotonic clock."""

    def __init__(self) -> None:
        self.start = 0.0
        self.s = 0.0

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.s = time.perf_counter() - self.start

    @property
    def ms(self) -> float:
        return self.s * 1000.0


def pct(values: Iterable[float], p: float) -> float:
    """The ``p``-th percentile (0–100) by nearest rank: a value that was measured, no interpolation."""
    s = sorted(values)
    if not s:
        return 0.0
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def percentiles(
    values: Iterable[float], ps: Sequence[float] = (50, 90, 99), scale: float = 1.0, digits: int = 2
) -> dict[str, float]:
    """``{"p50": …, "p90": …, "p99": …}`` of ``values`` times ``scale`` (1000 turns seconds into ms)."""
    s = [v * scale for v in values]
    return {f"p{p:g}": round(pct(s, p), digits) for p in ps}


def median_of_runs(runs: Iterable[float]) -> float:
    """The figure a benchmark reports for repeated runs: the median (robust to one disturbed run)."""
    xs = list(runs)
    return statistics.median(xs) if xs else 0.0


# --- the machine ------------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gb() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return 0.0


def versions(packages: Sequence[str] = STACK) -> dict[str, str]:
    """Installed versions of the stack (missing ones are left out)."""
    out: dict[str, str] = {}
    for name in packages:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[name] = metadata.version(name)
    return out


def load() -> str:
    """The 1/5/15-minute load averages, as ``uptime`` prints them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def machine() -> dict[str, Any]:
    """Date, load and machine of this run, as one dict (for JSON output)."""
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load": load(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gb": _ram_gb(),
        "python": platform.python_version(),
        "versions": versions(),
    }


def header(name: str, file: Any = None, **extra: Any) -> None:
    """The first lines of every benchmark's output: what ran, when, on what, under which load."""
    m = machine()
    stack = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
    more = "".join(f", {k} {v}" for k, v in extra.items())
    out = file or sys.stdout
    print(f"# {name}: {m['date']}, load {m['load']}{more}", file=out)
    print(
        f"# {m['cpu']}, {m['cores']} cores, {m['ram_gb']} GB RAM, Python {m['python']}; {stack}",
        file=out,
        flush=True,
    )


def footer(file: Any = None) -> None:
    """The load at the end: a run whose load moved a lot is worth repeating."""
    print(f"# load at the end {load()}", file=file or sys.stdout, flush=True)


# --- arguments: the --quick convention --------------------------------------------------------


def parser(doc: str | None, **kwargs: Any) -> argparse.ArgumentParser:
    """An ``ArgumentParser`` with the module docstring and the suite's ``--quick`` flag."""
    ap = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs
    )
    ap.add_argument("--quick", action="store_true", help="tiny sizes, seconds not minutes (what CI runs)")
    return ap


def parse(
    ap: argparse.ArgumentParser,
    quick: dict[str, Any] | None = None,
    argv: Sequence[str] | None = None,
    needs: str | None = None,
) -> argparse.Namespace:
    """Parse; with ``--quick`` the ``quick`` values become the defaults (explicit options still win).

    ``needs`` names the inputs a benchmark cannot make itself (a kept evaluation home): in quick
    mode without them it :func:`skip`s instead of failing, so ``--all --quick`` still imports it.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--quick" not in argv:
        return ap.parse_args(argv)
    if quick:
        # A callable value (``scratch``, ``search_home``) is called only in quick mode, and an
        # option quick mode fills in is no longer required.
        ap.set_defaults(**{k: v() if callable(v) else v for k, v in quick.items()})
        for action in ap._actions:
            if action.dest in quick and action.option_strings:
                action.required = False
    if not needs:
        return ap.parse_args(argv)
    error = ap.error

    def missing(message: str) -> NoReturn:
        skip(Path(sys.argv[0]).stem, f"needs {needs} ({message})")
        raise AssertionError  # skip exits

    ap.error = missing  # type: ignore[method-assign]
    try:
        return ap.parse_args(argv)
    finally:
        ap.error = error  # type: ignore[method-assign]


def skip(name: str, reason: str) -> None:
    """End a benchmark that cannot run here (missing data, input not given): exit 0, say why."""
    print(f"# skip {name}: {reason}", flush=True)
    raise SystemExit(0)


# --- data, homes, hubs ------------------------------------------------------------------------


def data_dir() -> Path:
    """The shared data sets: ``$MEMVIEWER_BENCH_DATA`` or ``../shared/data`` next to the checkout."""
    env = os.environ.get("MEMVIEWER_BENCH_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


def data_file(name: str) -> Path:
    """A file of the shared data, or :func:`skip` when it is missing (nothing is downloaded)."""
    path = data_dir() / name
    if not path.exists():
        skip(Path(sys.argv[0]).stem, f"needs {name} in the shared data folder (set MEMVIEWER_BENCH_DATA)")
    return path


def scratch(prefix: str = "mvq-") -> Path:
    """A throwaway folder removed when the process exits (quick mode's ``--work``)."""
    import atexit

    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


@contextlib.contextmanager
def workdir(prefix: str = "mvbench-") -> Iterator[Path]:
    """A throwaway folder (short path: a hub's socket lives in it), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def hub(work: Path, name: str = "hub", **kwargs: Any) -> Iterator[Any]:
    """A real hub process on ``work/name`` (its home) and ``work/name.sock``; started when
    it answers ``hello`` (a condition, not a sleep), stopped afterwards."""
    from memviewer.wire.testing import HubProcess

    proc = HubProcess(work / name, work / f"{name}.sock", **kwargs)
    with proc:
        yield proc


_search_home: tuple[Path, Path] | None = None


def search_home(sessions: int = 60) -> tuple[Path, Path]:
    """Quick mode's keyword-search home: ``bench_search_hub``'s generated PraisonAI corpus of
    ``sessions`` sessions imported into a throwaway home; ``(home, planted.json)``, built once."""
    global _search_home
    if _search_home is None:
        from bench.bench_search_hub import _corpus, _home

        work = scratch("mvq-search-")
        folder, _ = _corpus(work, sessions, min(30, sessions))
        _search_home = (_home(work, folder, sessions), work / f"sessions-{sessions}.planted.json")
    return _search_home


def search_work(sessions: int = 60) -> Path:
    """The folder :func:`search_home` built its corpus and home in (``--work`` of the profilers)."""
    return search_home(sessions)[0].parent


def head_tree() -> Path:
    """Quick mode's base tree: this checkout's ``HEAD`` (``memviewer/`` and ``bench/``) extracted."""
    from bench import baseline_tree

    return baseline_tree.extract("HEAD", scratch("mvq-tree-"), paths=("memviewer", "bench"))


def quiet_logs() -> None:
    """Benchmarks print figures, not the library's INFO lines."""
    import logging

    logging.disable(logging.WARNING)


def test_module(name: str) -> Any:
    """A helper module of ``tests/`` (a corpus generator): loaded by file, ``tests/`` is no package."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_tests_{name}", ROOT / "tests" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
