"""The thread-side steps of a huge file in the PraisonAI folder watcher.

A file of ``stream.STREAM_MIN_BYTES`` or more (the threshold ``memviewer import
praisonai`` uses) is never held whole: it is opened once, hashed in 1 MiB blocks (an
unchanged file stops there), checked by ``chunked`` (pass 1), and its turns are
read again (pass 2) a chunk at a time, each chunk stored by the hub's writer thread as its
own job (``session.chunked_import.ChunkedImport``). All of it reads the one open file, so a
writer that replaces the file meanwhile (PraisonAI: temp file + ``os.replace``) cannot mix
two versions; its change event imports the new version next.

Sub-agent transcripts (``metadata.agent_histories``) sit in the file's header, which pass 1
builds: they are held in memory and become child sessions exactly as for a small file; only
the session's own message lists are streamed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from memviewer.praisonai.format import ForeignFileError

HASH_BLOCK = 1 << 20
AGENT_HISTORIES = "agent_histories"

ChildSessions = Callable[[dict[str, Any], dict[Any, Any]], list[tuple[dict[str, Any], list[Any]]]]


def file_digest(fh: BinaryIO) -> str:
    """SHA-256 of the file from its current position, read ``HASH_BLOCK`` bytes at a time."""
    h = hashlib.sha256()
    while block := fh.read(HASH_BLOCK):
        h.update(block)
    return h.hexdigest()


def hashed(fh: BinaryIO, last_digest: str | None) -> tuple[str, Any]:
    """Thread: the open file's digest: ``("rejected", why)``, ``("same", None)`` or
    ``("ok", digest)`` with ``fh`` back at the start (the caller closes it)."""
    try:
        digest = file_digest(fh)
        fh.seek(0)
    except OSError as exc:
        return "rejected", f"cannot read: {exc.strerror or exc}"
    if digest == last_digest:
        return "same", None
    return "ok", digest


def failure_kind(reason: str) -> str:
    """``invalid_json`` for a file that does not parse (perhaps caught mid-write, retried on
    its next change), ``rejected`` for JSON that is not a PraisonAI session."""
    return "invalid_json" if reason.startswith(("not valid JSON", "not valid UTF-8")) else "rejected"


def check(fh: BinaryIO, path: Path, child_sessions: ChildSessions) -> tuple[str, Any]:
    """Thread: pass 1 over the open file. ``("invalid_json"|"rejected", why)`` or
    ``("ok", (big, chunks, children))``: ``chunks`` reads pass 2 (step it from one thread
    at a time), ``children`` are the sub-agent sessions with their turns, made by
    ``child_sessions(session, agent_histories)`` (the watcher's, as for a small file)."""
    from memviewer.praisonai import chunked

    try:
        big, chunks = chunked.check_open_file(fh, path)
        meta = big.session["meta"]["metadata"]
        raw = meta.get(AGENT_HISTORIES)
        children: list[tuple[dict[str, Any], list[Any]]] = []
        if isinstance(raw, dict):
            del meta[AGENT_HISTORIES]
            children = child_sessions(big.session, raw)
    except ForeignFileError as exc:
        return failure_kind(str(exc)), str(exc)
    return "ok", (big, chunks, children)


def next_chunk(chunks: Any) -> tuple[str, Any]:
    """Thread: ``("ok", turns)``, ``("end", None)``, or the file failing in pass 2 (changed
    in place under a writer that does not replace it) as ``(kind, why)``."""
    try:
        turns = next(chunks, None)
    except ForeignFileError as exc:
        return failure_kind(str(exc)), str(exc)
    return ("end", None) if turns is None else ("ok", turns)
