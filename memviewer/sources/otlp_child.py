"""The OTLP receiver's own process: HTTP, decoding, mapping and the queue's fsync off the hub's GIL.

The hub binds the port and starts this process (``multiprocessing``'s ``spawn``: a fresh
interpreter, never a fork of a hub whose LanceDB and SQLite are open) with the listening
socket and one pipe. Here an in-process ``OtlpReceiver`` (without a drain) answers the
exporters: it maps, writes each accepted batch to the home's queue (``otlp_queue``) and says
so on the pipe (``queued``) before it answers, so the hub's queue learns every file in order
and its drain stores them through the writer. The mapper's memory across requests (the turns
sent per conversation, a trace's session) lives here, as it did in the hub; a restart forgets
it as a hub restart does (the store answers the resent turns as no-ops).

Pipe messages, child → hub: ``("ready", address)``, ``("queued", name, size)``,
``("status", dict)`` (after each answer, and twice a second while something changed);
hub → child: ``("pending", bytes)`` (what waits to be stored: the 429 bound) and ``("stop",)``.
The child dies with the hub: the pipe's end (EOF) stops it, and on Linux the kernel's
parent-death signal too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memviewer.sources.otlp_queue import DurableQueue

log = logging.getLogger("memviewer.sources.otlp")

PUSH_S = 0.5  # status pushed at most this long after a change that no answer carried


class Link:
    """The child's end of the pipe; ``send`` from the loop and from the mapping thread."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._lock = threading.Lock()

    def send(self, message: tuple[Any, ...]) -> None:
        with self._lock:
            self.conn.send(message)


class ChildQueue(DurableQueue):
    """Writes batches durably and tells the hub each one; the hub's queue drains them."""

    def __init__(self, folder: Path, link: Link, max_bytes: int) -> None:
        super().__init__(folder, max_bytes)
        self.link = link
        self._waiting.clear()  # the hub's queue keeps the order; this one only writes

    def put(self, commands: list[dict[str, Any]]) -> None:
        path, size = self.write(commands)
        with self._lock:
            self.pending_bytes += size  # until the hub's next ``pending``
        self.link.send(("queued", path.name, size))


def _die_with_parent() -> None:
    """Linux: SIGKILL when the hub's thread that started us ends (the pipe's EOF is the rule)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def main(receiver_class: Any, sock: Any, conn: Any, config: dict[str, Any]) -> None:
    """The process's entry (``spawn``): serve until the hub says stop or goes away.
    ``receiver_class`` is ``otlp_http.OtlpReceiver`` (pickled by name: no import back up to it)."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ctrl-c is the hub's to handle
    level = config.get("log_level", "WARNING")
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    asyncio.run(_serve(receiver_class, sock, conn, config))


async def _serve(receiver_class: Any, sock: Any, conn: Any, config: dict[str, Any]) -> None:
    link = Link(conn)
    queue = ChildQueue(Path(config["queue"]), link, config["max_queue_bytes"])
    rx = receiver_class(
        config["host"],
        config["port"],
        token=config["token"],
        token_file=config["token_file"],
        max_body=config["max_body"],
        max_connections=config["max_connections"],
        max_inflight_bytes=config["max_inflight_bytes"],
        keepalive_s=config["keepalive_s"],
        queue=queue,
        drain=False,
        sock=sock,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    last: list[Any] = [None]

    def push() -> None:
        st = rx.status()
        key = (st["counters"], st["ack_ms"]["n"], st["inflight_bytes"], st["connections"], st["last_error"])
        if key != last[0]:
            last[0] = key
            with contextlib.suppress(OSError, ValueError):
                link.send(("status", st))

    def readable() -> None:
        try:
            while conn.poll():
                message = conn.recv()
                if message[0] == "pending":
                    queue.pending_bytes = int(message[1])
                elif message[0] == "stop":
                    stop.set()
        except (EOFError, OSError):  # the hub is gone
            loop.remove_reader(conn.fileno())
            stop.set()

    await rx.start(None)
    rx.on_answer = push
    loop.add_reader(conn.fileno(), readable)
    link.send(("ready", rx.address))

    async def pusher() -> None:
        while True:
            await asyncio.sleep(PUSH_S)
            push()

    ticker = asyncio.create_task(pusher())
    await stop.wait()
    ticker.cancel()
    await rx.stop()
    push()
    with contextlib.suppress(OSError, ValueError):
        loop.remove_reader(conn.fileno())
        conn.close()


@contextlib.contextmanager
def without_cwd_on_path() -> Iterator[None]:
    """``spawn`` copies ``sys.path`` to the child: the current folder's entries ('' and the
    cwd) are left out, so the child imports the package the hub runs (its folder is kept, or
    put first), never another ``memviewer/`` folder where the hub happened to be started."""
    import memviewer

    saved = list(sys.path)
    here = os.path.abspath(os.getcwd())
    root = os.path.dirname(os.path.dirname(os.path.abspath(memviewer.__file__)))
    kept = [p for p in saved if p not in ("", ".") and (os.path.abspath(p) != here or p == root)]
    sys.path[:] = kept if root in kept or _finds_it(kept, root) else [root, *kept]
    try:
        yield
    finally:
        sys.path[:] = saved


def _finds_it(path: list[str], root: str) -> bool:
    """Whether ``path`` (an editable install's finder aside) leads to the package in ``root``."""
    import importlib.machinery

    spec = importlib.machinery.PathFinder.find_spec("memviewer", path)
    origin = spec.origin if spec is not None else None
    return origin is not None and os.path.dirname(os.path.dirname(os.path.abspath(origin))) == root
