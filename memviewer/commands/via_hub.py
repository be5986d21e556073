"""``recall`` and ``search`` through the hub that serves the home (a warm CLI).

When a hub serves the home it has the store, the keyword index and the embedding model
open and warm; asking it costs one socket round trip. Doing the work in this process
would first import SQLAlchemy's query layer, LanceDB, onnxruntime and numpy and load the
model (about 2 s). Only the standard library, ``memviewer.api`` and ``memviewer.wire`` are
imported on this path; the results are the hub's JSON, exactly what ``MemoryService``
returns in-process.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import TYPE_CHECKING, Any, cast

import click

from memviewer.commands.common import settings_of

if TYPE_CHECKING:
    from pathlib import Path

    from memviewer.api import Reader


def served_socket(ctx: click.Context) -> Path | None:
    """The socket of the hub serving this home as the root group found it at the command's
    start (one probe per command); probed here only for commands the root does not probe
    for (``config``, ``doctor``). A long command (an import) probes again where it matters."""
    root = ctx.find_root().obj or {}
    if "hub_socket" in root:
        return cast("Path | None", root["hub_socket"])
    from memviewer.wire.probe import serving_hub

    return serving_hub(settings_of(ctx))


def hub_reader(ctx: click.Context) -> Reader | None:
    """The hub's reader (a ``RemoteService``) when a hub serves this home, else None.

    The root group has probed which hub serves the home (``serving_connection``, once per
    command) and kept the connection that said ``hello``: the reader goes on over it, so a
    command opens one connection to the hub (it opened four: three probes and a reader)."""
    root = ctx.find_root().obj or {}
    if "hub_socket" in root:
        if root["hub_socket"] is None:
            return None
        from memviewer.errors import MemviewerError
        from memviewer.wire.remote import RemoteService

        probe_conn = root.pop("hub_connection", None)
        if probe_conn is not None:
            hello = root["hub_hello"]
            return RemoteService.adopt(root["hub_socket"], probe_conn, hello, client="memviewer.cli")
        remote = RemoteService(root["hub_socket"], client="memviewer.cli")
        try:
            remote.hello()
        except (OSError, MemviewerError):  # it went away since the probe: in-process
            remote.close()
            return None
        return remote
    from memviewer.api import open_reader
    from memviewer.wire.probe import serving_hub

    settings = settings_of(ctx)
    try:
        if serving_hub(settings) is None:
            return None
    except OSError:
        return None
    from memviewer.wire.remote import RemoteService

    reader = open_reader(settings, client="memviewer.cli")
    if isinstance(reader, RemoteService):
        return reader
    reader.close()  # the hub went away since the probe: the caller works in-process
    return None


def attach_tool_calls_by_index(
    reader: Reader, session_id: str, messages: Iterable[MutableMapping[str, Any]]
) -> None:
    """The scroll window's blank messages get their tool calls (keyed by index)."""
    blank = [m for m in messages if not str(m.get("content") or "").strip()]
    if not blank:
        return
    calls = {t["index"]: t.get("tool_calls") for t in reader.session(session_id)["turns"]}
    for m in blank:
        if calls.get(m["index"]):
            m["tool_calls"] = calls[m["index"]]
