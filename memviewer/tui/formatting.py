"""How stored data looks on screen: dates, badges, turns, episodes.

Everything returns ``rich.text.Text`` built from plain strings, never markup:
stored text is shown verbatim, so a turn that contains ``[bold]`` or Markdown
shows those characters rather than being interpreted. Dates are absolute
(UTC, as stored) so screenshots and snapshots do not drift with the clock.

Verbatim stops at the terminal's own language: every stored string passes
``printable`` on its way to the screen, so an ESC, another control byte or a
bidi override in a turn is shown as a visible symbol instead of clearing,
recolouring or retitling the user's terminal (the stored data is unchanged).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from rich.text import Text

from memviewer.present.snippets import anchor_archived
from memviewer.present.snippets import tool_call_names as tool_names  # one definition for CLI and TUI

AUTOMATED_SOURCES = frozenset({"scheduled", "automated", "cron", "system", "batch"})
LINEAGE_KEYS = ("lineage_id", "root_session_id", "thread_id")
ROLE_STYLES = {
    "user": "bold cyan",
    "assistant": "bold green",
    "tool": "bold magenta",
    "system": "bold yellow",
}
STATUS_STYLES = {
    "open": "green",
    "closed": "dim",
    "pruned": "yellow",
    "finalized": "green",
    "abandoned": "red",
}
COLLAPSED_LINES = 6
COLLAPSED_CHARS = 600
# C0 controls but tab and newline, DEL, C1 controls, bidi embeddings/overrides/isolates
# (which reorder what follows them), and lone UTF-16 surrogates (unencodable).
_UNSAFE_CLASS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
UNSAFE_CHARS = re.compile(f"[{_UNSAFE_CLASS}]")
# The same in a rendered line, where a tab or newline has no business either (the app's
# line filter drops what ``printable`` missed).
RENDERED_UNSAFE = re.compile(f"[\t\n{_UNSAFE_CLASS}]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # Control Pictures: ESC shows as ␛, NUL as ␀
    if code == 0x7F:
        return "\u2421"  # ␡
    if code <= 0x9F:
        return f"\\x{code:02x}"
    if 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    return f"\\u{code:04x}"


def printable(text: object) -> str:
    """``text`` safe to hand to the terminal, still readable: controls become visible symbols
    (``\\x1b`` -> ``␛``), CRLF becomes a newline, lone surrogates become U+FFFD."""
    out = str(text)
    if UNSAFE_CHARS.search(out) is None:
        return out
    return UNSAFE_CHARS.sub(_visible, out.replace("\r\n", "\n"))


def short_time(iso: str | None) -> str:
    """``2025-01-15T10:32:07.5Z`` -> ``2025-01-15 10:32`` (UTC, as stored)."""
    if not iso:
        return ""
    return printable(f"{iso[:10]} {iso[11:16]}")


def long_time(iso: str | None) -> str:
    if not iso:
        return ""
    return printable(f"{iso[:10]} {iso[11:19]}")


def clock_time(iso: str | None) -> str:
    return printable(iso[11:19]) if iso else ""


def one_line(text: object, width: int) -> str:
    """Whitespace collapsed to single spaces, made ``printable``, cut to ``width`` with an ellipsis."""
    flat = printable(" ".join(str(text).split()))
    return flat if len(flat) <= width else flat[: max(0, width - 1)] + "…"


def is_automated(session: Mapping[str, Any]) -> bool:
    source = (session.get("source") or "").strip().lower()
    meta = session.get("meta") or {}
    return source in AUTOMATED_SOURCES or bool(isinstance(meta, dict) and meta.get("automated"))


def lineage_of(session: Mapping[str, Any]) -> str | None:
    """The first lineage key set on the session (``parent_session_id`` is not one)."""
    for key in LINEAGE_KEYS:
        if session.get(key):
            return str(session[key])
    return None


def badges(session: Mapping[str, Any]) -> Text:
    out = Text()
    if is_automated(session):
        out.append("auto", style="bold yellow")
    if lineage_of(session):
        if out:
            out.append(" ")
        out.append("lineage", style="bold blue")
    if session.get("archived_turns"):
        if out:
            out.append(" ")
        out.append("compacted", style="magenta")
    return out


def annotation_badge(mark: Mapping[str, Any] | None, note_width: int = 0) -> Text:
    """The user's tags (``#bug``) and a note marker (``✎``, with the note's start when
    ``note_width``) for a session row or a turn header; empty when there are none."""
    out = Text()
    if not mark:
        return out
    for tag in mark.get("tags") or []:
        if out:
            out.append(" ")
        out.append(f"#{printable(tag)}", style="bold cyan")
    note = mark.get("note")
    if note:
        if out:
            out.append(" ")
        out.append("✎", style="bold cyan")
        if note_width:
            out.append(" " + one_line(str(note), note_width), style="italic cyan")
    return out


def status_text(status: str | None) -> Text:
    status = status or ""
    return Text(printable(status), style=STATUS_STYLES.get(status, ""))


def scope_label(session: Mapping[str, Any]) -> str:
    scope, scope_id = session.get("scope") or "", session.get("scope_id") or ""
    return printable(f"{scope}:{scope_id}" if scope_id else scope)


def _pretty_json(value: Any) -> str:
    try:
        return printable(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str))
    except (TypeError, ValueError):
        return printable(repr(value))


def json_text(value: Any) -> Text:
    """Indented JSON with keys, strings and numbers coloured (Rich's JSON highlighter)."""
    from rich.highlighter import JSONHighlighter

    text = Text(_pretty_json(value))
    JSONHighlighter().highlight(text)
    return text


def _collapse(content: str) -> tuple[str, int]:
    """The first lines of ``content`` and how many lines were hidden."""
    lines = content.splitlines() or [""]
    shown = lines[:COLLAPSED_LINES]
    text = "\n".join(shown)
    if len(text) > COLLAPSED_CHARS:
        text = text[:COLLAPSED_CHARS] + "…"
    return text, max(0, len(lines) - len(shown))


MATCH_STYLE = "bold black on yellow"


def highlight(text: Text, terms: tuple[str, ...], start: int = 0) -> Text:
    """Mark every match of the search ``terms`` in ``text`` (from offset ``start``)."""
    from memviewer.present.highlight import match_spans

    if terms:
        for a, b in match_spans(text.plain[start:], terms):
            text.stylize(MATCH_STYLE, start + a, start + b)
    return text


def turn_text(
    turn: Mapping[str, Any], *, expanded: bool = False, anchor: bool = False, terms: tuple[str, ...] = ()
) -> Text:
    """One turn: a header line, then its content verbatim (folded unless expanded), with
    the search ``terms`` highlighted."""
    role = printable(turn.get("role") or "")
    head = Text()
    if anchor:
        head.append("▶ ", style="bold red")
    head.append(f"#{turn.get('index', '?'):<4} ", style="bold")
    if turn.get("is_compaction_summary"):
        head.append(" SUMMARY ", style="bold black on yellow")
        head.append(f" synthetic · replaces {turn.get('replaced_count', 0)} archived turns", style="yellow")
    else:
        head.append(f"{role:<10}", style=ROLE_STYLES.get(role, "bold"))
    head.append(f" {long_time(turn.get('timestamp'))}", style="dim")
    if turn.get("archived"):
        head.append("  archived", style="magenta")
    if turn.get("tool_call_id"):
        head.append(f"  ↳ {printable(turn['tool_call_id'])}", style="magenta")
    mark = annotation_badge(turn.get("annotation"), note_width=40)
    if mark:
        head.append("  ")
        head.append_text(mark)
    calls = turn.get("tool_calls") or []
    if calls:
        marker = "▾" if expanded else "▸"
        names = printable(", ".join(tool_names(calls)))
        head.append(f"  {marker} {len(calls)} tool call{'s' if len(calls) != 1 else ''}: ", style="magenta")
        head.append(names, style="bold magenta")
    out = head
    body_start = len(out.plain)
    content = printable(turn.get("content") or "")
    if content or not calls:  # a tool-call-only turn has no body line: its header says it all
        out.append("\n")
        if expanded:
            out.append(content)
        else:
            shown, hidden = _collapse(content)
            out.append(shown)
            if hidden or len(content) > COLLAPSED_CHARS:
                more = f" +{hidden} more lines" if hidden else ""
                out.append(f"\n  …{more} (Enter expands)", style="dim italic")
    if expanded and calls:
        out.append("\n── tool calls ──\n", style="magenta")
        out.append_text(json_text(calls))
    meta = turn.get("metadata") or {}
    if expanded and meta:
        out.append("\n── metadata ──\n", style="dim")
        out.append_text(json_text(meta))
    return highlight(out, terms, body_start)


def episode_text(episode: Mapping[str, Any], number: int, turns: int) -> Text:
    """Episode header: intent kind with the rule that fired, status, reward. One line, cut
    with an ellipsis (in a split pane a wrapped header took three rows)."""
    intent = episode.get("intent") or {}
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append(f"▌ Episode {number} ", style="bold")
    out.append(printable(intent.get("kind", "unknown")), style="bold cyan")
    out.append(
        f" ({printable(intent.get('rule_id', 'none'))}, {float(intent.get('confidence') or 0):.2f})",
        style="cyan",
    )
    status = episode.get("closed_by") or episode.get("status") or ""
    out.append("  ")
    out.append_text(status_text(status))
    if episode.get("r_task") is not None:
        out.append(f"  reward {float(episode['r_task']):.2f}", style="bold")
    out.append(f"  {turns} turns  {short_time(episode.get('started_at'))}", style="dim")
    return out


def boundary_text(archived: int, first_active: int | None, *, side: str) -> Text:
    """The line that marks where compaction cut the session."""
    if side == "archived":
        tail = (
            f"active window continues at #{first_active}" if first_active is not None else "no active turns"
        )
        label = f" compaction boundary · {archived} turns archived above · {tail} "
    else:
        label = f" compaction boundary · {archived} earlier turns archived (see archived view) "
    return Text(f"━━{label}━━", style="bold magenta")


def hit_text(hit: Mapping[str, Any], terms: tuple[str, ...] = ()) -> Text:
    """A keyword search hit: title, when, score, anchor, and its snippet verbatim with the
    query's terms highlighted."""
    out = Text()
    out.append(one_line(hit.get("title") or hit.get("session_id") or "", 60), style="bold")
    out.append(f"  {short_time(hit.get('when'))}", style="dim")
    score = hit.get("score")
    if isinstance(score, int | float):
        out.append(f"  score {score:.3f}", style="green")
    if hit.get("anchor_index") is not None:
        out.append(f"  at #{hit['anchor_index']}", style="cyan")
        if anchor_archived(hit):  # compacted out of the agent's window: the agent no longer sees it
            out.append(" (archived)", style="magenta")
    out.append(f"  {printable(hit.get('session_id', ''))}", style="dim")
    out.append("\n  ")
    start = len(out.plain)
    out.append(one_line(hit.get("snippet") or "", 200), style="italic")
    return highlight(out, terms, start)
