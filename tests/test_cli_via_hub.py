"""``memviewer search`` and ``recall`` through a real hub process give the JSON the
in-process path gives, and the CLI then imports none of the heavy layers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memviewer.wire.testing import HubProcess

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parent / "fixtures" / "praisonai"
HEAVY = (
    "memviewer.recall.keyword",
    "memviewer.service",
    "lancedb",
    "onnxruntime",
    "numpy",
    "sqlalchemy",
    # the full settings and the request models: ~0.13 s of every command's start (issue 30)
    "pydantic",
    "pydantic_settings",
)
# Runs the CLI, then names the heavy modules it imported on stderr's last line.
RUN = (
    "import sys, json\n"
    "from memviewer.cli import cli\n"
    "try:\n"
    "    cli.main(args=sys.argv[1:], prog_name='memviewer')\n"
    "except SystemExit as exc:\n"
    "    code = exc.code\n"
    "else:\n"
    "    code = 0\n"
    f"print('MODULES ' + json.dumps([m for m in {HEAVY!r} if m in sys.modules]), file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def _cli(home: Path, socket: Path, *args: str) -> tuple[int, str, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVIEWER_")}
    env.update({"MEMVIEWER_CONFIG": os.devnull, "MEMVIEWER_SOCKET": str(socket)})
    proc = subprocess.run(
        [sys.executable, "-c", RUN, "--home", str(home), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("MODULES "), proc.stderr
    return proc.returncode, proc.stdout, json.loads(last[len("MODULES ") :])


def _import(home: Path, socket: Path, *flags: str) -> None:
    code, out, _ = _cli(home, socket, "import", "praisonai", str(FIXTURES), *flags)
    assert code == 0, out


SEARCHES = [
    ("search", "refund policy", "--json"),
    ("search", "迁移", "--json"),
    ("search", "nothing-matches-this-zzz", "--json"),
    ("search", "--json"),  # browse
    # the contract's error dict (an out-of-range --limit is click's usage error, before either)
    ("search", "--session", "no-such-session", "--json"),
    ("sessions", "--json"),
    ("sessions", "--scope", "no-such-scope", "--json"),
    ("sessions",),
]


def test_search_through_the_hub_is_byte_identical(tmp_path: Path, short_tmp: Path) -> None:
    home = tmp_path / "home"
    nohub = short_tmp / "nohub.sock"
    _import(home, nohub, "--no-index")
    local = {args: _cli(home, nohub, *args) for args in SEARCHES}
    sock = short_tmp / "hub.sock"
    with HubProcess(home, sock, args=("--no-index",)):
        remote = {args: _cli(home, sock, *args) for args in SEARCHES}
        code, out, _ = _cli(home, sock, "search", "--session", "refund-policy-a1", "--json")
        assert code == 0 and json.loads(out)["mode"] == "scroll"
        # one connection per command: the probe's (which hub serves the home) carries the
        # search too (it was four: three probes and a reader)
        from memviewer.wire.remote import RemoteService

        def connections() -> int:
            with RemoteService(sock) as remote:
                return int(remote.stats()["hub"]["counters"]["connections_total"])

        before = connections()
        assert _cli(home, sock, *SEARCHES[0])[0] == 0
        assert connections() - before == 1 + 1  # this count's own connection, then the command's one
    for args in SEARCHES:
        assert remote[args][:2] == local[args][:2], args
        assert "memviewer.service" in local[args][2]
    for args in SEARCHES[:4] + SEARCHES[5:]:  # answered by the hub: no store, no search layer
        assert remote[args][2] == [], (args, remote[args][2])
    assert json.loads(local[SEARCHES[0]][1])["total_found"] > 0


@pytest.mark.model
def test_recall_through_the_hub_matches_in_process(tmp_path: Path, short_tmp: Path) -> None:
    home = tmp_path / "home"
    nohub = short_tmp / "nohub.sock"
    _import(home, nohub, "--wait")
    query = ("recall", "what is the refund policy for annual plans?", "--json")
    code, local_out, local_mods = _cli(home, nohub, *query)
    assert code == 0, local_out
    assert "onnxruntime" in local_mods
    sock = short_tmp / "hub.sock"
    with HubProcess(home, sock, args=()):
        code, remote_out, remote_mods = _cli(home, sock, *query)
        human = _cli(home, sock, "recall", "refund policy")
    assert code == 0, remote_out
    assert remote_mods == []  # no model, no LanceDB, no numpy in the CLI process
    local, remote = json.loads(local_out), json.loads(remote_out)
    local["diagnostics"].pop("timings_ms")
    remote["diagnostics"].pop("timings_ms")
    assert remote == local and local["results"]
    assert human[0] == 0 and "stage 2 candidates" in human[1]
