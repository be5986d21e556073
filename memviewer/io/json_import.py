"""``memviewer import json FILE``: read a ``memviewer.export`` v1 file back.

Exports put one session per line, so the reader streams line by line and keeps
one session in memory; a file reformatted by another tool (``jq .``) is still
valid JSON and is read whole instead. Each session goes through
``service.import_session``, which is idempotent by turn id, so importing the
same file twice changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from memviewer.commands.common import emit_json, open_service
from memviewer.commands.core import import_group
from memviewer.io.exporters.json_format import EPISODE_FIELDS, FORMAT, SESSION_FIELDS, TURN_FIELDS, VERSION


class ExportFileError(ValueError):
    """The file is not a memviewer export this version can read."""


def _row(record: Any, fields: tuple[tuple[str, str], ...], what: str) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise ExportFileError(f"{what} is not an object")
    return {column: record.get(public) for public, column in fields}


def session_from_record(record: Any) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """(session row, turns in projection order, episode rows) for ``import_session``."""
    if not isinstance(record, dict) or not isinstance(record.get("session"), dict):
        raise ExportFileError("a session entry needs a 'session' object")
    session = _row(record["session"], SESSION_FIELDS, "session")
    if not isinstance(session.get("id"), str) or not session["id"]:
        raise ExportFileError("a session has no session_id")
    episodes = [_row(e, EPISODE_FIELDS, "episode") for e in record.get("episodes") or []]
    turns = [_row(t, TURN_FIELDS, "turn") for t in record.get("turns") or []]
    for t in turns:
        if not isinstance(t.get("id"), str) or t.get("role") is None or t.get("timestamp") is None:
            raise ExportFileError(f"session {session['id']}: a turn lacks turn_id, role or timestamp")
        t["content"] = t["content"] or ""
    turns.sort(key=lambda t: t["idx"] if isinstance(t.get("idx"), int) else 0)
    for t in turns:
        del t["idx"]  # import_session numbers turns by their position
    return session, turns, episodes


def _check_header(head: Any) -> None:
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise ExportFileError(f"not a {FORMAT} file (no \"format\": \"{FORMAT}\")")
    if head.get("version") != VERSION:
        raise ExportFileError(f"unsupported {FORMAT} version {head.get('version')!r} (this reads {VERSION})")


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
                for line in fh:
                    line = line.rstrip("\n")
                    if line in ("]}", ""):
                        continue
                    try:
                        yield json.loads(line[:-1] if line.endswith(",") else line)
                    except ValueError as exc:
                        raise ExportFileError(f"damaged session line: {exc}") from None
                return
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ExportFileError(f"not valid JSON ({exc})") from None
    _check_header(data)
    if not isinstance(data.get("sessions"), list):
        raise ExportFileError("'sessions' is not a list")
    yield from data["sessions"]


def import_file(
    import_session: Callable[..., dict[str, Any]],
    path: str | Path,
    progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, Any]:
    """Import every session of one export file; returns ``{imported: [...], turns}``."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ExportFileError(f"{p}: no such file")
    imported: list[dict[str, Any]] = []
    try:
        for i, record in enumerate(iter_records(p), 1):
            session, turns, episodes = session_from_record(record)
            imported.append(import_session(session, turns, episodes))
            if progress:
                progress(i, 0, session["id"])
    except UnicodeDecodeError:
        raise ExportFileError(f"{p}: not valid UTF-8") from None
    return {"path": str(p), "imported": imported, "turns": sum(r["turns"] for r in imported)}


@import_group.command("json")
@click.argument("path", type=click.Path())
@click.option("--no-index", is_flag=True, help="skip embedding (keyword search only)")
@click.option("--json", "as_json", is_flag=True, help="print the import report as JSON")
@click.pass_context
def import_json(ctx: click.Context, path: str, no_index: bool, as_json: bool) -> None:
    """A `memviewer export --format json` file (idempotent: re-importing changes nothing)."""
    with open_service(ctx) as svc:
        try:
            report = import_file(svc.import_session, path)
        except ExportFileError as exc:
            raise click.ClickException(str(exc)) from None
        if not no_index and report["imported"]:
            svc.sync_index([r["session_id"] for r in report["imported"]])
    if as_json:
        emit_json(report)
    else:
        new = sum(r["new_turns"] for r in report["imported"])
        click.echo(f"imported {len(report['imported'])} sessions ({report['turns']} turns, {new} new)")
