"""One huge PraisonAI session file, read and imported in bounded memory.

``format.load_file`` and ``stream.load_file_streaming`` both hand over the
whole session (a 200 MB file of a million short messages is ~2 GB of Python objects). Here
the file is never held: it is scanned with ijson's C parser, message by message, twice.

1. **Check.** One pass over the top-level fields (the message lists are skipped, only
   counted), then one over the messages: every message is turned into its turn exactly as
   a small file's would be (``praisonai.message_turn``) and checked like an import
   (``importcheck.check_turn``), then dropped. What the session row needs from its turns
   (first and last time, first user message for the title) is kept. A bad file fails here,
   naming the message, before anything is stored.
2. **Import.** The messages are read again in projection order (``archived_messages``
   first) and handed over in chunks of ``CHUNK_TURNS`` turns, which
   ``SessionManager.import_session_chunks`` stores one transaction per chunk.

Turn ids are the small-file ones; the occurrence count that tells identical messages apart
(same role, time and text) is kept as 64-bit hashes instead of the messages themselves,
about 60 bytes per message, the only memory that grows with the file.

Ctrl-C (in the main thread): SIGINT only sets a flag; the parser stops at its next 1 MiB
read and no further chunk is handed over, so the chunk being stored commits whole and a
``KeyboardInterrupt`` follows. What was committed stays (the rule is in docs/cli.md, "import").
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, cast

from memviewer.jsonvalues import MAX_DEPTH as VALUE_DEPTH
from memviewer.jsonvalues import check_value
from memviewer.praisonai.format import (
    ForeignFileError,
    Head,
    TurnStats,
    message_turn,
    parse_head,
    session_row,
)
from memviewer.praisonai.stream import CHUNK, MAX_DEPTH, _ctrl_c_between_chunks
from memviewer.timeutil import parse_ts

#: Turns per chunk (one store transaction each): ~1 MB of turns for chat-sized messages.
CHUNK_TURNS = 1000
ARRAYS = ("archived_messages", "messages")

BytesProgress = Callable[[int, int, str], None]


class HashedOccurrences:
    """``praisonai.Occurrences`` over 64-bit hashes of the keys: a message's text is not kept.

    Two different keys with the same hash (about one chance in 10^7 for a million
    messages) would give the second one an occurrence of 1 instead of 0, so its turn id
    would differ from a small-file read's.
    """

    def __init__(self) -> None:
        self._once: set[int] = set()
        self._more: dict[int, int] = {}

    def __getitem__(self, key: tuple[str, float, str]) -> int:
        h = hash(key)
        if h in self._more:
            return self._more[h]
        return 1 if h in self._once else 0

    def __setitem__(self, key: tuple[str, float, str], value: int) -> None:
        h = hash(key)
        if value == 1:
            self._once.add(h)
        else:
            self._more[h] = value


class _Zero:
    """Occurrences for the check pass: ids are not kept, so every count may be 0."""

    def __getitem__(self, key: tuple[str, float, str]) -> int:
        return 0

    def __setitem__(self, key: tuple[str, float, str], value: int) -> None:
        pass


@dataclass
class BigFile:
    """A checked big file: its session row and what pass 2 needs to read its turns."""

    path: Path
    size: int
    session: dict[str, Any]
    head: Head
    arrays: list[str]  # message lists present, projection order
    turns: int
    archived: int
    scans: int = 0  # passes over the file so far (progress)
    backend: Any = None
    interrupted: bool = False
    _done: int = field(default=0, repr=False)


class _Reader:
    """The file as ijson reads it: 1 MiB at a time, progress over every pass, Ctrl-C."""

    def __init__(self, fh: Any, big: BigFile, passes: int, progress: BytesProgress | None) -> None:
        self.fh, self.big, self.passes, self.progress = fh, big, passes, progress

    @property
    def interrupted(self) -> bool:
        return self.big.interrupted

    @interrupted.setter
    def interrupted(self, value: bool) -> None:
        self.big.interrupted = value

    def read(self, n: int = -1) -> bytes:
        if self.big.interrupted:
            return b""  # the parser stops at a truncated document; the caller raises Ctrl-C
        data = self.fh.read(CHUNK if n is None or n < 0 else min(n, CHUNK))
        self.big._done += len(data)
        if self.progress is not None:
            total = self.big.size * self.passes
            self.progress(min(self.big._done, total), total, str(self.big.path))
        return cast("bytes", data)


@contextlib.contextmanager
def opened(
    path: Path, progress: BytesProgress | None = None
) -> Iterator[tuple[BigFile, Iterator[list[dict[str, Any]]]]]:
    """Check ``path`` (pass 1), then yield ``(big, chunks)``; ``chunks`` reads pass 2.

    Ctrl-C anywhere inside (main thread) stops the reading at the next 1 MiB and raises
    ``KeyboardInterrupt`` when the block ends; a chunk already handed over is the
    caller's to finish storing.
    """
    import ijson

    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below
        st = os.fstat(fh.fileno())
    except OSError as exc:
        raise ForeignFileError(f"cannot read: {exc.strerror or exc}") from None
    with fh:
        big = BigFile(path, st.st_size, {}, None, [], 0, 0, backend=ijson)  # type: ignore[arg-type]
        reader = _Reader(fh, big, 1, progress)
        with _ctrl_c_between_chunks(reader):  # type: ignore[arg-type]
            _check(big, reader, st.st_mtime)
            yield big, _chunks(big, reader)
        if big.interrupted:
            raise KeyboardInterrupt


def check_open_file(
    fh: BinaryIO, path: Path, progress: BytesProgress | None = None
) -> tuple[BigFile, Iterator[list[dict[str, Any]]]]:
    """``opened`` for a caller that owns the open file and its threads (the hub's folder
    watcher hashes the same file first and steps ``chunks`` from worker threads): pass 1
    runs now, on this thread; Ctrl-C is not intercepted; the caller closes ``fh``.
    Setting ``big.interrupted`` makes the next 1 MiB read end the document (a stop)."""
    import ijson

    try:
        st = os.fstat(fh.fileno())
    except OSError as exc:
        raise ForeignFileError(f"cannot read: {exc.strerror or exc}") from None
    big = BigFile(path, st.st_size, {}, None, [], 0, 0, backend=ijson)  # type: ignore[arg-type]
    reader = _Reader(fh, big, 1, progress)
    _check(big, reader, st.st_mtime)
    return big, _chunks(big, reader)


def _parse_errors(big: BigFile, run: Callable[[], Any]) -> Any:
    """Run one scan; ijson's errors as ``ForeignFileError``, Ctrl-C as KeyboardInterrupt."""
    import ijson

    try:
        return run()
    except ijson.common.IncompleteJSONError as exc:
        if big.interrupted:
            raise KeyboardInterrupt from None
        raise ForeignFileError(f"not valid JSON ({' '.join(str(exc).split())[:200]})") from None
    except UnicodeDecodeError:
        raise ForeignFileError("not valid UTF-8") from None
    except OSError as exc:
        raise ForeignFileError(f"cannot read: {exc.strerror or exc}") from None


def _check(big: BigFile, reader: _Reader, mtime: float) -> None:
    import ijson

    while True:
        try:
            header, arrays = _parse_errors(big, lambda: _scan_header(big, reader))
            break
        except ForeignFileError as exc:
            if "integer overflow" in str(exc) and big.backend is ijson:
                big.backend = ijson.get_backend("python")  # the C parser holds 64-bit ints only
                continue
            raise
    if not isinstance(header, dict):
        raise ForeignFileError("top level is not a JSON object")
    for key in ARRAYS:
        if key in header and header[key] is not None:
            raise ForeignFileError(f"{key} must be a list, not {_kind(header[key])}")
    if not arrays:
        raise ForeignFileError("no 'messages' or 'archived_messages' list")
    reason = check_value(header)
    if reason:
        raise ForeignFileError(f"the session {reason}")
    try:
        default_ts: float | None = parse_ts(mtime)
    except ValueError:
        default_ts = None
    stem = big.path.name[: -len(".json")] if big.path.name.endswith(".json") else big.path.stem
    big.head = parse_head(header, stem, default_ts)
    big.arrays = [k for k in ARRAYS if k in arrays]
    reader.passes = 1 + 2 * len(big.arrays)
    stats = TurnStats()
    for turn in _turns(big, reader, _Zero()):
        stats.add(turn)
    big.session = session_row(big.head, header, stats)
    big.turns, big.archived = stats.count, stats.archived


_OPENS = ("start_map", "start_array")
_CLOSES = ("end_map", "end_array")


def _scan_header(big: BigFile, reader: _Reader) -> tuple[Any, set[str]]:
    """The top-level fields other than the message lists (built), and which lists exist.

    The lists' items are only parsed, never built, so this pass holds the small fields.
    """
    from ijson.common import ObjectBuilder

    reader.fh.seek(0)
    big.scans += 1
    events = big.backend.basic_parse(reader, use_float=True)
    first = next(events, None)
    if first is None or first[0] != "start_map":
        return None, set()  # not an object: the caller says so
    root: dict[str, Any] = {}
    arrays: set[str] = set()
    depth = 1
    key = ""
    builder: Any = None
    skipping = False  # inside a message list
    for event, value in events:
        if event in _OPENS:
            depth += 1
            if depth > MAX_DEPTH:
                raise ForeignFileError(f"not valid JSON (nested deeper than {MAX_DEPTH} levels)")
        elif event in _CLOSES:
            depth -= 1
        if skipping:
            skipping = depth > 1
            continue
        if builder is not None:
            builder.event(event, value)
            if depth == 1:  # the value is complete
                root[key] = builder.value
                builder = None
            continue
        if depth == 0:
            break  # the end of the session object
        if event == "map_key":
            key = value
        elif event == "start_array" and key in ARRAYS:
            arrays.add(key)
            root.pop(key, None)
            skipping = True
        elif event in _OPENS:
            builder = ObjectBuilder()
            builder.event(event, value)
        else:
            root[key] = value
    return root, arrays


def _turns(big: BigFile, reader: _Reader, seen: Any) -> Iterator[dict[str, Any]]:
    """Every turn of the file in projection order, checked (one scan per message list)."""
    from memviewer.errors import MemviewerError
    from memviewer.session.importcheck import check_turn

    index = 0
    for key in big.arrays:
        archived = key == "archived_messages"
        reader.fh.seek(0)
        big.scans += 1
        items = big.backend.items(reader, f"{key}.item", use_float=True)
        i = 0
        while True:
            msg = _parse_errors(big, lambda: next(items, _END))  # noqa: B023 - called at once
            if msg is _END:
                break
            where = f"{key}[{i}]"
            i += 1
            reason = check_value(msg, max_depth=VALUE_DEPTH - 2)  # a message sits 2 levels down
            if reason:
                raise ForeignFileError(f"the session {reason} of {where}")
            turn = message_turn(msg, archived, where, big.head, seen)
            if turn is None:
                continue
            try:
                check_turn(index, turn)
            except MemviewerError as exc:
                raise ForeignFileError(f"{where}: {exc.message}") from None
            index += 1
            yield turn
        if big.interrupted:
            raise KeyboardInterrupt


_END = object()


def _chunks(big: BigFile, reader: _Reader) -> Iterator[list[dict[str, Any]]]:
    """Pass 2: the turns again, ids and all, ``CHUNK_TURNS`` at a time."""
    chunk: list[dict[str, Any]] = []
    for turn in _turns(big, reader, HashedOccurrences()):
        chunk.append(turn)
        if len(chunk) >= CHUNK_TURNS:
            yield chunk
            chunk = []
            if big.interrupted:
                raise KeyboardInterrupt
    if chunk and not big.interrupted:
        yield chunk
    if big.interrupted:
        raise KeyboardInterrupt


def _kind(value: Any) -> str:
    from memviewer.session.importcheck import kind

    return kind(value)
