"""Following a PraisonAI session folder: files written by praisonaiagents' own
``DefaultSessionStore`` while a real hub process (``serve --watch-praisonai``) watches."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import praisonaiagents.session.store as praisonai_store  # dev extra: missing fails, never skips
import pytest
from waiting import wait_for

from memviewer.praisonai.watch import child_session_id, sessions_from_file
from memviewer.wire.remote import RemoteService
from memviewer.wire.testing import HubProcess


def turns_of(remote: RemoteService, sid: str) -> list[dict[str, Any]]:
    try:
        return remote.session(sid)["turns"]
    except Exception:
        return []


def watcher_status(remote: RemoteService) -> dict[str, Any]:
    return next(s for s in remote.stats()["hub"]["sources"] if s["kind"] == "praisonai")


@pytest.fixture
def watched(tmp_path: Path, short_tmp: Path) -> Iterator[tuple[Path, RemoteService, HubProcess]]:
    folder = tmp_path / "sessions"
    folder.mkdir()
    hub = HubProcess(
        tmp_path / "home", short_tmp / "hub.sock", args=("--no-index", "--watch-praisonai", str(folder))
    )
    hub.start()
    remote = RemoteService(hub.socket_path)
    try:
        wait_for(lambda: watcher_status(remote)["connected"], what="the watcher")
        yield folder, remote, hub
    finally:
        remote.close()
        hub.stop()


@pytest.mark.integration
def test_appended_messages_arrive_incrementally_without_duplicates(watched) -> None:
    folder, remote, _hub = watched
    store = praisonai_store.DefaultSessionStore(session_dir=str(folder))
    seq0 = remote.last_seq
    store.add_message("chat-1", "user", "How do I rotate the staging database password?")
    store.add_message("chat-1", "assistant", "Use the vault CLI: vault rotate db/staging.")
    turns = wait_for(
        lambda: len(turns_of(remote, "chat-1")) == 2 and turns_of(remote, "chat-1"), what="2 turns"
    )
    assert [t["role"] for t in turns] == ["user", "assistant"]
    first_ids = [t["turn_id"] for t in turns]
    session = remote.session("chat-1")["session"]
    assert session["title"] == "How do I rotate the staging database password?"

    t0 = time.monotonic()
    store.add_message("chat-1", "user", "And the production one?")
    turns = wait_for(
        lambda: len(turns_of(remote, "chat-1")) == 3 and turns_of(remote, "chat-1"), what="3rd turn"
    )
    latency = time.monotonic() - t0
    assert [t["turn_id"] for t in turns[:2]] == first_ids  # the old turns kept their rows
    assert turns[2]["content"] == "And the production one?"
    assert latency < 3.0  # 1 s on a quiet machine; the suite shares 2 cores

    # keyword search finds the new turn through the hub
    hits = remote.search("production")
    assert any(s["session_id"] == "chat-1" for s in hits["results"])

    # events: the live log saw the imports (one session.started, then session.imported per change)
    events = remote.events(seq0, 1000)
    kinds = [e.kind for e in events if e.session_id == "chat-1"]
    assert kinds.count("session.started") == 1
    imported = [e for e in events if e.kind == "session.imported" and e.session_id == "chat-1"]
    assert imported and sum(e.payload["new_turns"] for e in imported) == 3

    # the same bytes again (touch / rewrite unchanged) add nothing
    path = folder / "chat-1.json"
    path.write_bytes(path.read_bytes())
    store.add_message("chat-2", "user", "a second session")  # a change we can wait for
    wait_for(lambda: len(turns_of(remote, "chat-2")) == 1, what="chat-2")
    assert len(turns_of(remote, "chat-1")) == 3
    status = watcher_status(remote)
    assert status["counters"]["turns_added"] == 4
    assert status["last_delivery"] is not None


@pytest.mark.integration
def test_mid_write_lock_files_and_deletion(watched) -> None:
    folder, remote, _hub = watched
    store = praisonai_store.DefaultSessionStore(session_dir=str(folder))
    store.add_message("chat-9", "user", "remember that the build cache lives in /srv/cache")
    wait_for(lambda: len(turns_of(remote, "chat-9")) == 1, what="chat-9")
    good = (folder / "chat-9.json").read_text()

    # a non-atomic writer caught half way: invalid JSON is counted, nothing stored changes
    path = folder / "chat-9.json"
    data = json.loads(good)
    data["messages"].append(
        {"role": "assistant", "content": "noted", "timestamp": time.time(), "metadata": {}}
    )
    whole = json.dumps(data)
    path.write_text(whole[: len(whole) // 2])
    wait_for(lambda: watcher_status(remote)["counters"]["invalid_json"] >= 1, what="invalid_json counted")
    assert len(turns_of(remote, "chat-9")) == 1
    assert "chat-9.json" in watcher_status(remote)["last_error"]
    # the writer finishes: the next change event retries and the new turn lands
    path.write_text(whole)
    wait_for(lambda: len(turns_of(remote, "chat-9")) == 2, what="retry after the write finished")

    # lock files are not sessions
    (folder / "chat-9.json.lock").write_text("")
    (folder / "junk.json.lock").write_text("{not json")
    # a deleted file deletes nothing
    seen_before = watcher_status(remote)["counters"]["files_seen"]
    path.unlink()
    wait_for(lambda: watcher_status(remote)["counters"]["deleted_files"] == 1, what="deletion seen")
    assert len(turns_of(remote, "chat-9")) == 2
    assert watcher_status(remote)["counters"]["files_seen"] == seen_before
    ids = [s["session_id"] for s in remote.sessions()["sessions"]]
    assert "junk" not in ids and "chat-9.json" not in ids

    # a file that is JSON but not a PraisonAI session is rejected by name, the hub keeps going
    (folder / "other.json").write_text('{"hello": 1}')
    wait_for(lambda: watcher_status(remote)["counters"]["rejected_files"] == 1, what="rejected")
    assert "other.json" in watcher_status(remote)["last_error"]
    store.add_message("chat-10", "user", "still alive?")
    wait_for(lambda: len(turns_of(remote, "chat-10")) == 1, what="chat-10 after bad input")


@pytest.mark.integration
def test_existing_files_and_sub_agent_histories(tmp_path: Path, short_tmp: Path) -> None:
    folder = tmp_path / "sessions"
    store = praisonai_store.DefaultSessionStore(session_dir=str(folder))
    store.add_message("team-1", "user", "Plan the migration of the orders table")
    store.add_message("team-1", "assistant", "I asked the researcher and the writer.")
    # what praisonaiagents' Session saves for its sub-agents (metadata.agent_histories)
    store.merge_session_metadata_map(
        "team-1",
        "agent_histories",
        {
            "researcher": [
                {"role": "user", "content": "find the row count of orders"},
                {"role": "assistant", "content": "orders has 48 million rows"},
            ]
        },
    )
    hub = HubProcess(
        tmp_path / "home", short_tmp / "hub.sock", args=("--no-index", "--watch-praisonai", str(folder))
    )
    with hub, RemoteService(hub.socket_path) as remote:
        wait_for(lambda: len(turns_of(remote, "team-1")) == 2, what="the existing file")
        cid = child_session_id("team-1", "researcher")
        child = wait_for(lambda: turns_of(remote, cid), what="the sub-agent session")
        assert [t["content"] for t in child] == ["find the row count of orders", "orders has 48 million rows"]
        detail = remote.session(cid)["session"]
        assert detail["parent_session_id"] == "team-1"
        hits = remote.search("48 million rows")
        found = hits["results"]
        assert any(s["session_id"] == cid for s in found)
        # the sub-agent says more: only its new turn is added
        store.merge_session_metadata_map(
            "team-1",
            "agent_histories",
            {
                "researcher": [
                    {"role": "user", "content": "find the row count of orders"},
                    {"role": "assistant", "content": "orders has 48 million rows"},
                    {"role": "user", "content": "and the index size?"},
                ]
            },
        )
        wait_for(lambda: len(turns_of(remote, cid)) == 3, what="the sub-agent's new turn")
        assert [t["turn_id"] for t in turns_of(remote, cid)][:2] == [t["turn_id"] for t in child]


def test_sessions_from_file_title_and_children() -> None:
    data = {
        "session_id": "s1",
        "agent_name": "helper",
        "messages": [
            {"role": "system", "content": "be brief", "timestamp": 1_700_000_000.0},
            {"role": "user", "content": "  What   is the\nplan? ", "timestamp": 1_700_000_001.0},
        ],
        "metadata": {"agent_histories": {"w": [{"role": "user", "content": "x"}], "bad": "not a list"}},
    }
    out = sessions_from_file(data, "s1", 1_700_000_002.0)
    (parent, turns), (child, child_turns) = out
    assert parent["title"] == "What is the plan?"  # the first user message, not the agent's name
    assert parent["meta"]["metadata"]["agent_histories"] == {"child_sessions": ["s1.agent.w"]}
    assert child["parent_session_id"] == "s1" and child["agent"] == "w"
    assert [t["content"] for t in child_turns] == ["x"]
    again = sessions_from_file(data, "s1", 1_700_000_002.0)
    assert [t["id"] for t in again[1][1]] == [t["id"] for t in child_turns]  # stable ids


@pytest.mark.integration
def test_polling_where_inotify_is_not_used(tmp_path: Path, short_tmp: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    hub = HubProcess(
        tmp_path / "home",
        short_tmp / "hub.sock",
        args=("--no-index", "--watch-praisonai", str(folder)),
        extra_env={"WATCHFILES_FORCE_POLLING": "1"},
    )
    with hub, RemoteService(hub.socket_path) as remote:
        wait_for(lambda: watcher_status(remote)["connected"], what="the watcher")
        assert watcher_status(remote)["polling"] is True
        store = praisonai_store.DefaultSessionStore(session_dir=str(folder))
        store.add_message("poll-1", "user", "seen by polling")
        wait_for(lambda: len(turns_of(remote, "poll-1")) == 1, what="the polled file")


def test_serve_refuses_a_bad_otlp_address(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from memviewer.cli import cli

    r = CliRunner().invoke(
        cli,
        ["--home", str(tmp_path / "h"), "--socket", str(tmp_path / "s"), "serve", "--otlp", "nohost:http"],
    )
    assert r.exit_code == 1
    assert "otlp address 'nohost:http'" in r.output + (r.stderr if r.stderr_bytes else "")


def test_serve_start_line_names_every_source_it_runs(tmp_path: Path, short_tmp: Path) -> None:
    """The folders it watches and the address OTLP listens on (the bound port, 0 asked)."""
    from memviewer.commands.hub import source_lines

    folders = [tmp_path / "a sessions", tmp_path / "b"]
    for f in folders:
        f.mkdir()
    args = ("--no-index", "--otlp", "127.0.0.1:0")
    args += tuple(a for f in folders for a in ("--watch-praisonai", str(f)))
    with HubProcess(tmp_path / "home", short_tmp / "hub.sock", args=args) as hub:
        line = wait_for(
            lambda: next((ln for ln in hub.log().splitlines() if "Ctrl-C to stop" in ln), None),
            what="the start line",
        )
        with RemoteService(short_tmp / "hub.sock") as remote:
            otlp = next(s for s in remote.stats()["hub"]["sources"] if s["kind"] == "otlp")
    assert otlp["target"].startswith("127.0.0.1:") and not otlp["target"].endswith(":0")
    assert f"listening on {short_tmp / 'hub.sock'}" in line
    for f in folders:
        assert f"watching PraisonAI sessions in {f};" in line
    assert f"receiving OTLP/HTTP on http://{otlp['target']} (/v1/traces, /v1/logs)" in line
    token_file = tmp_path / "home" / "token"
    assert f"OTLP: every request needs 'Authorization: Bearer <token>' ({token_file})" in line
    token = token_file.read_text().strip()
    assert f"new OTLP token (kept in {token_file}): {token}" in hub.log()  # the first start shows it once
    assert source_lines([]) == ["no sources (agents publish; --watch-praisonai DIR and --otlp PORT add some)"]
    refused = {"kind": "otlp", "target": "::1:4318", "connected": False}
    assert source_lines([{**refused, "last_error": "cannot listen on ::1:4318: in use"}]) == [
        "OTLP/HTTP not started: cannot listen on ::1:4318: in use"
    ]
    assert source_lines([{**refused, "connected": True, "last_error": None}]) == [
        "receiving OTLP/HTTP on http://[::1]:4318 (/v1/traces, /v1/logs)"
    ]
