"""One home, one hub: two homes never share a default hub, and no client uses another home's hub.

Real processes: a hub for home A on A's default socket; every command, the
Publisher, ``tail``, ``open_reader`` and the viewer's decision for home B.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memviewer import paths
from memviewer.client import Publisher
from memviewer.config import load_settings
from memviewer.errors import MemviewerError
from memviewer.wire.probe import hub_hello, serving_hub
from memviewer.wire.remote import RemoteService
from memviewer.wire.testing import HubProcess

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-c", "from memviewer.cli import main; main()"]


def run(*args: str, home: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVIEWER_")}
    env["MEMVIEWER_CONFIG"] = os.devnull
    return subprocess.run(
        [*CLI, "--home", str(home), *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def test_two_homes_get_two_default_hubs_and_never_cross(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    sock_a = paths.home_socket(a)
    assert sock_a != paths.home_socket(b) and sock_a.parent.parent == paths.runtime_dir()
    assert len(os.fsencode(str(sock_a))) <= 107
    with HubProcess(a, sock_a, export_socket=False) as hub_a:
        hello = hub_hello(sock_a)
        assert hello is not None and hello["home"] == str(a.resolve()) and hello["store_id"]
        assert (a / "store.id").read_text().strip() == hello["store_id"]

        # `--home B demo` while A's hub runs: B gets the demo (in-process), A gets nothing
        r = run("demo", "--no-index", "--json", home=b)
        assert r.returncode == 0, r.stderr
        report = json.loads(r.stdout)
        assert report["via"] == "in-process store" and report["created"]["sessions"] > 0
        with RemoteService(sock_a) as remote:
            assert remote.sessions()["total"] == 0
        r = run("sessions", "--json", home=b)
        assert r.returncode == 0 and json.loads(r.stdout)["total"] == report["created"]["sessions"]

        # an explicit --socket to A's hub for home B: one error naming both homes, for every command
        both = f"serves the home {a.resolve()}, not {b.resolve()}"
        for args in (
            ("sessions",),
            ("tail", "--no-follow"),
            ("demo", "--no-index"),
            ("serve", "--no-index"),
        ):
            r = run("--socket", str(sock_a), *args, home=b)
            assert r.returncode == 1, (args, r.stdout, r.stderr)
            assert both in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
        r = run("--socket", str(sock_a), "doctor", "--json", home=b)
        check = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["hub"]
        assert r.returncode == 1 and not check["ok"] and both in check["detail"]

        # the library: open_reader / serving_hub, and the viewer's choice
        settings_b = load_settings(tmp_path / "none.toml", env={}, home=str(b), socket=str(sock_a))
        with pytest.raises(MemviewerError, match="serves the home"):
            serving_hub(settings_b)
        from memviewer.api import open_reader

        with pytest.raises(MemviewerError, match="serves the home"):
            open_reader(settings_b)
        from memviewer.tui.hub_link import decide

        status = decide(settings_b.socket_path, "auto", settings_b)
        assert status.role == "unavailable" and both in status.detail

        # a Publisher for home B pointed at A's hub: refused, spooled in B, nothing reaches A
        pub = Publisher(sock_a, home=b, max_backoff=0.1)
        try:
            pub.open_session(agent="wrong-hub", session_id="s-b")
            assert pub.flush(1.0) is False
            assert pub.stats()["hub_refused"] and both in pub.stats()["hub_refused"]
            assert pub.stats()["connects"] == 0
        finally:
            assert pub.close(timeout=0.5) is False
        assert list(paths.spool_dir(b).glob("*.ndjson"))  # kept for B's own hub
        with RemoteService(sock_a) as remote:
            assert remote.sessions()["total"] == 0
        assert "wrong-hub" not in hub_a.log()

        # the default Publisher for home B uses B's socket: no hub there yet, so it spools
        with HubProcess(b, paths.home_socket(b), export_socket=False):
            pub_b = Publisher(home=b)
            try:
                assert pub_b.socket_path == paths.home_socket(b)
                assert pub_b.flush(20) is True  # B's hub took the spooled command too
            finally:
                pub_b.close()
            with RemoteService(paths.home_socket(b)) as remote:
                assert remote.session("s-b")["session"]["agent"] == "wrong-hub"
        with RemoteService(sock_a) as remote:
            assert remote.sessions()["total"] == 0


def test_a_follower_subscriber_refuses_another_homes_hub(tmp_path: Path, short_tmp: Path) -> None:
    """`tail` (and the viewer's Live screen) on a socket whose hub serves another home waits, saying why."""
    import asyncio

    from memviewer.wire.subscriber import Subscriber

    sock = short_tmp / "hub.sock"
    with HubProcess(tmp_path / "a", sock):

        async def first_state() -> str:
            sub = Subscriber(sock, home=tmp_path / "b", min_backoff=0.05)
            async for item in sub.stream(states=True):
                if getattr(item, "status", "") == "reconnecting" and item.detail:  # type: ignore[union-attr]
                    sub.close()
                    return item.detail  # type: ignore[union-attr]
            return ""

        detail = asyncio.run(asyncio.wait_for(first_state(), 20))
        assert "serves the home" in detail and str((tmp_path / "b").resolve()) in detail
