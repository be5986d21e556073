"""Handing text out of the viewer: the clipboard (OSC 52, so it works over SSH) and
``$PAGER`` / ``$EDITOR`` (the app is suspended while they run).

The texts are built by pure functions here (testable without an app): a turn as plain
text, a recall as a CLI command that reproduces it and as its JSON result.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import tempfile
from typing import Any

from memviewer.present.snippets import text_or_tool_calls
from memviewer.tui.formatting import long_time


def turn_plain(turn: dict[str, Any], session_id: str) -> str:
    """One turn as a reader wants to paste it: a header line, the text, calls and metadata."""
    head = f"#{turn.get('index')} {turn.get('role')} · {session_id}"
    if turn.get("timestamp") is not None:
        head += f" · {long_time(turn['timestamp'])} UTC"
    if turn.get("archived"):
        head += " · archived"
    parts = [head, "", text_or_tool_calls(turn.get("content"), turn.get("tool_calls"))]
    if turn.get("tool_calls") and turn.get("content"):
        parts += ["", "tool calls:", json.dumps(turn["tool_calls"], indent=2, ensure_ascii=False)]
    if turn.get("metadata"):
        parts += ["", "metadata:", json.dumps(turn["metadata"], indent=2, ensure_ascii=False, default=str)]
    return "\n".join(parts).rstrip() + "\n"


def recall_command(query: str, params: dict[str, Any], *, exe: str = "memviewer") -> str:
    """The ``memviewer recall`` command line that reruns this recall (as of the same moment)."""
    args = [exe, "recall", query]
    for key, flag in (("scope", "--scope"), ("scope_id", "--scope-id")):
        if params.get(key):
            args += [flag, str(params[key])]
    for key, flag in (
        ("top_sessions", "--top-sessions"),
        ("chunks_per_session", "--chunks-per-session"),
        ("top_k", "--top-k"),
    ):
        if key in params:
            args += [flag, str(int(params[key]))]
    if params.get("mode") == "flat":
        args.append("--flat")
    if params.get("as_of") is not None:
        args += ["--as-of", repr(float(params["as_of"]))]
    args.append("--json")
    return shlex.join(args)


def recall_json(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=2, ensure_ascii=False, default=str) + "\n"


def viewer_command(kind: str) -> list[str]:
    """``$PAGER`` (default ``less -R``) or ``$EDITOR`` (default ``vi``), split like a shell."""
    if kind == "editor":
        raw = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    else:
        raw = os.environ.get("PAGER") or "less -R"
    return shlex.split(raw)


def write_temp(text: str, suffix: str) -> str:
    """A private (0600) temporary file holding ``text``; the caller removes it."""
    fd, path = tempfile.mkstemp(prefix="memviewer-", suffix=suffix)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


def open_external(app: Any, text: str, kind: str, suffix: str = ".txt") -> str | None:
    """Show ``text`` in the pager or editor with the app suspended; returns an error or None.

    Where the driver cannot suspend (a headless test run, a web driver) the program still
    runs, without a terminal, so a scripted ``$PAGER`` works and a real one exits at once.
    """
    from textual.app import SuspendNotSupported

    command = viewer_command(kind)
    path = write_temp(text, suffix)
    try:
        try:
            with app.suspend():
                code = subprocess.run([*command, path], check=False).returncode
        except SuspendNotSupported:
            code = subprocess.run([*command, path], check=False, stdin=subprocess.DEVNULL).returncode
    except OSError as exc:
        return f"cannot run {shlex.join(command)}: {exc}"
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    return None if code == 0 else f"{shlex.join(command)} exited with {code}"
