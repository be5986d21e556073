"""Who embeds what an import stored, when the import does not wait (the default).

An import returns once its turns are stored and keyword-searchable. The vector index
then catches up in the background:

* a hub serving the home embeds them: its indexer polls SQLite for rows other
  processes committed (``Indexer`` ``POLL_S``);
* without a hub, the import starts ``memviewer reindex --catch-up`` as a detached
  process (a fresh interpreter via ``subprocess``, never ``fork``, running
  ``python -I -m memviewer`` so nothing is imported from the current folder; its own session, so
  closing the terminal does not stop it; output in ``<home>/indexer.log``). It embeds
  until nothing is left and exits; the next hub or viewer start would catch up too.

``import --wait`` keeps the blocking behaviour (returns once everything is recallable).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import click

from memviewer.commands.common import settings_of
from memviewer.words import plural

if TYPE_CHECKING:
    from memviewer.service import MemoryService

LOG_FILE = "indexer.log"
# The installed package in isolated mode (-I): neither the current folder nor
# PYTHONPATH nor the user site can put another ``memviewer`` in front of it.
SELF_COMMAND = (sys.executable, "-I", "-m", "memviewer")


def catch_up_in_background(ctx: click.Context, svc: MemoryService) -> dict[str, Any]:
    """Make sure someone embeds the new turns; returns the lag and who is on it.

    A catch-up this starts is watched until it has written its pid file (it is at work)
    or for ``SPAWN_WATCH_S`` at most; one that exited by then and left turns unembedded
    is reported (``indexer: null``, ``catch_up: {exit_code, log, log_tail}``) and warned
    about on stderr, with the tail of ``indexer.log``.
    """
    from memviewer.wire.embedding import who_embeds

    settings = settings_of(ctx)
    home = settings.home_path
    lag = svc.index_lag()
    if lag["lag"] == 0:
        return {**lag, "indexer": None}
    embedding = who_embeds(settings)
    if embedding.indexer == "hub":
        return {**lag, "indexer": "hub"}
    if embedding.indexer == "background":
        return {**lag, "indexer": "background", "pid": embedding.pid, "log": str(home / LOG_FILE)}
    if embedding.idle_hub is not None:  # a `serve --no-index` hub: a catch-up would leave it to it
        return {**lag, **embedding.public()}
    log_file = home / LOG_FILE
    start = log_file.stat().st_size if log_file.exists() else 0
    proc = spawn_catch_up(ctx)
    code = watch_start(proc, home)
    if code is None:
        return {**lag, "indexer": "background", "pid": proc.pid, "log": str(log_file)}
    lag = svc.index_lag()  # it exited: did it finish (a few turns), or die?
    embedding = who_embeds(settings)
    if lag["lag"] == 0 or embedding.indexer is not None:
        return {**lag, "indexer": embedding.indexer, **({"pid": embedding.pid} if embedding.pid else {})}
    tail = log_tail(log_file, start)
    click.echo(
        f"warning: the background indexer (`memviewer reindex --catch-up`, pid {proc.pid}) exited "
        f"at once with status {code}; {plural(lag['lag'], 'turn')} not embedded. Its log ({log_file}):",
        err=True,
    )
    for line in tail:
        click.echo(f"  {line}", err=True)
    click.echo(f"hint: {embedding.fix}", err=True)
    return {
        **lag,
        **embedding.public(),
        "catch_up": {"exit_code": code, "log": str(log_file), "log_tail": tail},
    }


#: How long an import waits for the catch-up it started to show it is at work (its pid
#: file) before trusting it; it writes that file about half a second after its start.
SPAWN_WATCH_S = 3.0
LOG_TAIL_LINES = 12


def watch_start(proc: subprocess.Popen[bytes], home: Any, timeout: float = SPAWN_WATCH_S) -> int | None:
    """The exit status of a catch-up that ended before it was seen at work, else None
    (it wrote its pid file, or is still starting after ``timeout``)."""
    from memviewer.index.progress import catch_up_pid

    deadline = time.monotonic() + timeout
    while True:
        code = proc.poll()
        if code is not None:
            return code
        if catch_up_pid(home) == proc.pid or time.monotonic() >= deadline:
            return None
        time.sleep(0.02)


def log_tail(path: Any, start: int = 0, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last ``lines`` lines written to ``path`` after byte ``start`` (this run's)."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            text = f.read()[-64_000:].decode("utf-8", errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]


def spawn_catch_up(ctx: click.Context) -> subprocess.Popen[bytes]:
    """Start a detached ``memviewer reindex --catch-up`` on this home."""
    settings = settings_of(ctx)
    root = ctx.find_root().params
    args = [*SELF_COMMAND, "--home", str(settings.home_path)]
    if root.get("config_file"):
        args += ["--config", str(root["config_file"])]
    if root.get("socket_path"):
        args += ["--socket", str(root["socket_path"])]
    args += ["reindex", "--catch-up"]
    settings.home_path.mkdir(parents=True, exist_ok=True)
    with open(settings.home_path / LOG_FILE, "ab") as log:
        return subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(os.environ),
        )


def describe(info: dict[str, Any]) -> str:
    """The line an import prints about the vector index."""
    from memviewer.present.index_words import describe as lag_text

    if not info.get("lag"):
        return "keyword search and recall are ready"
    who = {
        "hub": "the hub's indexer embeds them",
        "background": f"a background indexer embeds them (pid {info.get('pid')}, log {info.get('log')})",
    }.get(str(info.get("indexer")))
    if who is None:
        from memviewer.present.index_words import NO_INDEXER_FIX

        who = f"no indexer runs: {info.get('fix') or NO_INDEXER_FIX}"
    return (
        f"keyword search is ready; {lag_text(info)}: {who}. "
        "`memviewer doctor` shows progress; `import --wait` waits for it"
    )


def run_catch_up(ctx: click.Context) -> dict[str, Any]:
    """``reindex --catch-up``: embed until the watermark covers every committed turn.

    A hub serving the home does this itself (then nothing happens here). A pid file in
    the lance folder tells other imports that this process is at work; two at once are
    harmless (the index's write lock serialises them; the second finds nothing to do).
    """
    from memviewer.commands.common import open_service
    from memviewer.index.progress import CATCH_UP_PID
    from memviewer.paths import lance_dir
    from memviewer.wire.probe import serving_hub

    settings = settings_of(ctx)
    if serving_hub(settings) is not None:
        return {"added_turns": 0, "message": "a hub serves this home: its indexer catches up"}
    folder = lance_dir(settings.home_path)
    folder.mkdir(parents=True, exist_ok=True)
    pid_file = folder / CATCH_UP_PID
    pid_file.write_text(str(os.getpid()), encoding="ascii")
    added = 0
    healed: dict[str, Any] = {}
    try:
        with open_service(ctx) as svc:
            indexer = svc.indexer()
            if indexer is None:
                return {"added_turns": 0, "message": "no vector index in this install"}
            while True:  # imports that commit meanwhile are picked up too
                report = indexer.sync()
                step = int(report.get("added_turns", 0) or 0)
                added += step
                healed = healed or report.get("healed") or {}  # what the first pass repaired
                if svc.index_lag()["lag"] == 0 or step == 0:
                    break
    finally:
        if pid_file.exists() and pid_file.read_text(encoding="ascii").strip() == str(os.getpid()):
            pid_file.unlink()
    message = f"embedded {plural(added, 'turn')}; the index is up to date"
    repaired = [
        f"{what} {n}" if isinstance(n, int) else what
        for what, n in (
            ("re-embedded lost turns:", healed.get("turns", 0)),
            ("wrote missing summaries:", healed.get("summaries", 0)),
            ("rebuilt indexes:", len(healed.get("indexes") or [])),
        )
        if n
    ]
    if repaired:
        message = f"repaired the index ({', '.join(repaired)}); {message}"
    foreign = int(healed.get("foreign_turns", 0) or 0) + int(healed.get("foreign_summaries", 0) or 0)
    if foreign:
        message += (
            f"; it also holds {plural(foreign, 'row')} that SQLite does not have: run `memviewer reindex` "
            "to rebuild it from SQLite"
        )
    out: dict[str, Any] = {"added_turns": added, "message": message}
    if healed:
        out["healed"] = healed
    return out
