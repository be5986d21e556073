"""Read one huge PraisonAI session file incrementally (``ijson``), with progress.

``format.load_file`` reads the whole file, decodes it and parses it: the raw bytes, the
decoded text and the parsed objects are alive together (a 200 MB file peaked at 3.6x its
size) and ``json.loads`` runs in C for minutes, where Ctrl-C waits for it to return. Here the
file is read in 1 MiB chunks and parsed event by event, so the only copy held is the parsed
session (message texts are shared with the turns built from them), progress is reported in
bytes as it goes, and a KeyboardInterrupt lands between two chunks (well within a second).

The parsed object goes through the same ``format.parse_session`` as a small file, so a
file yields the same session and turns (and ids) whichever way it was read. What
``loads_strict`` refuses is refused here too: NaN/Infinity (ijson's parser rejects them),
absurd nesting (``MAX_DEPTH``), non-UTF-8 bytes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from memviewer.praisonai.format import ForeignFileError, parse_session
from memviewer.timeutil import parse_ts

#: Files at least this big are streamed (smaller ones parse faster in one go).
STREAM_MIN_BYTES = 16 * 1024 * 1024
CHUNK = 1024 * 1024
MAX_DEPTH = 200  # the same bound as loads_strict's nesting check

BytesProgress = Callable[[int, int, str], None]


class _Counting:
    """A binary reader that reports how far it got (at most once per chunk)."""

    def __init__(self, fh: BinaryIO, total: int, path: str, progress: BytesProgress | None) -> None:
        self.fh, self.total, self.path, self.progress = fh, total, path, progress
        self.done = 0
        self.interrupted = False

    def read(self, n: int = -1) -> bytes:
        if self.interrupted:
            return b""  # the parser stops at a truncated document; the caller re-raises Ctrl-C
        data = self.fh.read(CHUNK if n is None or n < 0 else min(n, CHUNK))
        self.done += len(data)
        if self.progress is not None:
            self.progress(self.done, self.total, self.path)
        return data


def _build(events: Any) -> Any:
    """The document from ijson's (prefix, event, value) stream, with a nesting bound."""
    stack: list[Any] = []
    keys: list[str | None] = []
    root: Any = None
    key: str | None = None

    def put(value: Any) -> None:
        nonlocal root
        if not stack:
            root = value
        elif isinstance(stack[-1], list):
            stack[-1].append(value)
        else:
            stack[-1][key] = value

    for _prefix, event, value in events:
        if event == "map_key":
            key = value
        elif event in ("start_map", "start_array"):
            container: Any = {} if event == "start_map" else []
            put(container)
            stack.append(container)
            keys.append(key)
            if len(stack) > MAX_DEPTH:
                raise ForeignFileError(f"not valid JSON (nested deeper than {MAX_DEPTH} levels)")
        elif event in ("end_map", "end_array"):
            stack.pop()
            key = keys.pop()
        else:
            put(value)
    return root


@contextlib.contextmanager
def _ctrl_c_between_chunks(reader: _Counting) -> Iterator[None]:
    """Ctrl-C while a big file is parsed: a KeyboardInterrupt raised inside the C parser's
    read callback can be lost there, so (in the main thread) SIGINT only marks the reader,
    which then ends the document; ``load_file_streaming`` raises KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:
        yield  # SIGINT ignored or handled by someone else: leave it alone
        return

    def mark(_sig: int, _frame: Any) -> None:
        reader.interrupted = True

    signal.signal(signal.SIGINT, mark)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if reader.interrupted:
        raise KeyboardInterrupt


def load_file_streaming(
    path: Path, progress: BytesProgress | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``format.load_file`` for a big file: same result, bounded extra memory, progress."""
    import ijson

    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below, after parsing
    except OSError as exc:
        raise ForeignFileError(f"cannot read: {exc.strerror or exc}") from None
    with fh:
        try:
            st = os.fstat(fh.fileno())
        except OSError as exc:
            raise ForeignFileError(f"cannot read: {exc.strerror or exc}") from None
        backend: Any = ijson
        while True:
            reader = _Counting(fh, st.st_size, str(path), progress)
            try:
                with _ctrl_c_between_chunks(reader):
                    data = _build(backend.parse(reader, use_float=True))
                break
            except ijson.common.IncompleteJSONError as exc:
                if reader.interrupted:
                    raise KeyboardInterrupt from None
                if "integer overflow" in str(exc) and backend is ijson:
                    # The C parser holds 64-bit integers only; the pure-Python one any size.
                    backend = ijson.get_backend("python")
                    fh.seek(0)
                    continue
                raise ForeignFileError(f"not valid JSON ({' '.join(str(exc).split())[:200]})") from None
            except UnicodeDecodeError:
                raise ForeignFileError("not valid UTF-8") from None
            except OSError as exc:
                raise ForeignFileError(f"cannot read: {exc.strerror or exc}") from None
    try:
        mtime: float | None = parse_ts(st.st_mtime)
    except ValueError:
        mtime = None
    stem = path.name[: -len(".json")] if path.name.endswith(".json") else path.stem
    return parse_session(data, stem, mtime)


def should_stream(path: Path) -> bool:
    try:
        return path.stat().st_size >= STREAM_MIN_BYTES
    except OSError:
        return False
