"""``memviewer mcp`` with the real ``mcp`` SDK client: over stdio (a subprocess on a real home
with the real model's index) and over streamable HTTP, a PraisonAI-shaped agent round
trip, bad arguments and a missing session, and the recall log entries it leaves."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from memviewer.config import load_settings
from memviewer.service import MemoryService
from memviewer.wire.testing import HubProcess, hub_env

pytestmark = [pytest.mark.integration, pytest.mark.model]

TIMEOUT = 120.0


def _seed(home: Path, sock: Path) -> dict[str, Any]:
    """Two agents; the billing session is compacted, so its decision is an archived turn."""
    settings = load_settings(env={}, home=str(home), socket=str(sock))
    svc = MemoryService(settings)
    try:
        sid = svc.open_session(agent="billing-bot", session_id="s-billing", active_window=4)["session_id"]
        ep = svc.start_episode(sid, "what should we do about the billing migration?")["episode_id"]
        svc.add_turn(
            ep, "assistant", "Decision: migrate billing from Stripe to Adyen, token XZ99 for the cutover."
        )
        for i in range(8):
            svc.add_turn(ep, "assistant", f"status update {i} on unrelated chores")
        svc.finalize_episode(ep)
        ops = svc.open_session(agent="ops-bot", session_id="s-ops")["session_id"]
        ep2 = svc.start_episode(ops, "restart the staging deploy please")["episode_id"]
        svc.add_turn(ep2, "assistant", "Staging deploy restarted at 09:00.")
        svc.finalize_episode(ep2)
        svc.sync_index()
        view = svc.session(sid)
        decision = next(t for t in view["turns"] if "Adyen" in t["content"] and t["role"] == "assistant")
        assert decision["archived"], "the decision must have been compacted out of the active window"
        return {"decision_index": decision["index"], "decision_id": decision["turn_id"]}
    finally:
        svc.close()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, dict[str, Any]]]:
    base = tmp_path_factory.mktemp("mcp")
    import tempfile

    sock_dir = Path(tempfile.mkdtemp(prefix="mv-mcp-", dir="/tmp"))
    info = _seed(base / "home", sock_dir / "hub.sock")
    yield base / "home", sock_dir / "hub.sock", info


def _params(home: Path, sock: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "memviewer.cli", "mcp"], env=hub_env(home, sock)
    )


def _text(result: Any) -> dict[str, Any]:
    assert len(result.content) == 1 and result.content[0].type == "text"
    return json.loads(result.content[0].text)


def _entries(home: Path, sock: Path) -> list[dict[str, Any]]:
    svc = MemoryService(load_settings(env={}, home=str(home), socket=str(sock)), readonly=True)
    try:
        return svc.recalls(source="mcp", limit=100)["recalls"]
    finally:
        svc.close()


def test_stdio_tools_list_call_and_errors(home: tuple[Path, Path, dict[str, Any]]) -> None:
    home_dir, sock, info = home
    before = len(_entries(home_dir, sock))

    async def main() -> None:
        async with Client(_params(home_dir, sock), read_timeout_seconds=TIMEOUT) as client:
            listed = (await client.list_tools()).tools
            assert [t.name for t in listed] == ["session_search", "recall", "get_session", "list_sessions"]
            for tool in listed:
                assert tool.annotations is not None
                assert tool.annotations.read_only_hint is True and tool.annotations.open_world_hint is False
                assert tool.input_schema["type"] == "object" and tool.output_schema["type"] == "object"
            search = next(t for t in listed if t.name == "session_search")
            assert set(search.input_schema["properties"]) == {
                "query",
                "session_id",
                "around_message_id",
                "limit",
                "window",
            }

            # discovery finds the archived decision, flagged archived, and names the caller
            found = await client.call_tool(
                "session_search",
                {"query": "billing migration Adyen", "limit": 3},
                meta={"memviewer/session_id": "s-caller", "memviewer/episode_id": "e-caller"},
            )
            assert not found.is_error
            data = _text(found)
            assert data == found.structured_content
            assert data["success"] and data["mode"] == "discovery"
            hit = data["results"][0]
            assert hit["session_id"] == "s-billing" and hit["anchor_index"] == info["decision_index"]
            anchor = next(m for m in hit["messages"] if m["index"] == hit["anchor_index"])
            assert anchor["archived"] is True and "Adyen" in anchor["content"]

            browse = _text(await client.call_tool("session_search", {}))
            assert browse["mode"] == "browse" and browse["total_found"] == 2

            rec = await client.call_tool(
                "recall", {"query": "which payment provider did we pick for billing?", "top_k": "3"}
            )
            assert not rec.is_error, rec.content[0].text
            out = _text(rec)
            assert len(out["results"]) <= 3 and out["diagnostics"]["mode"] == "hierarchical"
            assert info["decision_id"] in [r["turn_id"] for r in out["results"]]

            view = await client.call_tool("get_session", {"session_id": "s-billing", "archived": True})
            turns = _text(view)["turns"]
            assert turns and all(t["archived"] for t in turns)
            active = _text(
                await client.call_tool("get_session", {"session_id": "s-billing", "archived": False})
            )
            assert active["turns"] and not any(t["archived"] for t in active["turns"])

            listed_sessions = _text(await client.call_tool("list_sessions", {"agent": "ops-bot"}))
            assert listed_sessions["total"] == 1 and listed_sessions["sessions"][0]["session_id"] == "s-ops"
            assert _text(await client.call_tool("list_sessions", {"limit": "1"}))["total"] == 2

            # errors: isError with a code and a hint, never a traceback
            bad = await client.call_tool("session_search", {"query": "x", "limit": "lots"})
            assert bad.is_error
            err = _text(bad)
            assert err["code"] == "invalid_argument" and "limit" in err["error"] and err["hint"]
            assert "Traceback" not in bad.content[0].text
            unknown = _text(await client.call_tool("recall", {"query": "x", "temperature": 2}))
            assert unknown["code"] == "invalid_argument" and "temperature" in unknown["error"]
            empty = _text(await client.call_tool("recall", {"query": "  "}))
            assert empty["code"] == "invalid_argument"
            missing = await client.call_tool("get_session", {"session_id": "s-nope"})
            assert missing.is_error and _text(missing)["code"] == "session_not_found"
            scroll_missing = await client.call_tool("session_search", {"session_id": "s-nope"})
            assert scroll_missing.is_error and _text(scroll_missing)["code"] == "session_not_found"
            out_of_range = _text(
                await client.call_tool(
                    "session_search", {"session_id": "s-billing", "around_message_id": "999"}
                )
            )
            assert out_of_range["code"] == "invalid_argument" and "out of range" in out_of_range["error"]

    anyio.run(main)
    entries = _entries(home_dir, sock)
    new = entries[: len(entries) - before]
    kinds = sorted((e["kind"], e["query"]) for e in new)
    assert ("recall", "which payment provider did we pick for billing?") in kinds
    assert ("search", "billing migration Adyen") in kinds
    caller = next(e for e in new if e["query"] == "billing migration Adyen")
    assert caller["session_id"] == "s-caller" and caller["episode_id"] == "e-caller"


def test_praisonai_shaped_round_trip(home: tuple[Path, Path, dict[str, Any]]) -> None:
    """The agent pattern of PraisonAI's docs: discover, then scroll around the hit's anchor,
    with the arguments as PraisonAI passes them (anchor and window as strings)."""
    home_dir, sock, info = home

    async def main() -> None:
        async with Client(_params(home_dir, sock), read_timeout_seconds=TIMEOUT) as client:

            async def session_search(**kwargs: Any) -> str:  # the agent sees the tool's text
                result = await client.call_tool("session_search", kwargs)
                return result.content[0].text

            result = json.loads(await session_search(query="cutover token XZ99"))
            assert result["success"] and result["results"]
            hit = result["results"][0]
            assert hit["session_id"] == "s-billing"
            anchor = str(hit["anchor_index"])
            context = json.loads(
                await session_search(session_id=hit["session_id"], around_message_id=anchor, window="2")
            )
            assert context["success"] and context["mode"] == "scroll"
            assert context["around_message_id"] == anchor
            indexes = [m["index"] for m in context["messages"]]
            assert int(anchor) in indexes and len(indexes) <= 5
            assert all(
                set(m) >= {"index", "role", "content", "timestamp", "archived"} for m in context["messages"]
            )
            assert int(anchor) == info["decision_index"]

    anyio.run(main)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_http_through_a_running_hub(home: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    home_dir, sock, _ = home
    port = _free_port()
    with HubProcess(home_dir, sock):
        proc = subprocess.Popen(
            [sys.executable, "-m", "memviewer.cli", "mcp", "--http", f"127.0.0.1:{port}"],
            env=hub_env(home_dir, sock),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "the HTTP server did not listen"
                    time.sleep(0.05)
            before = len(_entries(home_dir, sock))
            token = (home_dir / "token").read_text().strip()
            assert f"the token in {home_dir / 'token'}" in _stderr_line(proc)
            url = f"http://127.0.0.1:{port}/mcp"
            _refuses_strangers(url, port, token)

            async def main() -> None:
                from mcp.client.streamable_http import streamable_http_client
                from mcp.shared._httpx_utils import create_mcp_http_client

                http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
                async with (
                    http,
                    Client(
                        streamable_http_client(url, http_client=http), read_timeout_seconds=TIMEOUT
                    ) as client,
                ):
                    names = [t.name for t in (await client.list_tools()).tools]
                    assert names == ["session_search", "recall", "get_session", "list_sessions"]
                    found = await client.call_tool("session_search", {"query": "staging deploy"})
                    assert not found.is_error and _text(found)["results"][0]["session_id"] == "s-ops"
                    listed = _text(await client.call_tool("list_sessions", {}))
                    assert listed["total"] == 2
                    missing = await client.call_tool("get_session", {"session_id": "s-nope"})
                    assert missing.is_error and _text(missing)["code"] == "session_not_found"
                    bad = await client.call_tool("session_search", {"window": -1})
                    assert bad.is_error and _text(bad)["code"] == "invalid_argument"

            anyio.run(main)

            def recorded() -> list[dict[str, Any]]:
                return _entries(home_dir, sock)[: max(0, len(_entries(home_dir, sock)) - before)]

            deadline = time.monotonic() + 10
            while not any(e["query"] == "staging deploy" for e in recorded()):
                assert time.monotonic() < deadline, "the hub did not record the MCP search"
                time.sleep(0.05)
        finally:
            proc.terminate()
            proc.wait(15)


def _stderr_line(proc: subprocess.Popen[bytes]) -> str:
    assert proc.stderr is not None
    return proc.stderr.readline().decode()


def _refuses_strangers(url: str, port: int, token: str) -> None:
    """Another local user reaches the port but has no token; a web page rebinding a name to
    127.0.0.1 sends its own Host. Both are refused before any tool runs."""
    import urllib.error
    import urllib.request

    hello = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "list_sessions", "arguments": {}},
        }
    ).encode()

    def status(headers: dict[str, str]) -> tuple[int, bytes]:
        sent = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        }
        req = urllib.request.Request(url, data=hello, method="POST", headers=sent)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    assert status({})[0] == 401
    assert status({"Authorization": "Bearer not-the-token-at-all"})[0] == 401
    for host in ("evil.example", f"127.0.0.1:{port}.evil.example", f"127.0.0.2:{port}"):
        code, body = status({"Authorization": f"Bearer {token}", "Host": host})
        assert code in (400, 421), (host, code, body)  # the SDK's rebinding refusal
        assert b"s-ops" not in body


def test_http_refuses_a_non_loopback_address(home: tuple[Path, Path, dict[str, Any]]) -> None:
    home_dir, sock, _ = home
    done = subprocess.run(
        [sys.executable, "-m", "memviewer.cli", "mcp", "--http", "0.0.0.0:8765"],
        env=hub_env(home_dir, sock),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert b"loopback" in done.stderr and b"Traceback" not in done.stderr
