"""Stored text printed on a terminal cannot drive it (issue 32 row 10).

The commands run as real processes with stdout and stderr on a pseudo-terminal (the tty
path), over a home whose session title and turns hold OSC 0 (window title), OSC 52
(clipboard), OSC 8 (hyperlink), a C1 CSI, DEL and NUL. No raw control byte may reach the
terminal but the newlines and the terminal's own styling; ``--json`` decodes to the exact
stored string, on a terminal and through a pipe.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from memviewer.commands.common import VisibleStream, dumps, visible
from memviewer.config import load_settings
from memviewer.service import MemoryService

OSC0 = "\x1b]0;pwned title\x07"
OSC52 = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07"
OSC8 = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
MEMVIEWER = (sys.executable, "-c", "from memviewer.cli import main; main()")
C1 = "\x9b31m"  # C1 CSI: red on a terminal that reads 8-bit controls
NASTY = f"zebra {OSC0}{OSC52}{OSC8}{C1}nul\x00del\x7f end"
TITLE = f"title {NASTY}"
CONTENT = f"zebra line one\n\tline two {NASTY}"

# What the terminal may see from memviewer's own styling (Rich's SGR colours, cursor
# show/hide and erase-line) and line ends; every other ESC is a leak.
_OWN = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\r\n|\r|\n|\t")


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "h"
    svc = MemoryService(load_settings(tmp_path / "none.toml", env={}, home=str(home)))
    svc.open_session(session_id="s1", agent="bot", title=TITLE)
    ep = svc.start_episode("s1", "zebra question")
    svc.add_turn(ep["episode_id"], "assistant", CONTENT)
    svc.close()
    return home


def _on_pty(home: Path, *args: str) -> bytes:
    """stdout and stderr of ``memviewer --home H ARGS`` on one pty, as the terminal gets them."""
    master, slave = os.openpty()
    chunks: list[bytes] = []

    def pump() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the pty
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    env = {**os.environ, "MEMVIEWER_HOME": str(home), "COLUMNS": "200", "TERM": "xterm"}
    env.pop("NO_COLOR", None)
    proc = subprocess.run(
        [*MEMVIEWER, *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=env,
        timeout=120,
        check=False,
    )
    os.close(slave)
    reader.join(30)
    os.close(master)
    out = b"".join(chunks)
    assert proc.returncode == 0, out.decode("utf-8", "replace")
    return out


def _leaks(out: bytes) -> list[bytes]:
    rest = _OWN.sub(b"", out)
    bad = re.findall(rb"[\x00-\x1f\x7f]|\xc2[\x80-\x9f]", rest)
    return bad


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return _home(tmp_path)


@pytest.mark.parametrize(
    "args",
    [
        ("sessions",),
        ("search", "zebra"),
        ("search", "--session", "s1"),
        ("tail", "--no-follow", "--from-seq", "0"),
    ],
    ids=["sessions", "search", "scroll", "tail"],
)
def test_no_raw_control_byte_reaches_the_terminal(home: Path, args: tuple[str, ...]) -> None:
    out = _on_pty(home, *args)
    assert _leaks(out) == []
    text = out.decode("utf-8")
    assert "\\x1b]0;pwned title\\x07" in text or "\\x1b]0;pwned" in text  # shown, not swallowed
    assert "\x1b]" not in text and "\x9b" not in text and "\x00" not in text


def test_multiline_text_keeps_its_lines_and_tabs(home: Path) -> None:
    out = _on_pty(home, "tail", "--no-follow", "--from-seq", "0", "--json")
    assert _leaks(out) == []  # JSON escapes C0; dumps escapes DEL and C1


@pytest.mark.parametrize("args", [("sessions", "--json"), ("search", "--session", "s1", "--json")])
def test_json_on_a_terminal_decodes_to_the_exact_string(home: Path, args: tuple[str, ...]) -> None:
    out = _on_pty(home, *args)
    assert _leaks(out) == []
    data = json.loads(out.decode("utf-8").replace("\r\n", "\n"))
    if args[0] == "sessions":
        assert data["sessions"][0]["title"] == TITLE
    else:
        assert any(m["content"] == CONTENT for m in data["messages"])


def test_json_through_a_pipe_is_exact(home: Path) -> None:
    env = {**os.environ, "MEMVIEWER_HOME": str(home)}
    proc = subprocess.run(
        [*MEMVIEWER, "tail", "--no-follow", "--from-seq", "0", "--json"],
        capture_output=True,
        env=env,
        timeout=120,
        check=True,
    )
    titles = [json.loads(line)["payload"].get("title") for line in proc.stdout.decode().splitlines()]
    assert TITLE in titles


def test_piped_plain_output_is_left_alone(home: Path) -> None:
    """Piped (not a terminal) output is the stored text itself, for scripts: unchanged."""
    env = {**os.environ, "MEMVIEWER_HOME": str(home)}
    proc = subprocess.run(
        [*MEMVIEWER, "sessions"],
        capture_output=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert OSC0.encode() in proc.stdout


# -- the formatting function and the stream, without processes ---------------------------------
def test_visible_escapes_every_control_and_keeps_lines() -> None:
    shown = visible(NASTY + "\r\nnext\rover\ttab")
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", shown)
    assert "\\x1b]0;pwned title\\x07" in shown and "\\u009b31m" in shown and "nul\\x00del\\u007f" in shown
    assert shown.endswith("\nnext\\rover\ttab")  # CRLF is a line end; a lone CR is shown
    assert visible("plain\ttext\n") == "plain\ttext\n"


def test_dumps_has_no_raw_control_and_round_trips() -> None:
    value = {"t": NASTY + "\ud800", "u": "é ü ✓"}
    text = dumps(value)
    assert not re.search("[\x00-\x1f\x7f-\x9f]", text)
    assert json.loads(text) == value
    assert visible(text) == text  # a terminal wrapper leaves JSON byte for byte
    assert "é ü ✓" in text  # non-ASCII text is not escaped


class _Tty:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, s: str) -> int:
        self.parts.append(s)
        return len(s)

    def isatty(self) -> bool:
        return True

    def flush(self) -> None:
        pass


def test_stream_escapes_writes_and_refuses_bytes() -> None:
    raw = _Tty()
    stream = VisibleStream(raw)  # type: ignore[arg-type]
    print(TITLE, file=stream)
    assert "".join(raw.parts) == visible(TITLE) + "\n"
    with pytest.raises(TypeError):
        stream.write(b"\x1b]0;x\x07")  # type: ignore[arg-type]
    assert not hasattr(stream, "buffer")
