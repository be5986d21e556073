"""Helpers every command uses: settings from the context, JSON and table
output, errors with a hint and a non-zero exit, progress only on a TTY."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

import click

from memviewer.config import Settings
from memviewer.errors import MemviewerError


def settings_of(ctx: click.Context) -> Settings:
    return ctx.find_root().obj["settings"]


def dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, default=str)


def emit_json(data: Any) -> None:
    click.echo(dumps(data))


def fail(message: str, *, hint: str | None = None, code: int = 1, data: Any = None) -> NoReturn:
    """Print a clear error (JSON when ``data`` is given) and exit non-zero."""
    if data is not None:
        emit_json(data)
    else:
        click.echo(f"error: {message}", err=True)
        if hint:
            click.echo(f"hint: {hint}", err=True)
    sys.exit(code)


def error_object(message: str, hint: str | None = None, code: str | None = None) -> dict[str, Any]:
    """The JSON a ``--json`` command prints instead of an ``error:`` line."""
    out: dict[str, Any] = {"error": message}
    if code:
        out["code"] = code
    if hint:
        out["hint"] = hint
    return out


def fail_maybe_json(
    as_json: bool, message: str, *, hint: str | None = None, code: str | None = None
) -> NoReturn:
    """``fail`` that keeps stdout parseable for a ``--json`` caller: ``{"error", "code", "hint"}``."""
    fail(message, hint=hint, data=error_object(message, hint, code) if as_json else None)


def check_text(value: str | None, what: str, *, as_json: bool = False) -> None:
    """Refuse an argument that is not valid UTF-8 text.

    Python decodes undecodable argv bytes to lone surrogates; they would reach
    SQLite or the tokenizer and fail there with a traceback.
    """
    if value is None:
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        try:  # show the bytes argv really held (Python keeps them as surrogate escapes)
            shown = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:
            shown = value.encode("utf-8", "backslashreplace").decode("utf-8")
        fail_maybe_json(
            as_json,
            f"{what} is not valid UTF-8 text: '{shown}'",
            hint="check the terminal's encoding or the bytes the argument came from",
            code="invalid_argument",
        )


@contextmanager
def open_service(
    ctx: click.Context, *, readonly: bool = False, json_errors: bool = False, **kwargs: Any
) -> Iterator[Any]:
    """An in-process ``MemoryService`` for this command's duration.

    ``json_errors``: the command prints ``--json``, so a failure is a JSON error object too.
    """
    from memviewer.service import MemoryService

    settings = settings_of(ctx)
    home_was_missing = readonly and not settings.home_path.exists()  # a reader expected data there
    if readonly and not (settings.home_path / "memviewer.db").exists():
        readonly = False  # first run: create the store rather than fail
    try:
        service = MemoryService(settings, readonly=readonly, **kwargs)
    except MemviewerError as exc:
        fail_maybe_json(json_errors, exc.message, hint=(exc.data or {}).get("hint"), code=exc.code)
    if home_was_missing:  # a mistyped --home would otherwise just look like an empty store
        click.echo(f"note: {settings.home_path} did not exist; started a new, empty store there", err=True)
    try:
        yield service
    except MemviewerError as exc:  # the last net: a clear message, never a traceback
        hint = None
        if (exc.data or {}).get("reason") == "storage_full":
            hint = (
                f"free space on the disk holding {settings.home_path}, then run the command "
                "again (what was stored stays; imports and replays are idempotent)"
            )
        fail_maybe_json(json_errors, exc.message, hint=hint or (exc.data or {}).get("hint"), code=exc.code)
    finally:
        service.close()


def print_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    title: str | None = None,
    *,
    whole: Sequence[str] = (),
    highlight: Sequence[str] = (),
) -> None:
    """A readable table on a TTY; plain tab-separated text when piped.

    Columns named in ``whole`` (ids meant to be pasted into another command) are never cut
    or folded; matches of the ``highlight`` terms are shown bold yellow on a TTY. Cell
    text is never read as Rich markup (a stored ``[/]`` is text).
    """
    if not sys.stdout.isatty():
        click.echo("\t".join(columns))
        for row in rows:
            click.echo("\t".join("" if v is None else str(v) for v in row))
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from memviewer.recall.highlight import match_spans

    terms = tuple(highlight)
    table = Table(title=title, show_lines=False, header_style="bold")
    for i, col in enumerate(columns):
        width = max([len(col)] + [len(str("" if r[i] is None else r[i])) for r in rows])
        if col in whole or width <= 12:  # ids whole; short values (counts, dates) unwrapped
            table.add_column(col, no_wrap=True, min_width=width)
        else:
            table.add_column(col, overflow="fold", min_width=min(width, 8))
    for row in rows:
        cells = []
        for v in row:
            cell = Text("" if v is None else str(v))
            for start, end in match_spans(cell.plain, terms):
                cell.stylize("bold yellow", start, end)
            cells.append(cell)
        table.add_row(*cells)
    Console().print(table)


def progress_callback(label: str) -> tuple[Callable[[int, int, str], None] | None, Callable[[], None]]:
    """A ``(done, total, item)`` callback drawing a bar on a TTY, else None.

    A new total, or a count going backwards (the indexer's turns, then its
    summaries), closes the bar and starts the next one.
    """
    if not sys.stderr.isatty():
        return None, lambda: None
    state: dict[str, Any] = {}

    def close() -> None:
        if "bar" in state:
            state.pop("bar").__exit__(None, None, None)

    def update(done: int, total: int, _item: str) -> None:
        bar = state.get("bar")
        if bar is not None and (total != state.get("total") or done < bar.pos):
            close()
            bar = None
        if bar is None:
            bar = click.progressbar(length=total, label=label, file=sys.stderr)
            bar.__enter__()
            state["bar"], state["total"] = bar, total
        bar.update(done - bar.pos)

    return update, close


def short(text: str | None, n: int = 60) -> str:
    s = " ".join((text or "").split())
    return s if len(s) <= n else s[: n - 1] + "…"
