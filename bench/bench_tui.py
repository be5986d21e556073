"""Viewer benchmarks: first paint and memory at 1k / 100k sessions, and UI
responsiveness while the live tail receives ~1,000 events/s.

    /tmp/venv/bin/python -m bench bench_tui                 # everything
    /tmp/venv/bin/python -m bench bench_tui --only paint    # first paint only
    /tmp/venv/bin/python -m bench bench_tui --only live --rate 1000 --seconds 8
    /tmp/venv/bin/python -m bench bench_tui --only longsession --runs 3   # one 5,000-turn session

First paint: ``memviewer`` runs as a real process on a pseudo-terminal
(120x36) with ``MEMVIEWER_TUI_PAINT_REPORT`` set, so it writes a timestamp,
its RSS and the heavy modules it has loaded right after the Sessions screen
shows its first page, then exits. The time is measured from just before the
process is spawned. Stores are generated once into bench/out/ (git-ignored).

Live: the viewer runs headless in this process (``App.run_test``) and hosts a
real hub on a temporary socket; a separate publisher process sends add_turn
commands at ``--rate`` per second. Key latency is the time from a Pilot key
press to its visible effect; loop lag is how late a 5 ms timer fires. Each is
also measured with no events flowing, in the same run.

Long session: one session of ``--turns`` turns (all active, then half archived)
is opened headless, then ``x``, ``v``, a resize, ``end``/``home`` and a jump;
each step reports its wall time until the next refresh and the worst stall of
the event loop (how late a 5 ms timer fires).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import pty
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path
from typing import Any

from bench import harness

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "tui"
T0 = 1740819600.0


# -- stores ----------------------------------------------------------------------
def build_store(home: Path, n: int) -> None:
    """``n`` sessions with 2 turns each, written in 1,000-session transactions."""
    from memviewer.config import load_settings
    from memviewer.service import MemoryService
    from memviewer.store import repos

    settings = load_settings(home / "none.toml", env={}, home=str(home), socket=str(home / "unused.sock"))
    svc = MemoryService(settings)
    try:
        for base in range(0, n, 1000):
            with svc.store.write() as tx:
                sessions, turns = [], []
                for i in range(base, min(n, base + 1000)):
                    ts, sid = T0 + i * 7.0, f"bench-{i:07d}"
                    sessions.append(
                        repos.new_session_row(
                            sid,
                            ts,
                            agent=f"agent-{i % 13}",
                            scope="user",
                            scope_id=f"user-{i % 97}",
                            title=f"bench session {i} about topic {i % 211}",
                            last_seen_at=ts + 5,
                            closed_at=ts + 6,
                            source="cron" if i % 10 == 0 else None,
                            lineage_id=f"lin-{i // 3}" if i % 17 == 0 else None,
                        )
                    )
                    turns += [
                        repos.new_turn_row(
                            f"{sid}-t{j}",
                            sid,
                            None,
                            j,
                            ("user", "assistant")[j % 2],
                            f"turn {j} of session {i}",
                            ts + j,
                        )
                        for j in range(2)
                    ]
                tx.conn.execute(repos.S.insert(), sessions)
                repos.insert_turns(tx.conn, turns)
    finally:
        svc.close()


def ensure_store(n: int) -> Path:
    home = OUT / f"store-{n}"
    marker = home / "ready"
    if not marker.exists():
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        started = time.perf_counter()
        build_store(home, n)
        marker.write_text(f"{time.perf_counter() - started:.1f}s\n")
        print(f"  built store with {n:,} sessions in {marker.read_text().strip()}", flush=True)
    return home


# -- first paint -------------------------------------------------------------------
def _drain(fd: int, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            if not os.read(fd, 65536):
                return
        except OSError:
            return


def first_paint_once(home: Path) -> dict[str, Any]:
    sock_dir = Path(tempfile.mkdtemp(prefix="mvb-", dir="/tmp"))
    report = sock_dir / "paint.json"
    env = {
        **os.environ,
        "MEMVIEWER_HOME": str(home),
        "MEMVIEWER_SOCKET": str(sock_dir / "hub.sock"),
        "MEMVIEWER_TUI_PAINT_REPORT": str(report),
        "TERM": "xterm-256color",
        "MEMVIEWER_CONFIG": os.devnull,
    }
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))
    stop = threading.Event()
    reader = threading.Thread(target=_drain, args=(master, stop), daemon=True)
    reader.start()
    t0 = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memviewer.cli"],
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    try:
        proc.wait(timeout=60)
    finally:
        stop.set()
        os.close(master)
    t_exit = time.time()
    data = json.loads(report.read_text())
    shutil.rmtree(sock_dir, ignore_errors=True)
    return {
        "paint_s": data["t_paint"] - t0,
        "exit_s": t_exit - t0,
        "rss_mb": data["rss_kb"] / 1024,
        "cpu_s": data["cpu_s"],
        "rows": data["rows"],
        "total": data["total"],
        "heavy": data["heavy_loaded"],
    }


def bench_paint(sizes: list[int], runs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    homes = {n: ensure_store(n) for n in sizes}
    samples: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
    first_paint_once(homes[sizes[0]])  # warm the OS file cache for the interpreter and packages
    for _ in range(runs):
        for n in sizes:  # interleaved, so a noisy moment hits every size alike
            samples[n].append(first_paint_once(homes[n]))
    for n in sizes:
        s = samples[n]
        out[str(n)] = {
            "first_paint_ms_median": round(1000 * statistics.median(x["paint_s"] for x in s)),
            "first_paint_ms_all": [round(1000 * x["paint_s"]) for x in s],
            "cpu_ms_median": round(1000 * statistics.median(x["cpu_s"] for x in s)),
            "rss_mb_median": round(statistics.median(x["rss_mb"] for x in s), 1),
            "rows_painted": s[0]["rows"],
            "total": s[0]["total"],
            "heavy_modules_at_paint": sorted({m for x in s for m in x["heavy"]}),
        }
        print(
            f"  {n:>7,} sessions: first paint median {out[str(n)]['first_paint_ms_median']} ms "
            f"{out[str(n)]['first_paint_ms_all']} (process CPU {out[str(n)]['cpu_ms_median']} ms), "
            f"RSS {out[str(n)]['rss_mb_median']} MB, "
            f"heavy modules at paint: {out[str(n)]['heavy_modules_at_paint'] or 'none'}",
            flush=True,
        )
    return out


# -- live responsiveness -------------------------------------------------------------
PUBLISHER = r"""
import sys, time
from memviewer.client import Publisher
sock, spool, rate, seconds, home = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
pub = Publisher(sock, spool_dir=spool, home=home, max_batch=500)
sid = pub.open_session(agent="bench-publisher", title="live bench", retention="keep_all")
eid = pub.start_episode(sid, "stream turns as fast as asked")
pub.flush(10)
print("ready", flush=True)
sys.stdin.readline()
tick, per_tick, n = 0.01, max(1, rate // 100), 0
start = time.perf_counter()
while time.perf_counter() - start < seconds:
    for _ in range(per_tick):
        pub.add_turn(eid, "assistant", f"streamed turn {n}")
        n += 1
    target = start + (n / per_tick) * tick
    delay = target - time.perf_counter()
    if delay > 0:
        time.sleep(delay)
elapsed = time.perf_counter() - start
pub.flush(30)
print(f"sent {n} {elapsed:.3f}", flush=True)
pub.close(timeout=5)
"""


async def _loop_lag(stop: asyncio.Event, out: list[float], period: float = 0.005) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        t = loop.time()
        await asyncio.sleep(period)
        out.append(max(0.0, loop.time() - t - period))


def _send_key(app: Any, key: str, char: str | None) -> None:
    """What the terminal driver does on a key press (Pilot.press also waits for idle: not timed)."""
    from textual import events

    event = events.Key(key, char)
    event.set_sender(app)
    app._driver.send_message(event)


async def _wait_effect(check: Any, timeout: float = 10.0) -> None:
    deadline = time.perf_counter() + timeout
    while not check():
        if time.perf_counter() > deadline:
            raise TimeoutError("key had no effect")
        await asyncio.sleep(0.001)


async def _painted(app: Any) -> None:
    """Returns after the current screen's next refresh (i.e. once the switch is on screen)."""
    done = asyncio.get_running_loop().create_future()
    app.screen.call_after_refresh(lambda: done.done() or done.set_result(None))
    await done


async def _key_latencies(pilot: Any, count: int, gap: float) -> dict[str, list[float]]:
    """Key event in -> effect visible in the model: Live pause toggles, then Sessions cursor moves.

    One screen switch between the two series (switching repaints everything and is timed apart).
    """
    app = pilot.app
    out: dict[str, list[float]] = {"live_pause": [], "sessions_cursor": [], "screen_switch": []}
    screen = app.screen
    for _ in range(count):
        before = screen.paused
        t = time.perf_counter()
        _send_key(app, "space", " ")
        await _wait_effect(lambda: screen.paused != before)  # noqa: B023
        out["live_pause"].append(time.perf_counter() - t)
        await asyncio.sleep(gap)
    if screen.paused:
        _send_key(app, "space", " ")
        await _wait_effect(lambda: not screen.paused)
    t = time.perf_counter()
    _send_key(app, "1", "1")
    await _wait_effect(lambda: type(app.screen).__name__ == "SessionsScreen")
    await _painted(app)
    out["screen_switch"].append(time.perf_counter() - t)
    table = app.screen.query_one("#sessions")
    for i in range(count):
        row = table.cursor_row
        t = time.perf_counter()
        _send_key(app, "down" if i % 2 == 0 else "up", None)
        await _wait_effect(lambda: table.cursor_row != row)  # noqa: B023
        out["sessions_cursor"].append(time.perf_counter() - t)
        await asyncio.sleep(gap)
    t = time.perf_counter()
    _send_key(app, "2", "2")
    await _wait_effect(lambda: type(app.screen).__name__ == "LiveScreen")
    await _painted(app)
    out["screen_switch"].append(time.perf_counter() - t)
    return out


def _latency_summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    pcts = harness.percentiles(values, (50, 95), scale=1000)
    return {**pcts, "max": round(max(values) * 1000, 2), "n": len(values)}


async def _live_run(home: Path, rate: int, seconds: float) -> dict[str, Any]:
    from memviewer.config import load_settings
    from memviewer.tui.app import MemviewerApp

    sock_dir = Path(tempfile.mkdtemp(prefix="mvl-", dir="/tmp"))
    settings = load_settings(
        sock_dir / "none.toml", env={}, home=str(home), socket=str(sock_dir / "hub.sock")
    )
    app = MemviewerApp(settings, hub="auto", hub_indexer=False)
    result: dict[str, Any] = {}
    async with app.run_test(size=(120, 36)) as pilot:
        while not (app.hosted is not None and app.feed.state == "connected"):
            await pilot.pause(0.02)
        await pilot.press("2")
        # baseline: nothing flowing
        stop, lag = asyncio.Event(), []
        lag_task = asyncio.create_task(_loop_lag(stop, lag))
        base_keys = await _key_latencies(pilot, 15, 0.05)
        await asyncio.sleep(1.0)
        stop.set()
        await lag_task
        result["idle"] = {
            "loop_lag_ms": _latency_summary(lag),
            **{k: _latency_summary(v) for k, v in base_keys.items()},
        }

        received0 = app.feed.received
        pub = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            PUBLISHER,
            str(settings.socket_path),
            str(sock_dir / "spool"),
            str(rate),
            str(seconds),
            str(home),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert pub.stdout is not None and pub.stdin is not None
        assert (await pub.stdout.readline()).strip() == b"ready"
        stop, lag = asyncio.Event(), []
        lag_task = asyncio.create_task(_loop_lag(stop, lag))
        t_start = time.perf_counter()
        pub.stdin.write(b"go\n")
        await pub.stdin.drain()
        await asyncio.sleep(1.0)  # let the stream reach full rate
        keys = await _key_latencies(pilot, 15, 0.1)
        line = (await pub.stdout.readline()).decode().split()
        t_flushed = time.perf_counter() - t_start
        await pub.wait()
        sent, send_s = int(line[1]), float(line[2])
        deadline = time.perf_counter() + 30
        while app.feed.last_seq < app.service.last_seq and time.perf_counter() < deadline:
            await pilot.pause(0.05)
        result["last_seq"] = {"feed": app.feed.last_seq, "store": app.service.last_seq}
        t_all = time.perf_counter() - t_start
        stop.set()
        await lag_task
        live = app.screen
        log = live.query_one("#events")
        result["streaming"] = {
            "loop_lag_ms": _latency_summary(lag),
            **{k: _latency_summary(v) for k, v in keys.items()},
            "turns_sent": sent,
            "send_rate_per_s": round(sent / send_s),
            "events_received": app.feed.received - received0,
            "seconds_until_all_received": round(t_all, 2),
            "seconds_until_publisher_flushed": round(t_flushed, 2),
            "duplicates": app.feed.duplicates,
            "rows_kept": len(log.rows),
            "row_cap": log.cap,
            "seqs_strictly_increasing": all(
                a.seq < b.seq for a, b in zip(log.rows, log.rows[1:], strict=False)
            ),
        }
    shutil.rmtree(sock_dir, ignore_errors=True)
    return result


def bench_live(rate: int, seconds: float) -> dict[str, Any]:
    src = ensure_store(1000)
    home = OUT / "live-home"
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(src, home)
    try:
        res = asyncio.run(_live_run(home, rate, seconds))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    for phase in ("idle", "streaming"):
        r = res[phase]
        print(
            f"  {phase:>9}: loop lag p50 {r['loop_lag_ms']['p50']} / p95 {r['loop_lag_ms']['p95']} / "
            f"max {r['loop_lag_ms']['max']} ms; key→effect Live p50 {r['live_pause']['p50']} "
            f"max {r['live_pause']['max']} ms, Sessions p50 {r['sessions_cursor']['p50']} "
            f"max {r['sessions_cursor']['max']} ms; screen switch max {r['screen_switch']['max']} ms",
            flush=True,
        )
    s = res["streaming"]
    print(
        f"  sent {s['turns_sent']} turns at {s['send_rate_per_s']}/s (publisher flushed after "
        f"{s['seconds_until_publisher_flushed']} s); received {s['events_received']} events "
        f"(all within {s['seconds_until_all_received']} s), duplicates {s['duplicates']}, rows kept "
        f"{s['rows_kept']}/{s['row_cap']}",
        flush=True,
    )
    return res


async def _interactions_run(home: Path) -> dict[str, Any]:
    from memviewer.config import load_settings
    from memviewer.tui.app import MemviewerApp
    from memviewer.tui.screens.sessions import PAGE_SIZE

    sock_dir = Path(tempfile.mkdtemp(prefix="mvi-", dir="/tmp"))
    settings = load_settings(
        sock_dir / "none.toml", env={}, home=str(home), socket=str(sock_dir / "hub.sock")
    )
    app = MemviewerApp(settings, hub="off")
    timings: dict[str, list[float]] = {
        "next_page": [],
        "deep_page": [],
        "filter": [],
        "sort_title": [],
        "open_session": [],
    }
    async with app.run_test(size=(120, 36)) as pilot:
        screen = app.screen
        while not screen.loaded_once:
            await pilot.pause(0.02)

        async def timed(name: str, action: Any, done: Any) -> None:
            t = time.perf_counter()
            action()
            await _wait_effect(done, timeout=30)
            await _painted(app)
            timings[name].append(time.perf_counter() - t)

        for i in range(5):
            target = screen.page_offset + PAGE_SIZE
            await timed(
                "next_page",
                lambda: _send_key(app, "right_square_bracket", "]"),
                lambda t=target: screen.page_offset == t,
            )
            deep = screen.total - PAGE_SIZE - i * PAGE_SIZE
            await timed(
                "deep_page",
                lambda d=deep: screen.load(d, cursor="first"),
                lambda d=deep: screen.page_offset == d,
            )
            text = f"topic {17 + i}"
            await timed(
                "filter",
                lambda x=text: setattr(screen.query_one("#filter"), "value", x),
                lambda x=text: screen.filter_text == x and screen.rows and x in screen.rows[0]["title"],
            )
            screen.query_one("#filter").value = ""
            await _wait_effect(lambda: screen.filter_text == "" and screen.total > 1000, timeout=30)
            # ascending: the newest-first page happens to be title-descending already
            await timed(
                "sort_title",
                lambda: (
                    setattr(screen, "sort_index", 2),
                    setattr(screen, "descending", False),
                    screen.load(0, cursor="first"),
                ),
                lambda: screen.rows and screen.rows[0]["title"] == "bench session 0 about topic 0",
            )
            screen.sort_index, screen.descending = 0, True
            screen.load(0, cursor="first")
            await _wait_effect(
                lambda: screen.rows and screen.rows[0]["session_id"] == f"bench-{screen.total - 1:07d}",
                timeout=30,
            )
            sid = screen.rows[0]["session_id"]
            await timed(
                "open_session",
                lambda s=sid: app.open_session(s),
                lambda s=sid: getattr(app.screen, "data", None) is not None,
            )
            app.pop_screen()
            await pilot.pause()
    shutil.rmtree(sock_dir, ignore_errors=True)
    return {k: _latency_summary(v) for k, v in timings.items()}


def bench_interactions(n: int) -> dict[str, Any]:
    res = asyncio.run(_interactions_run(ensure_store(n)))
    for name, r in res.items():
        print(f"  {name:>13}: p50 {r['p50']} ms, max {r['max']} ms (n={r['n']})", flush=True)
    return res


# -- one long session ------------------------------------------------------------------
LONG_SIZES = ((120, 36), (150, 36))  # the resize step goes from the first to the second
PARAGRAPH = ("This is a realistic assistant answer with several sentences of text. " * 6).strip()


def build_long_store(home: Path, n: int, archived: int) -> str:
    """One session of ``n`` turns (1–4 paragraphs each, an episode every 50 turns, the first
    ``archived`` compacted out), written with direct inserts. Returns its id."""
    from memviewer.config import load_settings
    from memviewer.service import MemoryService
    from memviewer.store import repos

    sid = f"long-{n}-{archived}"
    settings = load_settings(home / "none.toml", env={}, home=str(home), socket=str(home / "unused.sock"))
    svc = MemoryService(settings)
    try:
        with svc.store.write() as tx:
            repos.insert_session(
                tx.conn,
                repos.new_session_row(
                    sid,
                    T0,
                    agent="bench",
                    title=f"{n:,} turns",
                    last_seen_at=T0 + n,
                    closed_at=T0 + n,
                    retention="keep_all",
                ),
            )
            for e in range(0, n, 50):
                repos.insert_episode(
                    tx.conn,
                    {
                        "id": f"{sid}-e{e // 50}",
                        "session_id": sid,
                        "status": "closed",
                        "closed_by": "finalized",
                        "started_at": T0 + e,
                        "ended_at": T0 + e + 49,
                        "intent_kind": "task",
                        "intent_confidence": 0.9,
                        "intent_rule": "bench.task",
                        "intent_source": "heuristic",
                        "r_task": None,
                        "meta": None,
                    },
                )
            rows = []
            for j in range(n):
                row = repos.new_turn_row(
                    f"{sid}-t{j}",
                    sid,
                    f"{sid}-e{j // 50}",
                    j,
                    ("user", "assistant")[j % 2],
                    f"turn {j}\n" + "\n".join([PARAGRAPH] * (1 + j % 4)),
                    T0 + j,
                )
                row["archived"] = j < archived
                rows.append(row)
            repos.insert_turns(tx.conn, rows)
    finally:
        svc.close()
    return sid


async def _timed_lag(stop: asyncio.Event, out: list[tuple[float, float]], period: float = 0.005) -> None:
    """(tick end, lateness) of a ``period`` timer until ``stop``."""
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(period)
        end = time.perf_counter()
        out.append((end, max(0.0, end - t - period)))


async def _long_session_run(home: Path, sid: str) -> dict[str, dict[str, float]]:
    """Open the session, then ``x`` twice, ``v`` three times, a resize, ``end``/``home`` and a jump
    to turn 0. Per step: the wall time until the next refresh or, if later, the end of the last
    loop stall over 20 ms (layout after a resize runs after the refresh callback), and the worst
    stall (how late a 5 ms timer fires), watched until 0.5 s after the refresh."""
    from textual import events
    from textual.geometry import Size

    from memviewer.config import load_settings
    from memviewer.tui.app import MemviewerApp

    sock_dir = Path(tempfile.mkdtemp(prefix="mvs-", dir="/tmp"))
    settings = load_settings(sock_dir / "none.toml", env={}, home=str(home), socket=str(sock_dir / "s.sock"))
    app = MemviewerApp(settings, hub="off")
    out: dict[str, dict[str, float]] = {}
    async with app.run_test(size=LONG_SIZES[0]) as pilot:
        while not app.screen.loaded_once:
            await pilot.pause(0.02)
        await pilot.pause(0.3)

        async def step(name: str, action: Any, done: Any) -> None:
            stop, ticks = asyncio.Event(), []
            lag_task = asyncio.create_task(_timed_lag(stop, ticks))
            await asyncio.sleep(0.02)
            t = time.perf_counter()
            action()
            await _wait_effect(done, timeout=60)
            await _painted(app)
            painted = time.perf_counter()
            await asyncio.sleep(0.5)
            stop.set()
            await lag_task
            late = [(end, lag) for end, lag in ticks if end > t]
            # Layout after a resize or a pane appearing runs after the refresh callback: count it
            busy_until = max([painted] + [end for end, lag in late if lag > 0.02])
            out[name] = {
                "wall_ms": round((busy_until - t) * 1000, 1),
                "stall_ms": round(max((lag for _, lag in late), default=0.0) * 1000, 1),
            }

        await step("open", lambda: app.open_session(sid), lambda: getattr(app.screen, "data", None))
        screen = app.screen
        for name in ("x expand", "x collapse"):
            want = not screen._all_expanded
            await step(name, lambda: _send_key(app, "x", "x"), lambda w=want: screen._all_expanded == w)
        for _ in range(3):
            want = {"active": "archived", "archived": "both", "both": "active"}[screen.view]
            await step(f"v -> {want}", lambda: _send_key(app, "v", "v"), lambda w=want: screen.view == w)

        def resize() -> None:
            size = Size(*LONG_SIZES[1])
            app._driver._size = size
            app.post_message(events.Resize(size, size))

        await step("resize", resize, lambda: app.size.width == LONG_SIZES[1][0])
        last = app.screen.data["turns"][-1]["index"]
        first = min(t["index"] for t in screen.data["turns"] if not t["archived"])
        here = lambda: screen.current_turn["index"]  # noqa: E731
        await step("end", lambda: _send_key(app, "end", None), lambda: here() == last)
        await step("home", lambda: _send_key(app, "home", None), lambda: here() == first)
        await step("jump to #0", lambda: screen.go_to(0), lambda: here() == 0)
    shutil.rmtree(sock_dir, ignore_errors=True)
    return out


def bench_long_session(n: int, runs: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for archived in (0, n // 2):
        home = OUT / f"store-long-{n}-{archived}"
        marker = home / "ready"
        if not marker.exists():
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            marker.write_text(build_long_store(home, n, archived))
        sid = marker.read_text()
        samples = [asyncio.run(_long_session_run(home, sid)) for _ in range(runs)]
        label = f"{n:,} turns, {archived:,} archived"
        print(f"  {label} (median wall / worst stall over {runs} runs):", flush=True)
        results[label] = {}
        for name in samples[0]:
            wall = statistics.median(s[name]["wall_ms"] for s in samples)
            stall = max(s[name]["stall_ms"] for s in samples)
            results[label][name] = {
                "wall_ms_median": wall,
                "stall_ms_max": stall,
                "all": [s[name] for s in samples],
            }
            print(f"    {name:>12}: wall {wall:7.0f} ms, worst stall {stall:7.0f} ms", flush=True)
    return results


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--only", choices=("paint", "live", "interact", "longsession"), default=None)
    ap.add_argument("--turns", type=int, default=5000, help="turns in the long session (--only longsession)")
    ap.add_argument("--sizes", default="1000,100000")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=8.0)
    args = harness.parse(ap, {"sizes": "1200", "runs": 1, "rate": 100, "seconds": 1.0, "turns": 100})
    harness.header("bench_tui")
    OUT.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        **harness.machine(),
    }
    if args.only in (None, "paint"):
        print("first paint:", flush=True)
        results["first_paint"] = bench_paint([int(s) for s in args.sizes.split(",")], args.runs)
    if args.only in (None, "interact"):
        n = max(int(s) for s in args.sizes.split(","))
        print(f"interactions with {n:,} sessions (filter includes its 150 ms typing debounce):", flush=True)
        results["interactions"] = bench_interactions(n)
    if args.only in (None, "longsession"):
        print(f"one session of {args.turns:,} turns ({LONG_SIZES[0][0]}x{LONG_SIZES[0][1]}):", flush=True)
        results["long_session"] = bench_long_session(args.turns, min(args.runs, 3))
    if args.only in (None, "live"):
        print(f"live tail at {args.rate} events/s for {args.seconds:.0f} s:", flush=True)
        results["live"] = bench_live(args.rate, args.seconds)
    results["load_end"] = harness.load()
    harness.footer()
    path = OUT / f"results-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2))
    print(f"results: {path}")


if __name__ == "__main__":
    main()
