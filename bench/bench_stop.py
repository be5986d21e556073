"""How long a loaded hub takes to stop on SIGINT, and whether it stops cleanly.

A home holds ``--turns`` realistic turns stored but not embedded (``import praisonai
--no-index``), so the hub's background indexer is in the middle of a long catch-up when the
signal comes; a Publisher keeps publishing meanwhile. ``memviewer serve`` (the real model)
is started, given ``--settle`` seconds, then sent SIGINT; the time to exit, the exit status
and whether it aborted (``terminate called``, SIGABRT) are reported. With ``--exe OLD --exe
NEW`` two installs are measured alternately in one run.

    python -m bench bench_stop [--turns 6000] [--settle 4] [--runs 3] [--exe PATH ...]
        [--viewer]   (the viewer hosting the hub, quit with ctrl+q in a pty, instead of serve)
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench import harness

WORDS = (
    "the refund for order {i} went to the card ending 4471 after the customer asked twice; "
    "we agreed to move the billing migration to Adyen in June and to keep Stripe for the "
    "legacy plans until the contracts end, and the on-call engineer noted that retries use "
    "exponential backoff capped at thirty seconds"
)


def make_home(exe: str, folder: Path, turns: int) -> Path:
    home = folder / "home"
    src = folder / "sessions"
    src.mkdir()
    per = 200
    for s in range(turns // per):
        msgs = [
            {
                "role": "user" if i % 2 else "assistant",
                "content": WORDS.format(i=s * per + i),
                "timestamp": 1.7e9 + i,
            }
            for i in range(per)
        ]
        (src / f"s{s}.json").write_text(
            json.dumps({"session_id": f"s{s}", "agent_name": "a", "messages": msgs})
        )
    env = {**os.environ, "MEMVIEWER_CONFIG": os.devnull}
    subprocess.run(
        [exe, "--home", str(home), "import", "praisonai", str(src), "--no-index"],
        check=True,
        capture_output=True,
        env=env,
    )
    return home


def one(exe: str, turns: int, settle: float) -> dict[str, object]:
    from memviewer.client import Publisher

    with tempfile.TemporaryDirectory(prefix="mvstop") as tmp:
        folder = Path(tmp)
        home = make_home(exe, folder, turns)
        sock = folder / "hub.sock"
        env = {**os.environ, "MEMVIEWER_CONFIG": os.devnull}
        hub = subprocess.Popen(
            [exe, "--home", str(home), "--socket", str(sock), "serve"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        deadline = time.monotonic() + 60
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        stop = threading.Event()

        def publish() -> None:  # load: an agent publishing all along
            pub = Publisher(sock, folder / "spool", home=home)
            sid = pub.open_session(agent="live")
            ep = pub.start_episode(sid, "keep going")
            n = 0
            while not stop.is_set():
                pub.add_turn(ep, "assistant", WORDS.format(i=n))
                n += 1
                time.sleep(0.002)
            pub.close(timeout=5)

        t = threading.Thread(target=publish, daemon=True)
        t.start()
        time.sleep(settle)  # a benchmark, not a test: let the catch-up get well under way
        t0 = time.monotonic()
        hub.send_signal(signal.SIGINT)
        try:
            code = hub.wait(60)
        except subprocess.TimeoutExpired:
            hub.kill()
            code = hub.wait()
        took = time.monotonic() - t0
        stop.set()
        t.join(10)
        err = hub.stderr.read().decode(errors="replace") if hub.stderr else ""
        return {"stop_s": round(took, 2), "code": code, "aborted": "terminate called" in err or code == -6}


def one_viewer(exe: str, turns: int, settle: float) -> dict[str, object]:
    """The viewer hosting the hub (no hub runs): quit with ctrl+q while its indexer catches up."""
    import pty
    import select

    with tempfile.TemporaryDirectory(prefix="mvstopv") as tmp:
        folder = Path(tmp)
        home = make_home(exe, folder, turns)
        env = {
            **os.environ,
            "MEMVIEWER_CONFIG": os.devnull,
            "TERM": "xterm-256color",
            "XDG_RUNTIME_DIR": str(folder),
            "COLUMNS": "120",
            "LINES": "36",
        }
        master, slave = pty.openpty()
        viewer = subprocess.Popen(
            [exe, "--home", str(home), "--socket", str(folder / "hub.sock")],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        seen = b""
        deadline = time.monotonic() + 60
        while b"Sessions" not in seen and time.monotonic() < deadline:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
        time.sleep(settle)  # the hosted hub's indexer is catching up now
        t0 = time.monotonic()
        os.write(master, b"\x11")  # ctrl+q
        while viewer.poll() is None and time.monotonic() - t0 < 60:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    pass
        took = time.monotonic() - t0
        if viewer.poll() is None:
            viewer.kill()
        code = viewer.wait()
        os.close(master)
        aborted = b"terminate called" in seen or code == -6
        return {"stop_s": round(took, 2), "code": code, "aborted": aborted}


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--turns", type=int, default=6000)
    ap.add_argument("--settle", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--exe", action="append", default=None)
    ap.add_argument("--viewer", action="store_true", help="quit the viewer hosting the hub instead")
    args = harness.parse(ap, {"turns": 100, "settle": 0.5, "runs": 1})
    harness.header("bench_stop")
    exes = args.exe or [str(Path(sys.executable).parent / "memviewer")]
    results: dict[str, list[dict[str, object]]] = {e: [] for e in exes}
    for _ in range(args.runs):
        for exe in exes:  # alternately, so load drifts hit both alike
            r = (one_viewer if args.viewer else one)(exe, args.turns, args.settle)
            results[exe].append(r)
            print(exe, json.dumps(r), flush=True)
    for exe, rs in results.items():
        stops = [float(r["stop_s"]) for r in rs]  # type: ignore[arg-type]
        print(
            f"{exe}: stop median {statistics.median(stops):.2f} s, max {max(stops):.2f} s, "
            f"aborted {sum(bool(r['aborted']) for r in rs)} of {len(rs)}"
        )


if __name__ == "__main__":
    main()
