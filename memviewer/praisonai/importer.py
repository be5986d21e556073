"""``memviewer import praisonai``: import PraisonAI session files and folders, one file at a
time, each checked completely before it is stored; big files are read incrementally and
stored in chunks (``chunked``), the rest read whole (``format.load_file``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from memviewer.errors import MemviewerError
from memviewer.praisonai import chunked, stream
from memviewer.praisonai.format import ForeignFileError, ImportReport, iter_session_files, load_file
from memviewer.store.db import storage_failure

log = logging.getLogger("memviewer.io")


def import_paths(
    import_session: Callable[..., dict[str, Any]],
    paths: Iterable[str | Path],
    progress: Callable[[int, int, str], None] | None = None,
    *,
    replace: bool = False,
    file_progress: Callable[[int, int, str], None] | None = None,
    import_chunks: Callable[..., dict[str, Any]] | None = None,
) -> ImportReport:
    """Import every session file; a bad file is reported by name and skipped, the rest go on.

    Each file is one session imported in one transaction (all or nothing; a big file with
    ``import_chunks``: checked whole, then one transaction per chunk of turns), with
    origin ``praisonai:<absolute path>``: re-importing the same file updates the
    session in place, while a session that exists from elsewhere (published live,
    another file) is refused unless ``replace`` (see ``SessionManager.import_session``).
    Only a failing store (disk full, I/O error) stops the run: it would fail every file.
    A file of ``stream.STREAM_MIN_BYTES`` or more is read incrementally (same
    result), reporting ``file_progress(bytes_done, bytes_total, path)`` as it goes; with
    ``import_chunks`` (``SessionManager.import_session_chunks``) it is also checked whole
    first and then stored a chunk of turns per transaction, in bounded memory
    (``chunked``; what an interrupted import leaves: ``session.chunked_import``).
    """
    report = ImportReport()
    files = list(iter_session_files(paths))
    for i, path in enumerate(files, 1):
        try:
            if not path.exists():
                raise ForeignFileError("no such file or folder")
            origin = f"praisonai:{path.resolve()}"
            big = stream.should_stream(path)
            if big and import_chunks is not None:
                with chunked.opened(path, file_progress) as (checked, chunks):
                    result = import_chunks(checked.session, chunks, origin=origin, replace=replace)
            else:
                if big:
                    session, turns = stream.load_file_streaming(path, file_progress)
                else:
                    session, turns = load_file(path)
                result = import_session(session, turns, origin=origin, replace=replace)
            result["path"] = str(path)
            report.imported.append(result)
        except (ForeignFileError, MemviewerError) as exc:
            if isinstance(exc, MemviewerError) and storage_failure(exc) is not None:
                raise
            reason = exc.message if isinstance(exc, MemviewerError) else str(exc)
            log.info("skipped %s: %s", path, reason)
            report.failed.append((str(path), reason))
        except Exception as exc:  # a file must never sink the run: report it, go on
            if storage_failure(exc) is not None:
                raise
            log.exception("import of %s failed", path)
            report.failed.append((str(path), f"internal error: {type(exc).__name__}: {exc}"[:300]))
        if progress:
            progress(i, len(files), str(path))
    return report
