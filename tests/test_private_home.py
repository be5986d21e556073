"""Another local user can neither read the home nor impersonate the hub.

* the home is 0700 and every file in it 0600 whatever the umask; ``doctor``
  tightens a home with looser modes;
* a runtime folder or socket of another user is refused by the hub and every
  client (a second local user squats ``/tmp/memviewer-<uid>`` and runs a fake hub);
* lock and owner files never follow symlinks; a home or spool file of another
  user is refused (a planted spool is never replayed).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from memviewer import paths
from memviewer.client import Publisher
from memviewer.wire.remote import RemoteService
from memviewer.wire.testing import HubProcess, hub_env

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-c", "from memviewer.cli import main; main()"]
OTHER_UID = 54321  # an owner that is not us, for chown where no real account is needed
SQUATTER = "mvsquat"


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture(scope="module")
def other_user() -> Iterator[pwd.struct_passwd]:
    """A second local account (created for the test when we are root)."""
    if os.getuid() != 0:
        pytest.skip("creating a second local user needs root")
    created = False
    try:
        entry = pwd.getpwnam(SQUATTER)
    except KeyError:
        r = subprocess.run(["useradd", "-M", "-r", "-s", "/usr/sbin/nologin", SQUATTER], capture_output=True)
        if r.returncode != 0:
            pytest.skip(f"useradd failed: {r.stderr.decode(errors='replace').strip()}")
        created = True
        entry = pwd.getpwnam(SQUATTER)
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("no system python3 the second user can run")
    try:
        yield entry
    finally:
        if created:
            subprocess.run(["userdel", SQUATTER], capture_output=True)


def test_the_home_is_private_whatever_the_umask(tmp_path: Path, short_tmp: Path) -> None:
    home = tmp_path / "home"
    sock = short_tmp / "hub.sock"
    old = os.umask(0)  # the hub process inherits a umask that would make every file 0666
    try:
        hub = HubProcess(home, sock).start()
    finally:
        os.umask(old)
    try:
        with Publisher(sock, home=home) as pub:
            eid = pub.start_episode(pub.open_session(agent="private"), "my secret plans")
            pub.add_turn(eid, "assistant", "noted")
            assert pub.flush(10)
        assert hub.stop() == 0
    finally:
        hub.kill()
    # the spool, a lock, the db and its WAL/SHM, the store id: nothing readable by others
    spool = Publisher(short_tmp / "none.sock", home=home)
    spool.open_session(agent="spooled")
    assert spool.close(timeout=0.2) is False
    found = list(home.rglob("*"))
    names = {p.name for p in found}
    assert {"memviewer.db", "store.id", "hub.owner", "spool"} <= names
    assert any(p.suffix == ".ndjson" for p in found)
    assert _mode(home) == 0o700
    loose = [(str(p), oct(_mode(p))) for p in found if _mode(p) & 0o077]
    assert loose == []


def test_doctor_tightens_a_loose_home_and_flags_a_foreign_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = hub_env(home, None)
    r = _cli("demo", "--no-index", env=env)
    assert r.returncode == 0, r.stderr
    os.chmod(home, 0o755)  # as an older release (or a copy) left it
    os.chmod(home / "memviewer.db", 0o644)
    r = _cli("doctor", "--json", env=env)
    check = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["permissions"]
    assert check["ok"] and check["tightened"] >= 2 and "memviewer.db 0644" in check["detail"]
    assert _mode(home) == 0o700 and _mode(home / "memviewer.db") == 0o600
    planted = home / "cache-planted"
    planted.write_text("x")
    os.chown(planted, OTHER_UID, OTHER_UID)
    r = _cli("doctor", "--json", env=env)
    check = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["permissions"]
    assert r.returncode == 1 and not check["ok"] and f"cache-planted (uid {OTHER_UID})" in check["detail"]


def test_a_home_of_another_user_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    os.chown(home, OTHER_UID, OTHER_UID)
    env = hub_env(home, None)
    for args in (("sessions",), ("serve", "--no-index")):
        r = _cli(*args, env=env)
        assert r.returncode == 1, r.stderr
        assert (
            f"{home}: it belongs to uid {OTHER_UID}" in r.stderr or f"belongs to uid {OTHER_UID}" in r.stderr
        )
        assert "Traceback" not in r.stderr
    assert list(home.iterdir()) == []  # nothing was written into it


def test_a_planted_spool_file_is_never_replayed(tmp_path: Path, short_tmp: Path) -> None:
    home = tmp_path / "home"
    spool = paths.spool_dir(home)
    spool.mkdir(parents=True, mode=0o700)
    line = json.dumps({"cid": 1, "op": "open_session", "session_id": "s-planted", "agent": "evil"})
    planted = spool / "pub-01a20000-0000-7000-8000-000000000001-1.ndjson"
    planted.write_text(line + "\n")
    os.chown(planted, OTHER_UID, OTHER_UID)  # another user's file
    writable = spool / "pub-01a20000-0000-7000-8000-000000000002-1.ndjson"
    writable.write_text(line.replace("s-planted", "s-writable") + "\n")
    os.chmod(writable, 0o666)  # ours, but anyone could have written it
    linked = spool / "pub-01a20000-0000-7000-8000-000000000003-1.ndjson"
    outside = tmp_path / "outside.ndjson"
    outside.write_text(line.replace("s-planted", "s-linked") + "\n")
    linked.symlink_to(outside)
    sock = short_tmp / "hub.sock"
    with HubProcess(home, sock) as hub, RemoteService(sock) as remote:
        assert remote.sessions()["total"] == 0
        assert remote.stats()["hub"]["spool_ingested"][0]["refused_files"] == 3
        assert "refusing spool file" in hub.log()
    assert sorted(p.name for p in spool.iterdir()) == sorted(
        p.name + ".refused" for p in (planted, writable, linked)
    )
    assert outside.read_text().startswith("{")  # the link's target is untouched


def test_lock_and_owner_files_never_follow_symlinks(tmp_path: Path, short_tmp: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    (home / "hub.owner").symlink_to(precious)
    hub = HubProcess(home, short_tmp / "hub.sock")
    assert hub.spawn().wait(60) != 0
    assert "cannot lock the home" in hub.log()
    assert precious.read_text() == "keep me"

    (home / "hub.owner").unlink()
    other = tmp_path / "other.txt"
    other.write_text("keep me too")
    (short_tmp / "hub.sock.lock").symlink_to(other)
    hub = HubProcess(home, short_tmp / "hub.sock")
    assert hub.spawn().wait(60) != 0
    assert "cannot open the socket lock" in hub.log()
    assert other.read_text() == "keep me too"


FAKE_HUB = textwrap.dedent(
    """
    import json, os, socket, sys
    runtime, key, home = sys.argv[1], sys.argv[2], sys.argv[3]
    os.makedirs(os.path.join(runtime, key), exist_ok=True)
    os.chmod(runtime, 0o777)
    os.chmod(os.path.join(runtime, key), 0o777)
    path = os.path.join(runtime, key, "hub.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    os.chmod(path, 0o777)
    srv.listen(16)
    print("ready", flush=True)
    while True:
        conn, _ = srv.accept()
        f = conn.makefile("rwb")
        for line in f:
            msg = json.loads(line)
            print("got", msg.get("method"), flush=True)
            result = {"server": "memviewer-hub", "server_version": "0", "protocol": 1, "last_seq": 0,
                      "frame_limit": 1048576, "pid": os.getpid(), "home": home, "store_id": None}
            if msg.get("method") == "publish":
                result = {"results": [{"ok": {}} for _ in msg["params"]["commands"]]}
            f.write((json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\\n").encode())
            f.flush()
    """
)


def test_a_runtime_folder_squatted_by_another_user_is_refused_everywhere(
    tmp_path: Path, other_user: pwd.struct_passwd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No XDG_RUNTIME_DIR (cron, ssh, containers): the runtime folder is $TMPDIR/memviewer-<uid>.
    Another user creates it first (0777) and runs a fake hub there."""
    tmp = Path(tempfile.mkdtemp(prefix="mvsq-", dir="/tmp"))
    os.chmod(tmp, 0o1777)  # like /tmp
    home = tmp_path / "home"
    runtime = tmp / f"memviewer-{os.getuid()}"
    fake = subprocess.Popen(
        ["/usr/bin/python3", "-c", FAKE_HUB, str(runtime), paths.home_key(home), str(home.resolve())],
        user=other_user.pw_uid,
        group=other_user.pw_gid,
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
    )
    try:
        assert fake.stdout is not None and fake.stdout.readline().strip() == "ready"
        monkeypatch.delenv("XDG_RUNTIME_DIR")
        monkeypatch.setenv("TMPDIR", str(tmp))
        monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
        sock = paths.home_socket(home)
        assert sock.parent.parent == runtime and sock.exists()
        env = hub_env(home, None)
        owner = f"belongs to {SQUATTER} (uid {other_user.pw_uid})"

        r = _cli("serve", "--no-index", env=env)  # "already running" before
        assert r.returncode == 1 and owner in r.stderr and str(sock) in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
        r = _cli("doctor", "--json", env=env)  # "hub yes" before
        check = {c["name"]: c for c in json.loads(r.stdout)["checks"]}["hub"]
        assert r.returncode == 1 and not check["ok"] and owner in check["detail"]
        r = _cli("sessions", env=env)
        assert r.returncode == 1 and owner in r.stderr

        pub = Publisher(home=home, max_backoff=0.1)  # flush() == True against the fake before
        try:
            pub.open_session(agent="victim", title="my private data")
            assert pub.flush(1.0) is False
            assert owner in (pub.stats()["hub_refused"] or "")
        finally:
            pub.close(timeout=0.3)
        assert list(paths.spool_dir(home).glob("*.ndjson"))  # kept at home, not sent
    finally:
        fake.kill()
        out, _ = fake.communicate(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
    assert "got" not in out  # the fake hub never heard a word from any of them
