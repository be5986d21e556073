"""``memviewer doctor``: every check returns ``{name, ok, detail}``.

Checks that need an optional layer import it lazily, so a broken layer shows
up as a failed check with its error instead of crashing the command.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from memviewer import paths
from memviewer.config import Settings

Check = dict[str, Any]


def _store(settings: Settings) -> Check:
    from memviewer.store.db import Store
    from memviewer.store.migrations import latest_version

    home = settings.home_path
    if home.exists() and not home.is_dir():  # every command refuses such a home
        return {"name": "store", "ok": False, "detail": f"{home} is a file, not a memviewer home folder"}
    db = paths.db_path(home)
    if not db.exists():
        return {"name": "store", "ok": True, "detail": f"{db} (not created yet)"}
    store = Store.open(db, readonly=True)
    try:
        result = store.integrity_check()
        version = store.schema_version()
    finally:
        store.close()
    ok = result == "ok" and version == latest_version()
    return {
        "name": "store",
        "ok": ok,
        "detail": f"{db}: integrity {result}, schema v{version} (latest v{latest_version()})",
    }


def _fts(settings: Settings) -> Check:
    from memviewer.recall.keyword import fts_status

    status = fts_status(settings)
    return {"name": "keyword index", "ok": bool(status["ok"]), "detail": status["detail"]}


def _model(settings: Settings) -> Check:
    """Load the model and embed one probe: a corrupt file fails here, not in the next import."""
    import time

    from memviewer.errors import ModelChecksumError, ModelNotFoundError
    from memviewer.index.embedder import (
        OnnxEmbedder,
        default_model_files,
        probe_embedder,
    )

    try:
        if settings.model_dir:
            from pathlib import Path

            where = str(Path(settings.model_dir).expanduser())
        else:
            where = ", ".join(str(f) for f in default_model_files())
        started = time.monotonic()
        embedder = OnnxEmbedder(
            settings.model_dir, threads=settings.embed_threads or None, batch_size=settings.embed_batch
        )
        probe_embedder(embedder)
    except (ModelNotFoundError, ModelChecksumError, ValueError) as exc:
        return {"name": "model", "ok": False, "detail": str(exc)}
    ms = (time.monotonic() - started) * 1000
    return {
        "name": "model",
        "ok": True,
        "detail": f"{where}: {embedder.name} (dim {embedder.dim}), loaded and embedded a probe "
        f"in {ms:.0f} ms",
    }


def _index(settings: Settings) -> Check:
    """The index against SQLite; a lag past the indexer's normal delay fails and says who
    embeds the waiting turns (``who_embeds``), or that nothing does and what to run."""
    from memviewer.index.indexer import index_status
    from memviewer.wire.embedding import who_embeds

    status = index_status(settings, lambda: who_embeds(settings))
    check = {"name": "vector index", "ok": bool(status["ok"]), "detail": status["detail"]}
    for key in ("integrity", "lag", "indexer", "fix"):  # integrity: SQLite against the index
        if key in status:
            check[key] = status[key]
    return check


LOW_DISK_BYTES = 512 * 1024**2  # below this, writes (and LanceDB's compaction) are at risk


def _size(path: Any) -> int:
    """Bytes under ``path`` (a file or a folder; 0 when missing)."""
    if path.is_file():
        return cast("int", path.stat().st_size)
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def _mib(n: int) -> str:
    if n < 1024**2:
        return f"{n / 1024:,.0f} KiB"
    return f"{n / 1024**2:,.0f} MiB" if n < 10 * 1024**3 else f"{n / 1024**3:,.1f} GiB"


def _disk(settings: Settings) -> Check:
    """Free space where the home lives: a full disk makes the hub refuse publishes (they are
    kept by the publishers and resent), so say it before it happens."""
    import shutil

    home = settings.home_path
    probe = home
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    usage = shutil.disk_usage(probe)
    db = paths.db_path(home)
    store = sum(_size(db.with_name(db.name + suffix)) for suffix in ("", "-wal", "-shm"))
    index = _size(paths.lance_dir(home))
    ok = usage.free >= LOW_DISK_BYTES
    detail = (
        f"{_mib(usage.free)} free of {_mib(usage.total)} at {probe}; "
        f"store {_mib(store)}, vector index {_mib(index)}"
    )
    if not ok:
        detail += f"; below {_mib(LOW_DISK_BYTES)}: free space before the hub runs out"
    return {"name": "disk", "ok": ok, "detail": detail}


def _hub(settings: Settings) -> Check:
    """Which hub serves this home (``serving_hub`` decides): another home's hub or another
    user's socket fails the check; refused commands since the hub started are shown."""
    from memviewer.errors import MemviewerError
    from memviewer.wire.probe import checked_hello, serving_hub

    try:
        sock = serving_hub(settings)
    except MemviewerError as exc:
        return {"name": "hub", "ok": False, "detail": exc.message}
    if sock is None:
        return {"name": "hub", "ok": True, "detail": f"no hub on {settings.socket_path}"}
    hello = checked_hello(sock, settings.home_path) or {}
    detail = f"hub {hello.get('server_version', 'unknown')} on {sock} serves {hello.get('home') or '?'}"
    try:
        from memviewer.wire.remote import RemoteService

        with RemoteService(sock) as remote:
            hub = remote.stats().get("hub", {})
    except Exception as exc:  # the hub went away between the two calls
        return {"name": "hub", "ok": True, "detail": f"{detail}; stats unavailable: {exc}"}
    refused = int(hub.get("counters", {}).get("refused_commands", 0))
    if refused:
        by_code = ", ".join(f"{k} {v}" for k, v in sorted((hub.get("refused_by_code") or {}).items()))
        last = hub.get("last_refused") or {}
        detail += (
            f"; {refused} commands refused since it started ({by_code}); last: "
            f"{last.get('op')}: {last.get('code')}: {last.get('message')}"
        )
    else:
        detail += "; 0 commands refused since it started"
    return {"name": "hub", "ok": True, "detail": detail, "refused_commands": refused}


def _permissions(settings: Settings) -> Check:
    """The home is private: folders 0700, files 0600. Looser modes (an older release, a
    copy, a umask) are tightened here; anything owned by another user fails the check."""
    import os
    import stat

    home = settings.home_path
    if not home.is_dir():
        return {"name": "permissions", "ok": True, "detail": f"{home} (not created yet)"}
    uid = os.getuid()
    tightened: list[str] = []
    foreign: list[str] = []
    failed: list[str] = []
    count = 0
    for root, dirs, files in os.walk(home):
        for name in [".", *dirs, *files]:
            path = os.path.join(root, name) if name != "." else root
            if name == "." and root != str(home):
                continue  # each folder is seen once, as an entry of its parent
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                continue  # never chmod through a link
            count += 1
            rel = os.path.relpath(path, home)
            if st.st_uid != uid:
                foreign.append(f"{rel} (uid {st.st_uid})")
                continue
            mode = stat.S_IMODE(st.st_mode)
            if mode & 0o077:
                try:
                    os.chmod(path, mode & 0o700)  # the owner keeps its bits; group and others lose theirs
                    tightened.append(f"{rel} {mode:04o}")
                except OSError as exc:
                    failed.append(f"{rel}: {exc.strerror or exc}")
    detail = f"{home}: {count} paths, folders 0700 and files 0600"
    if tightened:
        shown = ", ".join(tightened[:5]) + (" …" if len(tightened) > 5 else "")
        detail += f"; tightened {len(tightened)} that others could read ({shown})"
    if foreign:
        detail += f"; owned by another user: {', '.join(foreign[:5])}"
    if failed:
        detail += f"; could not tighten: {', '.join(failed[:5])}"
    return {
        "name": "permissions",
        "ok": not foreign and not failed,
        "detail": detail,
        "tightened": len(tightened),
    }


def _sources(settings: Settings) -> Check:
    """The running hub's sources (PraisonAI folders, OTLP): connected, and what bad input they met."""
    from memviewer.sources.status import doctor_check
    from memviewer.wire.probe import probe_hub

    if probe_hub(settings.socket_path) is None:
        return {"name": "sources", "ok": True, "detail": "no hub running"}
    from memviewer.wire.remote import RemoteService

    with RemoteService(settings.socket_path) as remote:
        return doctor_check(list(remote.stats().get("hub", {}).get("sources", [])))


CHECKS: tuple[Callable[[Settings], Check], ...] = (
    _store,
    _fts,
    _model,
    _index,
    _disk,
    _permissions,
    _hub,
    _sources,
)


def run_checks(settings: Settings) -> list[Check]:
    out = []
    for check in CHECKS:
        name = check.__name__.strip("_")
        try:
            out.append(check(settings))
        except Exception as exc:  # report, don't crash
            out.append({"name": name, "ok": False, "detail": f"{type(exc).__name__}: {exc}"})
    return out
