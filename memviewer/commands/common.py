"""Helpers every command uses: settings from the context, JSON and table
output, errors with a hint and a non-zero exit, progress only on a TTY, and the
one place stored text is made safe for a terminal (``visible``, ``VisibleStream``)."""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, cast

import click

from memviewer.errors import MemviewerError

if TYPE_CHECKING:
    from memviewer.config import Settings  # pydantic-settings: ~0.1 s to import, paid when loaded
    from memviewer.service import MemoryService


def settings_of(ctx: click.Context) -> Settings:
    """The command's full ``Settings``, built on first use: the root group resolves only the
    home and the socket (``memviewer.root_config``), so a command that never asks (a search
    through the hub) never imports pydantic-settings. A bad value of any key ends the command
    here with the error the root group gave before (exit 1)."""
    obj = ctx.find_root().obj
    if "settings" not in obj:
        obj["settings"] = obj.pop("load_settings")()
    return cast("Settings", obj["settings"])


# -- stored text on a terminal ------------------------------------------------------------
# C0 controls but newline and tab, DEL, C1 controls (U+0080-U+009F: a terminal may read U+009B
# as CSI) and lone surrogates (they cannot be encoded; only a broken source holds them).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
# What JSON leaves raw with ensure_ascii=False although it is no text: DEL, C1, lone surrogates.
_JSON_RAW = re.compile("[\x7f-\x9f\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ch == "\r":
        return "\\r"
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x20 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every control character shown as an escape, as ``ls`` shows a name.

    ESC becomes ``\\x1b`` (so OSC 0/8/52 and CSI sequences arrive as inert text), NUL
    ``\\x00``, a lone CR ``\\r``; DEL, C1 and lone surrogates become ``\\u007f``-style
    escapes, which are also JSON escapes, so JSON printed through this stays valid and
    decodes to the same strings. Newline and tab stay (multi-line text stays readable), and
    a CR before a newline goes (a Windows line end is a line end).
    """
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(_escape, text.replace("\r\n", "\n"))


class VisibleStream(io.TextIOBase):
    """A terminal's text stream that writes everything through ``visible``.

    Installed once for every command (``install_visible_output``), so no command can print
    a stored title, turn or query that retitles the terminal (OSC 0), writes the clipboard
    (OSC 52) or hides a link (OSC 8). It has no ``buffer``: bytes cannot bypass it (click
    then writes text). Output that must style the terminal itself (Rich tables, progress
    bars) goes to ``raw_stream`` with its stored parts passed through ``visible`` first.
    """

    def __init__(self, raw: TextIO) -> None:
        super().__init__()
        self.raw = raw

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        self.raw.write(visible(s))
        return len(s)

    def writelines(self, lines: Iterable[str]) -> None:  # type: ignore[override]
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.raw.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return self.raw.errors

    @property
    def closed(self) -> bool:
        return self.raw.closed

    def close(self) -> None:
        self.raw.close()


def raw_stream(stream: TextIO) -> TextIO:
    """The terminal under a ``VisibleStream`` (or ``stream`` itself)."""
    return stream.raw if isinstance(stream, VisibleStream) else stream


def install_visible_output() -> Callable[[], None]:
    """Wrap ``sys.stdout`` / ``sys.stderr`` in a ``VisibleStream`` where they are terminals;
    returns the function that puts them back. Piped output is left exact."""
    saved = (sys.stdout, sys.stderr)
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or isinstance(stream, VisibleStream):
            continue
        try:
            tty = stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        if tty:
            setattr(sys, name, VisibleStream(stream))

    def restore() -> None:
        sys.stdout, sys.stderr = saved

    return restore


def dumps(data: Any) -> str:
    """JSON for ``--json``: exact strings (decoding gives back every stored character) with
    no raw control character in the text (JSON escapes C0; DEL, C1 and lone surrogates get
    ``\\u`` escapes here), so printing it on a terminal is safe and ``visible`` leaves it as is."""
    text = json.dumps(data, ensure_ascii=False, default=str)
    if _JSON_RAW.search(text) is None:
        return text
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


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


def usage_error_object(exc: click.UsageError) -> dict[str, Any]:
    """A click usage error (unknown option, bad or missing value, missing argument) as the
    ``--json`` error object: code ``invalid_argument``, the hint names the command's help.

    A command whose JSON errors have more keys (``search``: ``success``, ``mode``) says so
    with a ``json_error_head`` class attribute; they come first, as in its own errors.
    """
    from memviewer.errors import INVALID_ARGUMENT

    failed = exc.ctx
    hint = f"see '{failed.command_path} --help'" if failed is not None else None
    head = dict(getattr(failed.command, "json_error_head", {})) if failed is not None else {}
    return {**head, **error_object(exc.format_message(), hint, INVALID_ARGUMENT)}


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
) -> Iterator[MemoryService]:
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
        fail_maybe_json(json_errors, exc.message, hint=exc.hint, code=exc.code)
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
        fail_maybe_json(json_errors, exc.message, hint=hint or exc.hint, code=exc.code)
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

    from memviewer.present.highlight import match_spans

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
            cell = Text(visible("" if v is None else str(v)))
            for start, end in match_spans(cell.plain, terms):
                cell.stylize("bold yellow", start, end)
            cells.append(cell)
        table.add_row(*cells)
    Console(file=raw_stream(sys.stdout)).print(table)


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
            bar = click.progressbar(length=total, label=label, file=raw_stream(sys.stderr))
            bar.__enter__()
            state["bar"], state["total"] = bar, total
        bar.update(done - bar.pos)

    return update, close


def short(text: str | None, n: int = 60) -> str:
    s = " ".join((text or "").split())
    return s if len(s) <= n else s[: n - 1] + "…"
