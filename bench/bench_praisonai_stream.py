"""Peak memory and time of reading / importing one big PraisonAI file, whole vs streamed.

Each measurement runs in a fresh process (peak RSS is ru_maxrss of that process):
``load_file`` (the whole-file read) and ``load_file_streaming`` side by side, then the real
``memviewer import praisonai --no-index`` (which streams files of 16 MB or more).

    python -m bench bench_praisonai_stream [--mb 200]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from bench import harness

write_big_session = harness.test_module("praisonai_big").write_big_session


PROBE = """
import resource, sys, time
from pathlib import Path
from memviewer.praisonai.format import load_file
from memviewer.praisonai.stream import load_file_streaming
t = time.perf_counter()
session, turns = (load_file if sys.argv[1] == "whole" else load_file_streaming)(Path(sys.argv[2]))
print(len(turns), time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""

CLI = """
import resource, subprocess, sys, time
t = time.perf_counter()
r = subprocess.run(sys.argv[1:], capture_output=True)
assert r.returncode == 0, r.stderr
print(0, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)
"""


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--mb", type=int, default=200)
    args = harness.parse(ap, {"mb": 1})
    harness.header("bench_praisonai_stream")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.json"
        n = write_big_session(path, args.mb * 1_000_000)
        size = path.stat().st_size / 1e6
        print(f"file: {size:.0f} MB, {n} messages")
        for mode in ("whole", "stream"):
            out = subprocess.run(
                [sys.executable, "-c", PROBE, mode, str(path)], capture_output=True, text=True
            )
            turns, secs, rss = out.stdout.split()
            print(
                f"  read {mode:6}: {float(secs):6.1f} s, "
                f"peak RSS {float(rss):6.0f} MB ({float(rss) / size:.2f}x)"
            )
        exe = str(Path(sys.executable).with_name("memviewer"))
        home = Path(tmp) / "home"
        cmd = [exe, "--home", str(home), "import", "praisonai", "--no-index", str(path)]
        out = subprocess.run([sys.executable, "-c", CLI, *cmd], capture_output=True, text=True)
        _, secs, rss = out.stdout.split()
        print(
            f"  import (CLI, streamed): {float(secs):6.1f} s, "
            f"peak RSS {float(rss):6.0f} MB ({float(rss) / size:.2f}x)"
        )


if __name__ == "__main__":
    main()
