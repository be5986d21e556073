"""``memviewer demo [--live]``: load the demo history, or run a simulated agent live."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import click

from memviewer.commands.common import emit_json, fail, open_service, settings_of
from memviewer.words import plural

if TYPE_CHECKING:
    from memviewer.config import Settings

CHUNK = 500


def _created(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    keys = ("sessions", "episodes", "turns", "archived_turns", "compaction_summaries", "events")
    out = {k: int(after.get(k, 0)) - int(before.get(k, 0)) for k in keys}
    out["turns"] -= out["compaction_summaries"]  # the scenario's turns; summaries are counted apart
    return out


def _apply_through_hub(socket_path: Any, commands: list[dict[str, Any]]) -> tuple[dict[str, Any], list[Any]]:
    from memviewer.wire.remote import RemoteService

    with RemoteService(socket_path, client="memviewer.demo") as remote:
        before = remote.stats()["counts"]
        results: list[dict[str, Any]] = []
        for i in range(0, len(commands), CHUNK):
            results += remote.publish(commands[i : i + CHUNK])
        after = remote.stats()["counts"]
    return _created(before, after), results


def _apply_in_process(
    ctx: click.Context, commands: list[dict[str, Any]], index: bool
) -> tuple[dict[str, Any], list[Any]]:
    with open_service(ctx) as svc:
        before = svc.stats()["counts"]
        results: list[dict[str, Any]] = []
        for i in range(0, len(commands), CHUNK):
            results += svc.apply_batch(commands[i : i + CHUNK])
        after = svc.stats()["counts"]
        if index:
            try:
                if svc.indexer() is not None:
                    click.echo("indexing the demo sessions for recall…", err=True)
                    svc.sync_index()
            except Exception as exc:  # the index is derived: `memviewer reindex` can rebuild it
                click.echo(
                    f"warning: vector index not updated ({type(exc).__name__}: {exc}); "
                    "run `memviewer reindex` later",
                    err=True,
                )
    return _created(before, after), results


def _exe() -> str:
    """How to call memviewer again from this shell: bare when it is on PATH, else the path of
    the script that runs now (``.venv/bin/memviewer`` after the README's first command)."""
    import os
    import shutil
    import sys

    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == "memviewer" and shutil.which("memviewer") != os.path.abspath(argv0):
        try:
            return os.path.relpath(argv0) if not os.path.relpath(argv0).startswith("..") else argv0
        except ValueError:
            return argv0
    return "memviewer"


@click.command("demo")
@click.option("--live", is_flag=True, help="simulate an agent publishing in real time through the hub")
@click.option("--rate", type=float, default=2.0, show_default=True, help="live: turns per second")
@click.option("--duration", type=float, default=None, help="live: stop after this many seconds")
@click.option("--seed", type=int, default=None, help="live: random seed")
@click.option(
    "--remove",
    is_flag=True,
    help="delete every session the demo made (scenario and --live), nothing else",
)
@click.option("--no-index", is_flag=True, help="do not update the vector index after loading or removing")
@click.option("--json", "as_json", is_flag=True, help="print what was created (or removed) as JSON")
@click.pass_context
def demo_cmd(
    ctx: click.Context,
    live: bool,
    remove: bool,
    rate: float,
    duration: float | None,
    seed: int | None,
    no_index: bool,
    as_json: bool,
) -> None:
    """Load a realistic two-week demo history (idempotent), or --live: publish as an agent would;
    --remove deletes what either made.

    Without --live the data goes through the hub when one runs on the socket,
    otherwise straight into the store. Running it twice creates nothing new.
    """
    settings = settings_of(ctx)
    if remove:
        if live:
            fail("--remove and --live do not go together", hint="stop the live demo, then run --remove")
        from memviewer.commands.demo_remove import remove_demo

        remove_demo(ctx, as_json=as_json, index=not no_index)
        return
    if live:
        _run_live(settings, rate, duration, seed, as_json)
        return
    from memviewer.commands.via_hub import served_socket
    from memviewer.demo.scenario import TRY, build_scenario, describe

    commands = build_scenario()
    via_hub = served_socket(ctx) is not None  # never another home's hub
    if via_hub:
        created, results = _apply_through_hub(settings.socket_path, commands)
    else:
        created, results = _apply_in_process(ctx, commands, index=not no_index)
    errors = [(c, r["error"]) for c, r in zip(commands, results, strict=True) if "error" in r]
    sc = describe(commands)
    via = f"hub at {settings.socket_path}" if via_hub else "in-process store"
    report = {
        "scenario": sc,
        "created": created,
        "errors": len(errors),
        "via": via,
        "home": str(settings.home_path),
    }
    if as_json:
        emit_json(report)
    else:
        click.echo(
            f"demo scenario: {plural(sc['sessions'], 'session')}, {plural(sc['episodes'], 'episode')}, "
            f"{plural(sc['turns'], 'turn')} (via {via})"
        )
        if any(created.values()):
            summaries = created["compaction_summaries"]
            click.echo(
                f"created: {plural(created['sessions'], 'session')}, "
                f"{plural(created['episodes'], 'episode')}, "
                f"{plural(created['turns'], 'turn')} ({created['archived_turns']:,} archived"
                + (f", plus {plural(summaries, 'compaction summary turn')}" if summaries else "")
                + f"), {plural(created['events'], 'event')}"
            )
        else:
            click.echo("nothing new: the demo data is already loaded")
        click.echo("try:")
        exe = _exe()
        for line in TRY:
            click.echo(f"  {line.replace('memviewer ', exe + ' ', 1)}")
    for cmd, err in errors[:10]:
        click.echo(f"error: {cmd['op']}: {err.get('code')}: {err.get('message')}", err=True)
    if errors:
        ctx.exit(1)


def _run_live(
    settings: Settings, rate: float, duration: float | None, seed: int | None, as_json: bool
) -> None:
    import signal
    import threading

    from memviewer import paths
    from memviewer.client import Publisher
    from memviewer.demo.live import LiveAgent
    from memviewer.wire.probe import probe_hub

    # nan passes a `<= 0` test and inf means "no pause": both flooded the spool.
    if not (math.isfinite(rate) and rate > 0):
        fail(f"--rate must be a positive number of turns per second, not {rate}")
    if duration is not None and not (math.isfinite(duration) and duration > 0):
        fail(
            f"--duration must be a positive number of seconds, not {duration}",
            hint="leave --duration out to run until Ctrl-C",
        )
    if probe_hub(settings.socket_path) is None:
        click.echo(
            f"no hub on {settings.socket_path} yet: spooling until one starts "
            "(run `memviewer serve` or `memviewer`)",
            err=True,
        )
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    pub = Publisher(
        settings.socket_path,
        paths.spool_dir(settings.home_path),
        home=settings.home_path,
        client_name="memviewer.demo",
    )
    agent = LiveAgent(
        pub,
        rate=rate,
        seed=seed,
        stop=stop,
        out=(lambda _m: None) if as_json else (lambda m: click.echo(m, err=True)),
    )
    try:
        counts = agent.run(duration)
    finally:
        delivered = pub.flush(timeout=10.0)
        pub.close(timeout=2.0)
    report = {
        **counts,
        "delivered": delivered,
        "errors": pub.errors,
        **{k: v for k, v in pub.stats().items() if k in ("acked_commands", "spooled_commands")},
    }
    if as_json:
        emit_json(report)
    else:
        click.echo(
            f"live demo stopped: {plural(counts['sessions'], 'session')}, "
            f"{plural(counts['episodes'], 'episode')}, {plural(counts['turns'], 'turn')}; "
            + ("all delivered" if delivered else "the rest is spooled until a hub starts")
            + "; `memviewer demo --remove` deletes the demo's sessions",
            err=True,
        )


COMMANDS = (demo_cmd,)
