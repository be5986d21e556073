"""``export_sessions``: stream sessions out as json, jsonl, md or PraisonAI files.

Guarantees:

* constant memory — sessions are visited by keyset pages and loaded one at a
  time (``exporters.bundle``);
* nothing half-written — unknown ids are reported before anything is written,
  a file output is written to a temporary sibling and renamed into place, and
  PraisonAI files are staged in a hidden folder and moved in at the end;
* nothing clobbered — a target inside the memviewer home (the store, its
  ``-wal``/``-shm``, the LanceDB folder) is refused; a symlink is followed and
  the file it points to is replaced (the link stays); a FIFO or a character
  device (``/dev/stdout``, a terminal) is written through, as a shell redirect
  would; any other special file is refused; PraisonAI files already in the
  target folder (the files you imported from, say) are only replaced with
  ``force``, else the export names them and writes nothing;
* a write that fails (no permission, a full disk) is a ``MemviewerError``
  naming the target, with nothing left behind;
* redaction (``standard`` / ``strict``) masks content, metadata values, titles
  and tool-call arguments with one ``Redactor`` per export, so a secret gets the
  same mask everywhere in it; ids that carry personal data (an e-mail used as a
  user id, say) become pseudonyms keyed by the home's ``redaction.key``, the
  same in every export so a user's sessions still group; plain ids and
  timestamps are never touched, nor is the store.

``out`` is a path, ``"-"``/``None`` for stdout (json, jsonl, md), or any
object with ``write`` (for the TUI and tests). PraisonAI needs a folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from memviewer.errors import CONFLICT, INTERNAL, INVALID_ARGUMENT, SESSION_NOT_FOUND, MemviewerError
from memviewer.io.exporters import bundle as bundles
from memviewer.io.exporters.json_format import JsonWriter
from memviewer.io.exporters.jsonl_format import JsonlWriter
from memviewer.io.exporters.markdown_format import MarkdownWriter
from memviewer.praisonai.export import PraisonAIWriter
from memviewer.store.db import Store

FORMATS = ("json", "jsonl", "md", "praisonai")
STREAM_WRITERS = {"json": JsonWriter, "jsonl": JsonlWriter, "md": MarkdownWriter}
REDACT_LEVELS = ("standard", "strict")

Progress = Callable[[int, int, str], None]


def _check_args(session_ids: Sequence[str] | None, fmt: str, redact: str | None) -> list[str] | None:
    if fmt not in FORMATS:
        raise MemviewerError(
            INVALID_ARGUMENT, f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}"
        )
    if redact is not None and redact not in REDACT_LEVELS:
        raise MemviewerError(
            INVALID_ARGUMENT,
            f"unknown redaction level {redact!r}; expected one of {', '.join(REDACT_LEVELS)}",
        )
    if session_ids is None:
        return None
    if isinstance(session_ids, str) or not all(isinstance(s, str) for s in session_ids):
        raise MemviewerError(INVALID_ARGUMENT, "session_ids must be a list of session id strings")
    return list(dict.fromkeys(session_ids))  # keep the order given, drop repeats


def export_sessions(
    store: Store,
    session_ids: Sequence[str] | None,
    fmt: str,
    out: Any = None,
    *,
    home: Path | None = None,
    redact: str | None = None,
    progress: Progress | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Export ``session_ids`` (``None`` = every session); returns counts and where it went.

    ``home``: the memviewer home (no export is written inside it; its key makes the
    redaction pseudonyms). ``force``: a PraisonAI export may replace session files
    already in the folder.
    """
    ids = _check_args(session_ids, fmt, redact)
    if isinstance(out, (str, os.PathLike)) and str(out) != "-":
        _refuse_inside_home(Path(out).expanduser(), home)
    if ids is not None:
        with store.read() as conn:
            unknown = bundles.missing_ids(conn, ids)
        if unknown:
            raise MemviewerError(
                SESSION_NOT_FOUND,
                f"unknown session{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}",
                data={"unknown": unknown},
            )
        total = len(ids)
        id_iter: Iterator[str] = iter(ids)
    else:
        with store.read() as conn:
            from memviewer.store import repos

            total = repos.count_sessions(conn)
        id_iter = bundles.all_session_ids(store)

    redactor = None
    if redact:
        from memviewer.io.redact import Redactor, installation_key

        redactor = Redactor(redact, id_key=installation_key(home) if home is not None else None)
    stats = {"sessions": 0, "turns": 0}
    failed: list[dict[str, str]] = []

    def each_bundle() -> Iterator[bundles.Bundle]:
        done = 0
        for sid in id_iter:
            done += 1
            try:
                with store.read() as conn:
                    b = bundles.load_bundle(conn, sid)
                if b is not None and redactor is not None:
                    b = bundles.redact_bundle(b, redactor)
            except MemviewerError:
                raise  # the store itself failed: every other session would too
            except Exception as exc:  # one bad session never stops the rest
                failed.append(_failure(sid, exc))
                b = None
            if b is not None:  # None: deleted while we were exporting, or failed
                yield b
            if progress:
                progress(done, total, sid)

    def written(b: bundles.Bundle) -> None:
        stats["sessions"] += 1
        stats["turns"] += len(b.turns)

    def failed_write(b: bundles.Bundle, exc: Exception) -> None:
        failed.append(_failure(b.id, exc))

    if fmt == "praisonai":
        path = _export_praisonai(each_bundle(), out, force, written, failed_write)
    else:
        path = _export_stream(each_bundle(), fmt, out, redact, written, failed_write)
    result: dict[str, Any] = {
        "format": fmt,
        **stats,
        "path": path,
        "redact": redact,
        "redactions": {},
        "failed": failed,
    }
    if redactor is not None:
        result["redactions"] = {k: v for k, v in redactor.counts.items() if v}
        if redactor.ids_masked:
            result["redactions"]["id"] = redactor.ids_masked
    return result


def _failure(sid: str, exc: Exception) -> dict[str, str]:
    return {"session_id": sid, "error": f"{type(exc).__name__}: {exc}"[:300]}


_Written = Callable[[bundles.Bundle], None]
_Failed = Callable[[bundles.Bundle, Exception], None]


def _export_stream(
    items: Iterator[bundles.Bundle],
    fmt: str,
    out: Any,
    redact: str | None,
    written: _Written | None = None,
    failed: _Failed | None = None,
) -> str:
    writer_cls = STREAM_WRITERS[fmt]
    ok, bad = written or (lambda b: None), failed or _reraise

    def _write_all(writer: Any, items: Iterator[bundles.Bundle]) -> None:
        _write_each(writer, items, ok, bad)

    if out is None or out == "-":
        _write_all(writer_cls(sys.stdout, redact), items)
        sys.stdout.flush()
        return "-"
    if hasattr(out, "write"):
        _write_all(writer_cls(out, redact), items)
        return getattr(out, "name", "<stream>")
    path = Path(out).expanduser()
    try:
        st: os.stat_result | None = path.stat()  # follows a symlink
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise _write_error(path, exc) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise MemviewerError(INVALID_ARGUMENT, f"{path} is a folder; -o needs a file path for {fmt}")
    if st is not None and (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        # A pipe or a device (/dev/stdout, a terminal): write through it, as `>` would;
        # renaming a file over it would only replace the special file.
        try:
            with open(path, "w", encoding="utf-8", newline="\n") as fh:
                _write_all(writer_cls(fh, redact), items)
        except OSError as exc:
            raise _write_error(path, exc) from None
        return str(path)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise MemviewerError(
            INVALID_ARGUMENT, f"{path} is not a regular file, a pipe or a terminal; refusing to write to it"
        )
    if path.is_symlink():  # replace the file the link points to and keep the link
        path = Path(os.path.realpath(path))
    if not path.parent.exists():
        raise MemviewerError(INVALID_ARGUMENT, f"folder {path.parent} does not exist")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            _write_all(writer_cls(fh, redact), items)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise _write_error(path, exc) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return str(path)


def _write_error(target: Path, exc: OSError) -> MemviewerError:
    """A failed write as one clear error; what the export wrote so far is already removed."""
    why = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        hint = f"free space on the disk holding {target}, or export somewhere else"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = f"check that you may write to {target.parent if not target.is_dir() else target}"
    else:
        hint = None
    return MemviewerError(
        INTERNAL,
        f"cannot write the export to {target}: {why}; nothing was written",
        data={"reason": "export_write_failed", **({"hint": hint} if hint else {})},
    )


def _refuse_inside_home(target: Path, home: Path | None) -> None:
    """Refuse an export target in the memviewer home: ``-o ~/.../memviewer.db`` used to
    replace the live store with the export."""
    if home is None:
        return
    homes = {Path(os.path.abspath(home)), Path(os.path.realpath(home))}
    for candidate in (Path(os.path.abspath(target)), Path(os.path.realpath(target))):
        for h in homes:
            if candidate == h or h in candidate.parents:
                shown = f"{target} (-> {candidate})" if str(candidate) != os.path.abspath(target) else target
                raise MemviewerError(
                    INVALID_ARGUMENT,
                    f"{shown} is inside the memviewer home {home}; an export there could overwrite "
                    "the store or the index",
                    hint="write the export to a path outside the home folder",
                )


def _reraise(b: bundles.Bundle, exc: Exception) -> None:
    raise exc


def _write_each(writer: Any, items: Iterator[bundles.Bundle], ok: _Written, bad: _Failed) -> None:
    """Write every bundle; one that cannot be rendered is reported and skipped. The writers
    render a whole session before writing any of it, so a skipped one leaves no fragment;
    an OSError is the target failing, which stops the export."""
    writer.begin()
    for b in items:
        try:
            writer.write(b)
        except OSError:
            raise
        except Exception as exc:
            bad(b, exc)
            continue
        ok(b)
    writer.end()


def _export_praisonai(
    items: Iterator[bundles.Bundle],
    out: Any,
    force: bool = False,
    written: _Written | None = None,
    failed: _Failed | None = None,
) -> str:
    if out is None or out == "-" or hasattr(out, "write"):
        raise MemviewerError(
            INVALID_ARGUMENT,
            "the praisonai format writes one file per session",
            hint="pass -o DIR (created if missing)",
        )
    folder = Path(out).expanduser()
    if folder.exists() and not folder.is_dir():
        raise MemviewerError(INVALID_ARGUMENT, f"{folder} is a file; praisonai export needs a folder")
    staging = folder / f".memviewer-export-{os.getpid()}"
    moved = 0
    try:
        folder.mkdir(parents=True, exist_ok=True)
        staging.mkdir(exist_ok=True)
        writer = PraisonAIWriter(staging)
        _write_each(writer, items, written or (lambda b: None), failed or _reraise)
        existing = [name for name in writer.names if os.path.lexists(folder / name)]
        if existing and not force:
            shown = ", ".join(existing[:5]) + (f" and {len(existing) - 5} more" if len(existing) > 5 else "")
            raise MemviewerError(
                CONFLICT,
                f"{len(existing)} session file{'s' if len(existing) > 1 else ''} in {folder} would be "
                f"overwritten ({shown}); nothing was written",
                data={
                    "existing": existing,
                    "hint": "pass --force to replace them, or export into another folder",
                },
            )
        moved = 0
        for name in writer.names:
            os.replace(staging / name, folder / name)
            moved += 1
    except OSError as exc:
        err = _write_error(folder, exc)
        if moved:  # the moves are one rename per file: say what is already in place
            err.message = err.message.replace(
                "nothing was written", f"{moved} of {len(writer.names)} session files were written"
            )
            err.args = (err.message,)
        raise err from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return str(folder)
