"""``memviewer serve`` (the hub in the foreground) and ``memviewer tail`` (the event stream)."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from memviewer.commands.common import dumps, fail, settings_of, short
from memviewer.words import plural

if TYPE_CHECKING:
    from memviewer.config import Settings


@click.command("serve")
@click.option("--no-index", is_flag=True, help="do not start the background vector indexer")
@click.option(
    "--watch-praisonai",
    "watch_praisonai",
    multiple=True,
    metavar="DIR",
    help="follow a PraisonAI session folder (repeatable; setting watch_praisonai)",
)
@click.option(
    "--otlp",
    default=None,
    metavar="HOST:PORT",
    help="receive OpenTelemetry GenAI traces over OTLP/HTTP (a bare PORT listens on 127.0.0.1)",
)
@click.option(
    "--listen",
    default=None,
    metavar="HOST:PORT",
    help="also serve on TCP with TLS; every connection needs a token (setting listen)",
)
@click.option("--tls-cert", default=None, metavar="FILE", help="certificate chain (PEM) for --listen")
@click.option("--tls-key", default=None, metavar="FILE", help="private key (PEM) for --listen")
@click.option("--plaintext", is_flag=True, help="--listen on loopback without TLS (tests; refused elsewhere)")
@click.pass_context
def serve_cmd(
    ctx: click.Context,
    no_index: bool,
    watch_praisonai: tuple[str, ...],
    otlp: str | None,
    listen: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    plaintext: bool,
) -> None:
    """Run the hub in the foreground (Ctrl-C or SIGTERM stops it cleanly).

    Agents publish to it through memviewer.client.Publisher; the TUI, `tail`
    and the CLI read through it. Stopping or restarting it never closes an
    agent's episodes: agents spool meanwhile and replay into the same episodes.
    It serves one home, on that home's own socket.
    """
    import asyncio
    import signal

    from memviewer import __version__
    from memviewer.service import MemoryService
    from memviewer.sources import build_sources
    from memviewer.wire.hub import Hub, HubError
    from memviewer.wire.hub_tcp import parse_listen

    try:
        settings = settings_of(ctx).with_overrides(
            watch_praisonai=list(watch_praisonai) or None,
            otlp=otlp,
            listen=listen,
            tls_cert=tls_cert,
            tls_key=tls_key,
        )
        sources = build_sources(settings)
        spec = (
            parse_listen(settings.listen, cert=settings.tls_cert, key=settings.tls_key, plaintext=plaintext)
            if settings.listen
            else None
        )
    except (ValueError, HubError) as exc:
        fail(str(exc))
    sock = settings.socket_path
    from memviewer.errors import MemviewerError
    from memviewer.wire.probe import checked_hello

    try:
        running = checked_hello(sock, settings.home_path)  # another home's hub: that error
    except MemviewerError as exc:
        fail(exc.message, hint=exc.hint)
    if running is not None:
        fail(
            f"a memviewer hub ({running.get('server_version', 'unknown')}) is already running "
            f"for {settings.home_path} on {sock}",
            hint="use that one, or stop it first",
        )
    service = MemoryService(settings)

    async def main() -> dict[str, Any]:
        hub = Hub(
            service,
            sock,
            start_indexer=not no_index,
            sources=sources,
            listen=spec,
        )
        await hub.start()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, hub.request_stop)
        runs = "; ".join(source_lines([source.status() for source in hub.sources]))
        if hub.info()["listen"]:
            runs = f"and on {hub.info()['listen']} (token required); {runs}"
        click.echo(
            f"memviewer hub {__version__} listening on {sock} (home {settings.home_path}); "
            f"{runs}; Ctrl-C to stop",
            err=True,
        )
        for source in hub.sources:  # shown once, when just made (as a notebook server does)
            if source.kind != "otlp":
                continue
            from memviewer.sources.otlp_http import OtlpReceiver  # loaded already: build_sources made it

            if isinstance(source, OtlpReceiver) and source.token_new:
                click.echo(f"new OTLP token (kept in {source.token_file}): {source.token}", err=True)
        await hub.serve_forever()
        return {
            "abandoned": hub.last_close_report.get("abandoned_episodes", []),
            "open": hub.last_close_report.get("open_episodes", []),
        }

    try:
        report = asyncio.run(main())
    except HubError as exc:
        service.close()
        same_home = "already running for" in str(exc)
        fail(
            str(exc),
            hint="one hub serves a home: connect to it, or stop it first"
            if same_home
            else "pass --socket PATH to run a hub on another socket",
        )
    service.close()
    click.echo(
        f"hub stopped; {plural(len(report['open']), 'open episode')} left open "
        "(their agents' publishers end them; a restarted hub takes their turns)",
        err=True,
    )
    from memviewer.index.indexer import exit_past_busy_indexer

    exit_past_busy_indexer(lambda note: click.echo(f"note: {note}", err=True))


def source_lines(statuses: list[dict[str, Any]]) -> list[str]:
    """What the start line says of each source the hub runs (``source.status()``): the folder
    it watches, the address it listens on (the bound port when 0 was asked), or why not."""
    if not statuses:
        return ["no sources (agents publish; --watch-praisonai DIR and --otlp PORT add some)"]
    out = []
    for st in statuses:
        if st["kind"] == "praisonai":
            out.append(f"watching PraisonAI sessions in {st['target']}")
        elif st["kind"] == "otlp" and st["connected"]:
            host, _, port = str(st["target"]).rpartition(":")
            shown = f"[{host}]" if ":" in host else host
            out.append(f"receiving OTLP/HTTP on http://{shown}:{port} (/v1/traces, /v1/logs)")
            if st.get("token_file"):
                out.append(f"OTLP: every request needs 'Authorization: Bearer <token>' ({st['token_file']})")
        elif st["kind"] == "otlp":
            why = st["last_error"]  # it names the address ("cannot listen on HOST:PORT: …")
            out.append(f"OTLP/HTTP not started: {why}" if why else f"OTLP/HTTP on {st['target']} not started")
        else:
            out.append(f"{st['kind']} {st['target']}")
    return out


# -- tail --------------------------------------------------------------------------------
def _clock(ts: float) -> str:
    return datetime.fromtimestamp(ts).strftime("%m-%d %H:%M:%S")


def format_event(ev: Any, as_json: bool) -> str:
    """One output line for an ``EventRecord``: NDJSON or a readable summary (the one the
    viewer's Live screen shows, ``memviewer.wire.event_summary``)."""
    from memviewer.wire.event_summary import event_summary

    if as_json:
        return dumps(ev.to_dict())
    sid = (ev.session_id or "-")[-8:]
    eid = (ev.episode_id or "-")[-8:]
    what = short(event_summary(ev.kind, ev.payload), 120)
    return f"{ev.seq:>7} {_clock(ev.ts)} {ev.kind:<19} s:{sid:<8} e:{eid:<8} {what}"


def _write(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _stored_events(
    settings: Settings, from_seq: int, kinds: list[str] | None, session: str | None, limit: int | None
) -> tuple[int, Any]:
    """(last_seq, page reader) from the hub serving the home if one answers, else the store read-only."""
    from memviewer.wire.probe import serving_hub
    from memviewer.wire.remote import hub_address

    found: Any = hub_address(settings) or serving_hub(settings)  # a remote hub (--hub) first
    if found is not None:
        from memviewer.wire.remote import RemoteService

        remote = RemoteService(found)
        return remote.last_seq, lambda cur, n: remote.events(cur, n, kinds, session)
    from memviewer import paths
    from memviewer.errors import MemviewerError
    from memviewer.service import open_store

    db = paths.db_path(settings.home_path)
    if not db.exists():
        return 0, lambda cur, n: []
    try:  # a broken or foreign store is a clear error, not a traceback
        store = open_store(settings.home_path, readonly=True)
    except MemviewerError as exc:
        fail(exc.message, hint=exc.hint)
    return store.refresh_last_seq(), lambda cur, n: store.events_since(cur, n, kinds, session)


@click.command("tail")
@click.option(
    "--from-seq",
    type=int,
    default=None,
    help="print events after this seq (0 = from the start; default: the last 10)",
)
@click.option("--no-follow", is_flag=True, help="print what is stored and exit")
@click.option(
    "--json", "as_json", is_flag=True, help="NDJSON lines {seq, kind, ts, session_id, episode_id, payload}"
)
@click.option("--kind", "kinds", multiple=True, help="only this event kind (repeatable)")
@click.option("--session", "session_id", default=None, help="only events of this session")
@click.pass_context
def tail_cmd(
    ctx: click.Context,
    from_seq: int | None,
    no_follow: bool,
    as_json: bool,
    kinds: tuple[str, ...],
    session_id: str | None,
) -> None:
    """Events as they happen (resumes by seq after a hub restart, no gaps, no duplicates).

    With --no-follow and no hub running, the store is read directly (read-only).
    """
    from memviewer.events import EVENT_KINDS

    bad = [k for k in kinds if k not in EVENT_KINDS]
    if bad:
        fail(
            f"{plural(len(bad), 'unknown event kind')}: {', '.join(bad)}",
            hint="kinds: " + ", ".join(EVENT_KINDS),
        )
    if from_seq is not None and not 0 <= from_seq <= 2**63 - 1:
        fail("--from-seq must be between 0 and 2**63-1")
    settings = settings_of(ctx)
    kind_list = list(kinds) or None
    try:
        if no_follow or from_seq is None:
            last, page = _stored_events(settings, from_seq or 0, kind_list, session_id, None)
            start = from_seq if from_seq is not None else max(0, last - 10)
            if no_follow:
                cursor = start
                while True:
                    events = page(cursor, 1000)
                    for ev in events:
                        _write(format_event(ev, as_json))
                        cursor = ev.seq
                    if len(events) < 1000:  # not `cursor >= last`: another writer may add more
                        break
                return
            from_seq = start
        _follow(settings, from_seq, kind_list, session_id, as_json)
    except BrokenPipeError:
        sys.stderr.close()
    except KeyboardInterrupt:
        pass


def _follow(
    settings: Settings, from_seq: int, kinds: list[str] | None, session_id: str | None, as_json: bool
) -> None:
    import asyncio

    from memviewer.wire.remote import hub_address
    from memviewer.wire.subscriber import ConnectionState, Subscriber

    remote = hub_address(settings)  # --hub tls://…: follow that hub

    def note(st: ConnectionState) -> None:
        if st.status == "reconnecting" and st.attempt > 1:
            return  # one line per outage is enough
        msg = {
            "connected": f"connected to {remote or settings.socket_path}",
            "resumed": "resumed",
            "lagged": "lagged behind",
            "reconnecting": "waiting for the hub",
            "closed": "closed",
        }.get(st.status, st.status)
        click.echo(f"# {msg} (seq {st.last_seq}){': ' + st.detail if st.detail else ''}", err=True)

    async def run() -> None:
        sub = Subscriber(
            remote or settings.socket_path,
            home=settings.home_path,
            from_seq=from_seq,
            kinds=kinds,
            session_id=session_id,
            on_state=note,
            client="memviewer.tail",
        )
        async for ev in sub.stream():
            _write(format_event(ev, as_json))

    asyncio.run(run())


COMMANDS = (serve_cmd, tail_cmd)
