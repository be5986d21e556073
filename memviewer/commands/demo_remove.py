"""``memviewer demo --remove``: delete every session the demo made, and nothing else.

Which sessions those are is ``memviewer.demo.remove``'s answer (the scenario's fixed ids,
the live agent's names and mark). Each goes through ``SessionManager.delete_session``, the
path of the viewer's ``D``: as a ``delete_session`` publish command on the hub's writer
thread when a hub serves the home (its indexer then drops the vector rows), otherwise in
this process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from memviewer.commands.common import emit_json, fail_maybe_json, open_service, settings_of
from memviewer.words import plural

if TYPE_CHECKING:
    from memviewer.api import Writer
    from memviewer.service import MemoryService

GONE = "session_not_found"  # deleted by someone else between the listing and the delete


def _delete_through_hub(socket_path: Any, ids: list[str]) -> list[dict[str, Any]]:
    from memviewer.wire.remote import RemoteService

    with RemoteService(socket_path, client="memviewer.demo") as remote:
        return remote.publish([{"op": "delete_session", "session_id": sid} for sid in ids])


def _delete_in_process(svc: Writer, ids: list[str]) -> list[dict[str, Any]]:
    from memviewer.errors import MemviewerError

    results: list[dict[str, Any]] = []
    for sid in ids:
        try:
            results.append({"ok": svc.delete_session(sid)})
        except MemviewerError as exc:
            results.append({"error": exc.to_dict()})
    return results


def _sync_index(svc: MemoryService) -> None:
    """Drop the removed sessions' vector rows now (a hub's indexer does it on its own)."""
    try:
        if svc.indexer() is not None:
            svc.sync_index()
    except Exception as exc:  # the index is derived: `memviewer reindex` can rebuild it
        click.echo(
            f"warning: vector index not updated ({type(exc).__name__}: {exc}); run `memviewer reindex` later",
            err=True,
        )


def remove_demo(ctx: click.Context, *, as_json: bool, index: bool) -> None:
    from memviewer import paths
    from memviewer.commands.via_hub import served_socket
    from memviewer.demo.remove import demo_sessions

    settings = settings_of(ctx)
    via_hub = served_socket(ctx) is not None  # never another home's hub
    via = f"hub at {settings.socket_path}" if via_hub else "in-process store"
    found: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    if paths.db_path(settings.home_path).exists():  # no store: nothing to remove, none created
        with open_service(ctx, readonly=via_hub, json_errors=as_json) as svc:
            with svc.store.read() as conn:
                found = demo_sessions(conn)
            ids = [r["id"] for r in found]
            if ids and via_hub:
                results = _delete_through_hub(settings.socket_path, ids)
            elif ids:
                results = _delete_in_process(svc, ids)
                if index:
                    _sync_index(svc)
    errors = [(r, res["error"]) for r, res in zip(found, results, strict=True) if "error" in res]
    refused = [(r, e) for r, e in errors if e.get("code") != GONE]
    if refused and all("unknown op" in str(e.get("message")) for _, e in refused):
        fail_maybe_json(
            as_json,
            f"the hub at {settings.socket_path} is older than `demo --remove` (no delete_session)",
            hint="restart it (stop `memviewer serve` or quit the viewer that hosts it), then run this again",
            code="invalid_argument",
        )
    removed = [(r, res["ok"]) for r, res in zip(found, results, strict=True) if "ok" in res]
    n = {
        "sessions": len(removed),
        "episodes": sum(int(ok.get("episodes", 0)) for _, ok in removed),
        "turns": sum(int(ok.get("turns", 0)) for _, ok in removed),
    }
    report: dict[str, Any] = {
        "removed": n,
        "session_ids": [r["id"] for r, _ in removed],
        "errors": len(refused),
        "via": via,
        "home": str(settings.home_path),
    }
    if not removed:
        report["note"] = f"nothing to remove: no demo session in {settings.home_path}"
    if as_json:
        emit_json(report)
    elif not removed:
        click.echo(report["note"])
    else:
        click.echo(
            f"removed {plural(n['sessions'], 'demo session')} "
            f"({plural(n['episodes'], 'episode')}, {plural(n['turns'], 'turn')}) "
            f"from {settings.home_path} (via {via})"
        )
    for row, err in refused[:10]:
        click.echo(f"error: {row['id']}: {err.get('code')}: {err.get('message')}", err=True)
    if refused:
        ctx.exit(1)
