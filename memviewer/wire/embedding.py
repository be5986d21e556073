"""Who embeds this home's new turns: the one answer ``import``, ``doctor``, ``recall``
and the viewer's header give.

Two kinds of indexer exist: the background indexer of the hub serving the home (or of the
viewer hosting it), and a detached ``memviewer reindex --catch-up`` that an import without
a hub starts (its pid in ``lance/catch-up.pid``). A hub started with ``serve --no-index``
serves the home but embeds nothing; its ``hello`` says so (``indexing: false``).
Imports neither LanceDB nor Textual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memviewer.errors import MemviewerError
from memviewer.index.progress import catch_up_pid
from memviewer.present.index_words import Embedding
from memviewer.wire.probe import serving_hello

if TYPE_CHECKING:
    from memviewer.config import Settings


def who_embeds(settings: Settings, *, in_process: bool = False) -> Embedding:
    """Who embeds ``settings``' home now: ``Embedding("hub" | "background" | None)``.

    ``in_process``: this process runs the home's background indexer (the hub's own recall
    asks), so nothing needs probing. Otherwise the serving hub is asked (``serving_hello``;
    a hub of another home on the socket serves nothing here), then the catch-up pid file.
    """
    if in_process:
        return Embedding("hub")
    idle_hub: str | None = None
    try:
        found = serving_hello(settings)
    except MemviewerError:  # another home's hub or an untrusted socket: not ours
        found = None
    if found is not None:
        sock, hello = found
        if hello.get("indexing", True) is not False:  # a hub before this field indexed
            return Embedding("hub")
        idle_hub = str(sock)
    pid = catch_up_pid(settings.home_path)
    if pid is not None:
        return Embedding("background", pid=pid)
    return Embedding(None, idle_hub=idle_hub)
