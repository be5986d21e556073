"""The hub's TCP listener with TLS and tokens, with the real parts: certificates made here,
a real hub process (``serve --listen 127.0.0.1:0``), real Publishers and the real CLI."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_runs import invoke
from tls_certs import Pki, make_pki

from memviewer.client import Publisher
from memviewer.store.db import Store
from memviewer.wire import protocol, tls
from memviewer.wire.hub_socket import HubError
from memviewer.wire.hub_tcp import Listen, parse_listen, server_context
from memviewer.wire.remote import RemoteService
from memviewer.wire.testing import HubProcess


@dataclass
class TlsHub:
    home: Path
    sock: Path
    url: str
    pki: Pki
    tokens: dict[str, str]  # scope -> secret

    def addr(self, token: str | None, *, ca: Path | None = None, url: str | None = None) -> tls.HubAddress:
        return tls.parse_hub(url or self.url, token=token or "", ca_file=str(ca or self.pki.ca))

    def stored(self) -> tuple[object, int]:
        """What the store holds (row counts and the last event's seq): equal means nothing
        written. Read once the recall log entries of earlier searches are written."""
        with RemoteService(self.sock) as local:  # the Unix socket: no token, as before
            _wait(lambda: local.stats()["hub"]["recall_log_waiting"] == 0)
            stats = local.stats()
            return stats["counts"], int(stats["last_seq"])


def _new_token(home: Path, name: str, scope: str) -> str:
    out = invoke(home, "token", "create", name, "--scope", scope, "--json")
    assert out.exit_code == 0, out.output
    return str(json.loads(out.stdout)["token"])


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsHub]:
    root = tmp_path_factory.mktemp("tls")
    pki = make_pki(root / "pki")
    home = root / "home"
    tokens = {scope: _new_token(home, f"t-{scope}", scope) for scope in ("publish", "read", "admin")}
    short = Path(tempfile.mkdtemp(prefix="mv-", dir="/tmp"))
    sock = short / "hub.sock"
    args = ("--no-index", "--listen", "127.0.0.1:0", "--tls-cert", str(pki.cert), "--tls-key", str(pki.key))
    with HubProcess(home, sock, args=args):
        with RemoteService(sock) as local:
            url = local.stats()["hub"]["listen"]
        assert url.startswith("tls://127.0.0.1:")
        yield TlsHub(home, sock, url, pki, tokens)


def _hello(addr: tls.HubAddress, role: str = "reader") -> dict[str, object]:
    from memviewer.wire.syncclient import RpcConnection

    with RpcConnection(addr, timeout=10) as conn:
        return dict(conn.call(protocol.HELLO, {"protocol": 1, "role": role, "client": "test"}))


def _wait(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def _publisher(hub: TlsHub, tmp: Path, token: str) -> Publisher:
    return Publisher(
        hub=hub.url,
        token=token,
        tls_ca=str(hub.pki.ca),
        home=tmp / "agent",
        spool_dir=tmp / "spool",
        connect_timeout=5.0,
        max_backoff=0.1,
    )


def _run_cli(hub: TlsHub, *args: str, token: str | None, ca: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVIEWER_")}
    env.update({"MEMVIEWER_CONFIG": os.devnull, "MEMVIEWER_HUB": hub.url})
    if token is not None:
        env["MEMVIEWER_TOKEN"] = token
    if ca:
        env["MEMVIEWER_TLS_CA"] = str(hub.pki.ca)
    home = hub.home.parent / "viewer-home"  # a viewer elsewhere: nothing read from a local store
    return subprocess.run(
        [sys.executable, "-m", "memviewer.cli", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


# -- tokens -------------------------------------------------------------------------------
def test_token_commands_store_only_a_hash_and_never_show_the_secret_again(tmp_path: Path) -> None:
    home = tmp_path / "home"
    made = invoke(home, "token", "create", "ci-runner", "--scope", "publish")
    assert made.exit_code == 0, made.output
    secret = made.stdout.strip()
    assert secret.startswith("mvt.ci-runner.") and "only time" in made.stderr
    listed = invoke(home, "token", "list", "--json")
    row = json.loads(listed.stdout)["tokens"][0]
    assert row["name"] == "ci-runner" and row["scope"] == "publish" and row["revoked_at"] is None
    assert secret not in listed.stdout and "secret" not in listed.stdout
    store = Store(f"sqlite:///{home / 'memviewer.db'}")
    try:
        with store.read() as conn:
            from memviewer.store import api_tokens

            stored = api_tokens.get(conn, "ci-runner")
        assert stored is not None and secret not in json.dumps(stored)
    finally:
        store.close()
    again = invoke(home, "token", "create", "ci-runner", "--scope", "read")
    assert again.exit_code != 0 and "exists already" in again.output
    bad = invoke(home, "token", "create", "no spaces", "--scope", "read")
    assert bad.exit_code != 0 and "must be 1-64" in bad.output
    assert invoke(home, "token", "revoke", "ci-runner").stdout.strip() == "token 'ci-runner' revoked"
    assert "already revoked" in invoke(home, "token", "revoke", "ci-runner").stdout
    missing = invoke(home, "token", "revoke", "nobody")
    assert missing.exit_code != 0 and "no token named 'nobody'" in missing.output
    assert json.loads(invoke(home, "token", "list", "--json").stdout)["tokens"][0]["revoked_at"] is not None


# -- serve --listen refusals ----------------------------------------------------------------
def test_listen_requires_tls_off_loopback_and_plaintext_only_on_request(tmp_path: Path) -> None:
    with pytest.raises(HubError, match="needs --tls-cert and --tls-key"):
        parse_listen("0.0.0.0:7600")
    with pytest.raises(HubError, match="needs --tls-cert"):
        parse_listen("127.0.0.1:7600")  # loopback too: TLS by default
    with pytest.raises(HubError, match="not a loopback address"):
        parse_listen("0.0.0.0:7600", plaintext=True)
    assert parse_listen("127.0.0.1:0", plaintext=True).plaintext
    with pytest.raises(HubError, match="is not HOST:PORT"):
        parse_listen("7600")
    with pytest.raises(HubError, match="cannot load the TLS certificate"):
        server_context(Listen("127.0.0.1", 0, str(tmp_path / "none.pem"), str(tmp_path / "none.key")))
    out = invoke(tmp_path / "home", "serve", "--listen", "0.0.0.0:0")
    assert out.exit_code != 0 and "error: --listen 0.0.0.0:0 needs --tls-cert and --tls-key" in out.output


# -- the path that works --------------------------------------------------------------------
def test_publisher_over_tls_stores_turns_that_the_cli_reads_over_tls(hub: TlsHub, tmp_path: Path) -> None:
    pub = _publisher(hub, tmp_path, hub.tokens["publish"])
    try:
        sid = pub.open_session(agent="remote-agent")
        ep = pub.start_episode(sid, "deploy the zanzibar service")
        pub.add_turn(ep, "assistant", "zanzibar deployed over a verified TLS link")
        assert pub.flush(20), pub.hub_refused
        assert pub.errors == 0 and pub.hub_refused is None
    finally:
        pub.close()
    out = _run_cli(hub, "search", "zanzibar", "--json", token=hub.tokens["read"])
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert found["total_found"] >= 1 and found["results"][0]["session_id"] == sid
    with RemoteService(hub.sock) as local:  # the hub logs the search after answering it
        _wait(lambda: any(e.kind == "recall.performed" for e in local.events(0, 1000)))
    listed = json.loads(invoke(hub.home, "token", "list", "--json").stdout)["tokens"]
    assert {t["name"]: t["last_used_at"] for t in listed}["t-publish"] is not None


# -- each failure: one line, its own code, nothing stored --------------------------------------
def test_token_failures_each_get_their_own_code_and_store_nothing(hub: TlsHub, tmp_path: Path) -> None:
    before = hub.stored()
    revoked = _new_token(hub.home, "gone", "admin")
    assert invoke(hub.home, "token", "revoke", "gone").exit_code == 0
    forged = hub.tokens["admin"][:-4] + "AAAA"
    cases = {
        "token_missing": None,
        "token_invalid": forged,
        "token_revoked": revoked,
    }
    for code, token in cases.items():
        with pytest.raises(protocol.RpcError) as err:
            _hello(hub.addr(token))
        assert err.value.app_code == code, (code, err.value)
        out = _run_cli(hub, "search", "anything", token=token) if code == "token_missing" else None
        if out is not None:
            lines = out.stderr.strip().splitlines()
            assert out.returncode != 0 and lines[0].startswith("error: ") and "[token_missing]" in lines[0]
            assert "Traceback" not in out.stderr
    # a publisher with a refused token is told why, keeps its commands (spooled), stores nothing
    pub = _publisher(hub, tmp_path, forged)
    try:
        sid = pub.open_session(agent="intruder")
        pub.add_turn(pub.start_episode(sid, "hi"), "user", "should not land")
        _wait(lambda: pub.hub_refused is not None)
        assert "token_invalid" in str(pub.hub_refused) and pub.errors == 0 and pub.acked_commands == 0
    finally:
        pub.close(timeout=0.5, spool_timeout=5)
    # scope too small: read cannot publish, publish cannot read
    with RemoteService(hub.addr(hub.tokens["read"])) as reader:
        with pytest.raises(Exception) as err:
            reader.publish([{"op": "open_session", "agent": "x"}])
        assert getattr(err.value, "code", None) == "token_scope"
    with RemoteService(hub.addr(hub.tokens["publish"])) as publisher_only:
        with pytest.raises(Exception) as err:
            publisher_only.sessions()
        assert getattr(err.value, "code", None) == "token_scope"
    assert hub.stored() == before


def test_plaintext_to_the_tls_port_and_an_unknown_ca_are_refused_clearly(hub: TlsHub) -> None:
    plain = hub.url.replace("tls://", "tcp://")
    with pytest.raises(tls.HubAccessError) as err:
        _hello(hub.addr(hub.tokens["read"], url=plain))
    assert err.value.code == "tls_required" and hub.url in (err.value.hint or "")
    with pytest.raises(tls.HubAccessError) as err:
        _hello(hub.addr(hub.tokens["read"], ca=hub.pki.foreign_ca))
    assert err.value.code == "tls_unknown_ca"
    out = _run_cli(hub, "search", "x", token=hub.tokens["read"], ca=False)  # system CAs only
    first = out.stderr.strip().splitlines()[0]
    assert out.returncode != 0 and first.startswith("error: ") and "[tls_unknown_ca]" in first


@pytest.mark.parametrize(
    ("which", "code"), [("expired_cert", "tls_expired"), ("other_host_cert", "tls_hostname")]
)
def test_expired_and_wrong_host_certificates_get_their_own_code(
    tmp_path: Path, which: str, code: str
) -> None:
    """A TLS server with the hub's own context (``server_context``) and a bad certificate."""
    pki = make_pki(tmp_path / "pki")
    ctx = server_context(Listen("127.0.0.1", 0, str(getattr(pki, which)), str(pki.key)))
    assert ctx is not None
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            ctx.wrap_socket(conn, server_side=True).close()
        except (ssl.SSLError, OSError):
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with pytest.raises(tls.HubAccessError) as err:
            tls.connect(tls.parse_hub(f"tls://127.0.0.1:{port}", ca_file=str(pki.ca)), timeout=10)
        assert err.value.code == code, err.value
    finally:
        thread.join(10)
        listener.close()


# -- revoke mid-run -------------------------------------------------------------------------
def test_a_token_revoked_mid_run_stops_the_next_command_and_loses_nothing(
    hub: TlsHub, tmp_path: Path
) -> None:
    token = _new_token(hub.home, "mid-run", "publish")
    pub = _publisher(hub, tmp_path, token)
    try:
        sid = pub.open_session(agent="mid-run")
        ep = pub.start_episode(sid, "before")
        pub.add_turn(ep, "user", "stored before the revoke")
        assert pub.flush(20) and pub.connected
        acked = pub.acked_commands
        assert invoke(hub.home, "token", "revoke", "mid-run").exit_code == 0
        pub.add_turn(ep, "user", "after the revoke")
        _wait(lambda: pub.hub_refused is not None)  # the agent is told (and a log line)
        assert "token_revoked" in str(pub.hub_refused)
        assert pub.acked_commands == acked and pub.errors == 0  # not refused for good: kept
        assert not pub.flush(0.3)
    finally:
        pub.close(timeout=0.5, spool_timeout=5)
    spooled = "".join(p.read_text() for p in (tmp_path / "spool").rglob("*") if p.is_file())
    assert "after the revoke" in spooled  # on disk...
    again = _publisher(hub, tmp_path, hub.tokens["publish"])  # ...replayed with a valid token
    try:
        _wait(lambda: again.adopted_commands >= 1)
    finally:
        again.close()
    with RemoteService(hub.addr(hub.tokens["read"])) as reader:
        turns = [t["content"] for t in reader.session(sid)["turns"]]
    assert turns == ["before", "stored before the revoke", "after the revoke"]  # each once


# -- as another local user would try ---------------------------------------------------------
def _raw_tls(hub: TlsHub) -> ssl.SSLSocket:
    ctx = tls.client_context(str(hub.pki.ca))
    port = int(hub.url.rsplit(":", 1)[1])
    return ctx.wrap_socket(
        socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="127.0.0.1"
    )


def test_requests_before_hello_and_garbage_get_one_answer_and_the_door(hub: TlsHub) -> None:
    before = hub.stored()
    for frame in (
        protocol.request(protocol.PUBLISH, {"commands": [{"op": "open_session", "agent": "x"}]}, 1),
        b"\x00\xff garbage that is not json\n",
        protocol.request(protocol.SESSIONS, {}, 2),
    ):
        with _raw_tls(hub) as raw:
            raw.sendall(frame)
            rfile = raw.makefile("rb")
            answer = json.loads(rfile.readline())
            assert "error" in answer
            assert rfile.readline() == b""  # closed: no second try on this connection
    assert hub.stored() == before


def test_many_unauthenticated_connections_do_not_lock_out_a_real_client(hub: TlsHub) -> None:
    idle = [_raw_tls(hub) for _ in range(40)]
    try:
        hello = _hello(hub.addr(hub.tokens["read"]))
        assert hello["server"] == "memviewer-hub"
    finally:
        for s in idle:
            s.close()


def test_a_subscriber_over_tls_gets_events_and_is_cut_when_its_token_is_revoked(
    hub: TlsHub, tmp_path: Path
) -> None:
    """The live tail over TLS; a quiet connection is closed within the sweep (≤ 1 s) of a revoke."""
    import asyncio

    from memviewer.wire.subscriber import ConnectionState, Subscriber

    token = _new_token(hub.home, "tail-me", "read")
    pub = _publisher(hub, tmp_path, hub.tokens["publish"])
    try:
        pub.open_session(agent="tailed")
        assert pub.flush(20)
    finally:
        pub.close()
    states: list[ConnectionState] = []

    async def run() -> int:
        sub = Subscriber(hub.addr(token), from_seq=0, on_state=states.append, max_backoff=0.2)
        got = 0
        async for item in sub.stream(states=True):
            if isinstance(item, ConnectionState):
                if "revoked" in item.detail:
                    sub.close()
                continue
            got += 1
            if got == 1:
                assert item.seq >= 1
                done = await asyncio.to_thread(invoke, hub.home, "token", "revoke", "tail-me")
                assert done.exit_code == 0
        return got

    assert asyncio.run(run()) >= 1
    assert states[0].status == "connected"
    assert any("was revoked" in s.detail for s in states)


def test_a_token_check_that_cannot_read_the_store_refuses_the_request_retryably() -> None:
    """A store that fails under the check: the request is answered ``internal`` with
    ``retry`` and the connection closed; it never runs unchecked."""
    import asyncio

    from memviewer.wire.connection import Connection
    from memviewer.wire.rpc_server import RpcServer

    sent: list[bytes] = []

    class Server(RpcServer):
        ran = False

        def _build_handlers(self):  # type: ignore[no-untyped-def]
            async def run(conn: Connection, params: dict[str, object]) -> object:
                Server.ran = True
                return {}

            return {"sessions": (False, run)}

        def _admit_publish(self, commands, frame_bytes, conn):  # type: ignore[no-untyped-def]
            return None

        def _forget(self, conn: Connection) -> None:
            pass

        def _authorize(self, conn: Connection, method: str, params: dict[str, object]) -> None:
            raise OSError("database is locked")

    class FakeConn:
        id = 1
        remote = True
        token_name = "x"
        requests = 0
        closed = False

        async def send(self, data: bytes) -> None:
            sent.append(data)

        def close(self) -> None:
            self.closed = True

    server = Server(
        {"refused_tokens": 0, "protocol_errors": 0},
        frame_limit=1 << 20,
        max_inflight=4,
        max_connections=4,
        stall_timeout=60,
    )
    conn = FakeConn()
    asyncio.run(server._frame(conn, protocol.request("sessions", {}, 7)))  # type: ignore[arg-type]
    answer = json.loads(sent[0])
    assert answer["id"] == 7 and answer["error"]["data"]["retry"] is True
    assert conn.closed and not Server.ran
