"""The recall log through a real hub: Publisher.record_recall over a real socket (spooled
while the hub is down, recorded exactly once when it is back), the hub recording its own
RPC searches, and a read-only front end handing its entry to the hub."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from waiting import wait_for

from memviewer.cli import cli
from memviewer.client import Publisher
from memviewer.config import load_settings
from memviewer.recall_log import RecordAs
from memviewer.service import MemoryService
from memviewer.wire.remote import RemoteService
from memviewer.wire.testing import HubProcess

pytestmark = pytest.mark.integration


def _entries(home: Path, sock: Path) -> list[dict]:
    settings = load_settings(env={}, home=str(home), socket=str(sock))
    svc = MemoryService(settings, readonly=True)
    try:
        return svc.recalls(limit=100)["recalls"]
    finally:
        svc.close()


def test_record_recall_spools_while_the_hub_is_down_and_lands_once(tmp_path: Path, short_tmp: Path) -> None:
    home, sock = tmp_path / "home", short_tmp / "hub.sock"
    pub = Publisher(sock, tmp_path / "spool")
    try:
        sid = pub.open_session(agent="own-memory-agent")
        rid = pub.record_recall(
            "what did we decide about billing?",
            [{"text": "we chose Adyen", "score": 0.82}, {"text": "Stripe fees were too high", "score": 0.4}],
            session_id=sid,
            params={"k": 2, "index": "my-vector-db"},
        )
        wait_for(lambda: pub.stats()["spooled_commands"] >= 2)  # the hub is down: on disk
        assert pub.flush(timeout=0.2) is False
        with HubProcess(home, sock):
            assert pub.flush(timeout=20) is True
            assert pub.errors == 0
            pub.publish(  # a second copy (a spool replayed twice): still one entry
                {
                    "op": "record_recall",
                    "recall_id": rid,
                    "ts": time.time(),
                    "query": "what did we decide about billing?",
                    "results": [{"text": "we chose Adyen"}],
                    "source": "agent",
                }
            )
            assert pub.flush(timeout=20) is True
            entries = [e for e in _entries(home, sock) if e["recall_id"] == rid]
            assert len(entries) == 1
            assert entries[0]["source"] == "agent" and entries[0]["session_id"] == sid
            assert entries[0]["result_count"] == 2
            with RemoteService(sock) as remote:
                kinds = [e.kind for e in remote.events(0, kinds=["recall.performed"])]
            assert kinds == ["recall.performed"]
    finally:
        pub.close(timeout=2)


def test_a_bad_record_recall_is_refused_with_a_code(tmp_path: Path, short_tmp: Path) -> None:
    home, sock = tmp_path / "home", short_tmp / "hub.sock"
    with HubProcess(home, sock), Publisher(sock, tmp_path / "spool") as pub:
        pub.publish({"op": "record_recall", "recall_id": "r-1", "query": "q", "results": [{"score": 1}]})
        pub.record_recall("fine", [{"turn_id": "t-1"}])
        assert pub.flush(timeout=20) is False  # a refused command is reported, not dropped silently
        refused = pub.take_refusals()
        assert [(r["op"], r["error"]["code"]) for r in refused] == [("record_recall", "invalid_argument")]
        assert pub.flush(timeout=20) is True  # everything else was stored
        assert [e["query"] for e in _entries(home, sock)] == ["fine"]
    with pytest.raises(ValueError):
        Publisher(short_tmp / "x.sock", tmp_path / "s2").record_recall("q", [{"score": 1.0}])


def test_hub_rpc_search_is_recorded_by_the_hub(tmp_path: Path, short_tmp: Path) -> None:
    home, sock = tmp_path / "home", short_tmp / "hub.sock"
    with HubProcess(home, sock), Publisher(sock, tmp_path / "spool") as pub:
        sid = pub.open_session(agent="a")
        eid = pub.start_episode(sid, "the billing migration goes to Adyen")
        pub.finalize_episode(eid)
        assert pub.flush(timeout=20)
        with RemoteService(sock) as remote:
            assert remote.search("billing")["success"]  # a raw RPC client: source hub
            remote.search("billing", record=RecordAs("mcp", session_id="s-caller"))
            remote.call("search", {"query": "billing", "record": False})  # opted out
            with pytest.raises(Exception) as err:
                remote.call("search", {"query": "billing", "record": {"source": "robot"}})
            assert "source must be one of" in str(err.value)
            # a last recorded search marks the end: the hub records in order, so once it shows,
            # a wrongly recorded entry from the calls above would show too
            remote.search("marker", record=RecordAs("cli"))
        wait_for(lambda: any(e["query"] == "marker" for e in _entries(home, sock)))
        entries = [e for e in _entries(home, sock) if e["query"] != "marker"]
        assert sorted(e["source"] for e in entries) == ["hub", "mcp"]
        assert [e["session_id"] for e in entries if e["source"] == "mcp"] == ["s-caller"]


def test_the_hub_records_the_caller_it_knows_not_the_one_a_client_claims(
    tmp_path: Path, short_tmp: Path
) -> None:
    import os

    home, sock = tmp_path / "home", short_tmp / "hub.sock"
    with HubProcess(home, sock), Publisher(sock, tmp_path / "spool", client_name="claims-to-be") as pub:
        forged = {"via": "socket", "uid": 12345, "pid": 1, "client": "root"}
        pub.publish(
            {"op": "record_recall", "recall_id": "r-forged", "query": "q", "results": [], "caller": forged}
        )
        assert pub.flush(timeout=20)
        with RemoteService(sock, client="a-reader") as remote:
            remote.search("anything", record=RecordAs("mcp"))
            remote.search("marker", record=RecordAs("cli"))
        entries = {
            e["query"]: e for e in wait_for(lambda: len(_entries(home, sock)) == 3 and _entries(home, sock))
        }
    published = entries["q"]["caller"]
    # the kernel's peer credentials of this test process, and the hello name it gave
    assert published["uid"] == os.getuid() and published["pid"] == os.getpid() != 1
    assert published["via"] == "socket" and published["client"] == "claims-to-be"
    searched = entries["anything"]["caller"]
    assert searched["via"] == "socket" and searched["client"] == "a-reader" and searched["pid"] == os.getpid()
    assert searched["connection"] != published["connection"]


def test_cli_search_with_a_hub_is_written_by_the_hub(tmp_path: Path, short_tmp: Path) -> None:
    home, sock = tmp_path / "home", short_tmp / "hub.sock"
    with HubProcess(home, sock) as hub, Publisher(sock, tmp_path / "spool") as pub:
        sid = pub.open_session(agent="a")
        pub.start_episode(sid, "staging deploy token rotated")
        assert pub.flush(timeout=20)
        result = CliRunner().invoke(
            cli, ["--home", str(home), "--socket", str(sock), "search", "staging", "--json"]
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["total_found"] == 1
        entries = wait_for(lambda: _entries(home, sock))
        assert [(e["source"], e["query"]) for e in entries] == [("cli", "staging")]
        with RemoteService(sock) as remote:
            counters = remote.stats()["hub"]["counters"]
        assert counters["published_commands"] >= 3  # the entry went through the hub's writer
        assert hub.proc is not None and hub.proc.poll() is None
