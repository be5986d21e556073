"""``memviewer import json FILE``: read a ``memviewer.export`` v1 file back.

Exports put one session per line, so the reader streams line by line and keeps
one session in memory; a file reformatted by another tool (``jq .``) is still
valid JSON and is read whole instead. The file is read twice: once to check
every field (a bad file stores nothing), once to import. Each session goes
through ``service.import_session``, which is idempotent by turn id, so
importing the same file twice changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from memviewer.errors import MemviewerError
from memviewer.io.exporters.json_format import EPISODE_FIELDS, FORMAT, SESSION_FIELDS, TURN_FIELDS, VERSION
from memviewer.jsonvalues import loads_strict
from memviewer.session.importcheck import check_import, kind
from memviewer.store.db import storage_failure
from memviewer.words import plural


class ExportFileError(ValueError):
    """The file is not a memviewer export this version can read."""


def _row(record: Any, fields: tuple[tuple[str, str], ...], what: str) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise ExportFileError(f"{what} is not an object")
    return {column: record.get(public) for public, column in fields}


def _list(record: dict[str, Any], key: str, sid: str) -> list[Any]:
    value = record.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ExportFileError(f"session {sid}: '{key}' must be a list, not {kind(value)}")
    return value


def session_from_record(record: Any) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """(session row, turns in projection order, episode rows) for ``import_session``.

    Every field is type- and range-checked (``importcheck``): an error names the
    session and the field, and nothing of the file has been stored yet.
    """
    if not isinstance(record, dict) or not isinstance(record.get("session"), dict):
        raise ExportFileError("a session entry needs a 'session' object")
    session = _row(record["session"], SESSION_FIELDS, "session")
    if not isinstance(session.get("id"), str) or not session["id"]:
        raise ExportFileError("a session has no session_id")
    sid = session["id"]
    episodes = [_row(e, EPISODE_FIELDS, f"session {sid}: an episode") for e in _list(record, "episodes", sid)]
    turns = [_row(t, TURN_FIELDS, f"session {sid}: a turn") for t in _list(record, "turns", sid)]
    for t in turns:
        if t.get("id") is None or t.get("role") is None or t.get("timestamp") is None:
            raise ExportFileError(f"session {sid}: a turn lacks turn_id, role or timestamp")
        if t["content"] is None:
            t["content"] = ""
        idx = t.pop("idx")  # import_session numbers turns by their position
        if idx is not None and (not isinstance(idx, int) or isinstance(idx, bool)):
            raise ExportFileError(f"session {sid}: turn {t['id']!r}: index must be a whole number")
        t["_order"] = idx if isinstance(idx, int) else 0
    turns.sort(key=lambda t: t["_order"])
    for t in turns:
        del t["_order"]
    try:
        check_import(session, turns, episodes)
    except MemviewerError as exc:
        raise ExportFileError(f"session {sid}: {exc.message}") from None
    return session, turns, episodes


def annotations_from_record(record: dict[str, Any], sid: str) -> dict[str, dict[str, Any]]:
    """``{session or turn id: {"tags": [...], "note": str | None}}`` from a record's
    ``tags`` / ``note`` keys, each checked like ``memviewer tag`` / ``note`` would."""
    from memviewer.session.annotations import check_note, check_tag

    out: dict[str, dict[str, Any]] = {}
    entries: list[tuple[Any, dict[str, Any]]] = [(sid, record["session"])]
    entries += [(t.get("turn_id"), t) for t in record.get("turns") or [] if isinstance(t, dict)]
    for target, item in entries:
        tags, note = item.get("tags"), item.get("note")
        if tags is None and note is None:
            continue
        where = f"session {sid}" + ("" if target == sid else f": turn {target!r}")
        if tags is not None and not isinstance(tags, list):
            raise ExportFileError(f"{where}: 'tags' must be a list, not {kind(tags)}")
        try:
            checked = [check_tag(t) for t in tags or []]
            text = None if note is None else check_note(note)
        except MemviewerError as exc:
            raise ExportFileError(f"{where}: {exc.message}") from None
        out[str(target)] = {"tags": checked, "note": text}
    return out


def _check_header(head: Any) -> None:
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise ExportFileError(f'not a {FORMAT} file (no "format": "{FORMAT}")')
    if head.get("version") != VERSION:
        raise ExportFileError(f"unsupported {FORMAT} version {head.get('version')!r} (this reads {VERSION})")


def _loads(text: str, where: str) -> Any:
    try:
        return loads_strict(text)
    except ValueError as exc:
        raise ExportFileError(f"{where}: {exc}") from None


def iter_records(path: Path) -> Iterator[Any]:
    """Session records of an export file, streamed when the file has the export's line layout."""
    with open(path, encoding="utf-8") as fh:
        first = fh.readline()
        if first.endswith('"sessions":[\n'):
            try:
                head = json.loads(first[: -len(',"sessions":[\n')] + "}")
            except ValueError:
                head = None
            if head is not None:
                _check_header(head)
                for n, line in enumerate(fh, 2):
                    line = line.rstrip("\n")
                    if line in ("]}", ""):
                        continue
                    yield _loads(line[:-1] if line.endswith(",") else line, f"damaged session line {n}")
                return
    data = _loads(path.read_text(encoding="utf-8"), "not valid JSON")
    _check_header(data)
    if not isinstance(data.get("sessions"), list):
        raise ExportFileError("'sessions' is not a list")
    yield from data["sessions"]


Record = tuple[
    dict[str, Any],
    list[dict[str, Any]],
    list[dict[str, Any]],
    dict[str, dict[str, Any]],
    list[dict[str, Any]],
]


def llm_calls_from_record(record: dict[str, Any], sid: str) -> list[dict[str, Any]]:
    """The ``record_llm_call`` commands of a record's ``llm_calls``, each checked the way the
    hub checks one (a bad call names the session and the field; nothing is stored)."""
    from memviewer.context.calls import check_command

    out = []
    for i, item in enumerate(_list(record, "llm_calls", sid) if "llm_calls" in record else []):
        if not isinstance(item, dict):
            raise ExportFileError(f"session {sid}: llm_calls[{i}] must be an object, not {kind(item)}")
        cmd = {k: v for k, v in item.items() if v is not None}
        if cmd.get("input") is None and item.get("raw_input") is not None:
            cmd["input"] = item["raw_input"]  # kept as received: flagged again on the way in
        if cmd.get("output") is None and item.get("raw_output") is not None:
            cmd["output"] = item["raw_output"]
        cmd.pop("raw_input", None)
        cmd.pop("raw_output", None)
        cmd["session_id"] = sid
        try:
            check_command(cmd)
        except MemviewerError as exc:
            raise ExportFileError(f"session {sid}: {exc.message}") from None
        out.append(cmd)
    return out


def _records(path: Path) -> Iterator[Record]:
    try:
        for record in iter_records(path):
            session, turns, episodes = session_from_record(record)
            sid = session["id"]
            yield (
                session,
                turns,
                episodes,
                annotations_from_record(record, sid),
                llm_calls_from_record(record, sid),
            )
    except UnicodeDecodeError:
        raise ExportFileError("not valid UTF-8") from None
    except OSError as exc:
        raise ExportFileError(f"cannot read: {exc.strerror or exc}") from None


def import_file(
    import_session: Callable[..., dict[str, Any]],
    path: str | Path,
    progress: Callable[[int, int, str], None] | None = None,
    *,
    replace: bool = False,
    annotate: Callable[[str, dict[str, dict[str, Any]]], Any] | None = None,
    record_calls: Callable[[list[dict[str, Any]]], Any] | None = None,
) -> dict[str, Any]:
    """Import every session of one export file; ``{path, imported: [...], failed: [...], turns}``.

    ``annotate(session_id, {target id: {tags, note}})`` stores a session's tags and notes
    after the session went in (``MemoryService.import_annotations``); without it they are
    checked but not stored. ``record_calls(commands)`` stores its LLM calls
    (``MemoryService.import_llm_calls``; idempotent by call id), likewise.

    The whole file is read and checked first, so a malformed file (``ExportFileError``,
    message prefixed with the path) stores nothing. Then each session is imported in
    its own transaction (a running hub is never held up for a whole file), with origin
    ``export:<absolute path>``: a session the store refuses (it exists from elsewhere and
    ``replace`` is off, or a turn id belongs to another session) is listed in ``failed``
    and the others still go in.
    """
    p = Path(path).expanduser()
    try:
        if not p.is_file():
            raise ExportFileError("no such file" if not p.exists() else "not a file")
        seen: set[str] = set()
        for session, _turns, _episodes, _marks, _calls in _records(p):
            if session["id"] in seen:
                raise ExportFileError(f"session {session['id']} appears twice")
            seen.add(session["id"])
    except ExportFileError as exc:
        raise ExportFileError(f"{p}: {exc}") from None
    origin = f"export:{p.resolve()}"
    imported: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    try:  # read again, streaming (an export can be large): it may have changed meanwhile
        for i, (session, turns, episodes, marks, calls) in enumerate(_records(p), 1):
            sid = session["id"]
            try:
                result = import_session(session, turns, episodes, origin=origin, replace=replace)
            except MemviewerError as exc:
                if storage_failure(exc) is not None:
                    raise
                why = exc.message
                if not why.startswith(f"session {sid} "):
                    why = f"session {sid}: {why}"
                failed.append({"path": str(p), "session_id": sid, "error": why})
                continue
            if marks and annotate is not None:
                annotate(sid, marks)
            if calls and record_calls is not None:
                record_calls(calls)
            imported.append({**result, "path": str(p)})
            if progress:
                progress(i, len(seen), sid)
    except ExportFileError as exc:  # what was stored stays stored and is reported as such
        failed.append(
            {
                "path": str(p),
                "session_id": None,
                "error": f"changed while it was imported ({exc}); "
                f"what came before that point stays stored ({plural(len(imported), 'session')})",
            }
        )
    return {
        "path": str(p),
        "imported": imported,
        "failed": failed,
        "turns": sum(r["turns"] for r in imported),
    }
