"""The OTLP receiver runs in its own process (``sources/otlp_child.py``), started by the hub
with ``spawn``: a real hub, real HTTP. A child killed with -9 is counted and started again on
the same port (what it had queued is stored); the child dies with the hub; a hub stopped right
after accepting exports stops promptly and the next hub stores every accepted batch."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from test_sources_otlp import _json_span, _turns, otlp_status, post, session_for, start_otlp_hub, wait_for

from memviewer.sources.otlp_queue import FOLDER

pytestmark = pytest.mark.integration


def body(conv: str, text: str, span_id: str) -> bytes:
    span = _json_span(span_id, conv, [{"role": "user", "parts": [{"type": "text", "content": text}]}])
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


def gone(pid: int) -> bool:
    """No such process, or a zombie nobody reaped yet (it runs no code)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def test_a_killed_receiver_process_is_started_again_on_the_same_port(
    tmp_path: Path, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub, remote, endpoint = start_otlp_hub(tmp_path / "home", short_tmp / "hub.sock", monkeypatch)
    try:
        first = otlp_status(remote)["process"]
        assert first["alive"] and first["pid"] != hub.pid and first["restarts"] == 0
        url = f"{endpoint}/v1/traces"
        assert post(url, body("proc-1", "before the kill", "a1" * 8), "application/json")[0] == 200
        wait_for(lambda: len(_turns(remote, session_for("proc-1"))) == 1, what="the first turn")
        os.kill(first["pid"], signal.SIGKILL)
        again = wait_for(
            lambda: (st := otlp_status(remote))["connected"] and st["process"]["pid"] != first["pid"] and st,
            what="a new receiver process",
        )
        assert again["counters"]["process_restarts"] == 1 and "ended (exit -9)" in again["last_error"]
        assert post(url, body("proc-1", "after the kill", "a2" * 8), "application/json")[0] == 200
        turns = wait_for(lambda: len(t := _turns(remote, session_for("proc-1"))) == 2 and t, what="turn 2")
        assert [t["content"] for t in turns] == ["before the kill", "after the kill"]
        assert otlp_status(remote)["counters"]["requests"] == 2  # the dead child's count is kept
    finally:
        remote.close()
        hub.stop()


def test_the_receiver_process_dies_with_the_hub(
    tmp_path: Path, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub, remote, _endpoint = start_otlp_hub(tmp_path / "home", short_tmp / "hub.sock", monkeypatch)
    child = otlp_status(remote)["process"]["pid"]
    remote.close()
    hub.kill()  # kill -9: no shutdown code runs in the hub
    wait_for(lambda: gone(child), what="the receiver process to end")


def test_a_stop_right_after_exports_is_prompt_and_the_next_hub_stores_them(
    tmp_path: Path, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    hub, remote, endpoint = start_otlp_hub(home, short_tmp / "hub.sock", monkeypatch)
    child = otlp_status(remote)["process"]["pid"]
    texts = [f"turn {i}" for i in range(20)]
    for i, text in enumerate(texts):  # each answered 200 once on disk: none may be lost
        status, _ = post(f"{endpoint}/v1/traces", body("stop-1", text, f"{i:016x}"), "application/json")
        assert status == 200
    remote.close()
    t0 = time.monotonic()
    assert hub.stop() == 0
    assert time.monotonic() - t0 < 10  # the hub's whole stop (the receiver's part is ≤ 3 s)
    assert gone(child)
    hub2, remote2, _ = start_otlp_hub(home, short_tmp / "hub2.sock", monkeypatch)
    try:
        sid = session_for("stop-1")
        turns = wait_for(lambda: len(t := _turns(remote2, sid)) == 20 and t, what="all turns")
        assert [t["content"] for t in turns] == texts
        wait_for(lambda: not list((home / FOLDER).glob("q-*.json")), what="the queue to empty")
    finally:
        remote2.close()
        hub2.stop()


def test_status_without_a_process_has_no_process_field() -> None:
    """The in-process receiver (no child) keeps its old status shape."""
    from memviewer.sources.otlp_http import OtlpReceiver

    assert "process" not in OtlpReceiver("127.0.0.1", 0, token="k" * 32).status()
