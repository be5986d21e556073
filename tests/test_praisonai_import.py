"""PraisonAI session files → sessions with archived and active turns."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from memviewer.store import repos

T0 = 1781100000.0


def session_file(folder, sid, *, user_id="u42", agent_name=None, archived=3, active=2, **extra):
    msgs_archived = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"archived {sid} {i}",
         "timestamp": T0 + i, "metadata": {"pos": i}}
        for i in range(archived)
    ]
    messages = []
    if archived:
        messages.append({"role": "system", "content": f"Summary of {archived} turns",
                         "timestamp": T0 + 50, "metadata": {"compaction": True,
                                                            "compacted_count": archived}})
    messages += [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"active {sid} {i}",
         "timestamp": T0 + 100 + i, "metadata": {}}
        for i in range(active)
    ]
    data = {
        "session_id": sid, "messages": messages, "archived_messages": msgs_archived,
        "created_at": "2026-06-10T14:00:00+00:00", "updated_at": "2026-06-10T15:00:00+00:00",
        "agent_name": agent_name, "user_id": user_id, "metadata": {"title": f"Title {sid}"},
        **extra,
    }
    path = folder / f"{sid}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    (folder / f"{sid}.json.lock").write_text("")  # written by praisonaiagents beside sessions
    return path


def turns_of(service, sid):
    with service.store.read() as conn:
        return repos.session_turns(conn, sid)


def test_import_maps_scope_archived_active_and_metadata(service, tmp_path):
    folder = tmp_path / "sessions"
    folder.mkdir()
    session_file(folder, "a1", user_id="u42", source="cron", lineage_id="L1")
    session_file(folder, "a2", user_id=None, agent_name="helper", archived=0, active=3)
    report = service.import_praisonai([folder], index=False)
    assert not report.failed
    assert sorted(report.session_ids) == ["a1", "a2"]
    s1 = service.session("a1")["session"]
    assert (s1["scope"], s1["scope_id"], s1["title"]) == ("user", "u42", "Title a1")
    assert (s1["source"], s1["lineage_id"]) == ("cron", "L1")
    assert (s1["archived_turns"], s1["active_turns"]) == (3, 3)
    s2 = service.session("a2")["session"]
    assert (s2["scope"], s2["scope_id"]) == ("agent", "helper")
    turns = turns_of(service, "a1")
    assert [t["idx"] for t in turns] == list(range(6))
    assert [t["archived"] for t in turns] == [True] * 3 + [False] * 3
    assert turns[0]["meta"] == {"pos": 0} and turns[0]["timestamp"] == T0
    summary = turns[3]
    assert summary["is_compaction_summary"] and summary["replaced_count"] == 3
    assert summary["meta"] == {"compaction": True, "compacted_count": 3}


def test_reimport_is_idempotent_and_appends_only_new_turns(service, tmp_path):
    path = session_file(tmp_path, "a1")
    service.import_praisonai([path], index=False)
    seq = service.last_seq
    again = service.import_praisonai([path], index=False)
    assert again.imported[0]["new_turns"] == 0 and again.imported[0]["updated_turns"] == 0
    assert len(turns_of(service, "a1")) == 6  # 3 archived, the summary, 2 active
    data = json.loads(path.read_text())
    data["messages"].append({"role": "assistant", "content": "a later reply", "timestamp": T0 + 500})
    path.write_text(json.dumps(data))
    third = service.import_praisonai([path], index=False)
    assert third.imported[0]["new_turns"] == 1
    assert [t["content"] for t in turns_of(service, "a1")][-1] == "a later reply"
    assert service.last_seq > seq


def test_bad_files_are_reported_by_name_and_skipped(service, tmp_path):
    session_file(tmp_path, "good")
    (tmp_path / "broken.json").write_text('{"session_id": "x", "messages": [')
    (tmp_path / "foreign.json").write_text('{"name": "package.json", "version": "1.0"}')
    (tmp_path / "latin1.json").write_bytes(b'{"messages": ["caf\xe9"]}')
    (tmp_path / "list.json").write_text("[1, 2, 3]")
    report = service.import_praisonai([tmp_path, tmp_path / "missing.json"], index=False)
    assert report.session_ids == ["good"]
    failed = {p.rsplit("/", 1)[-1]: e for p, e in report.failed}
    assert set(failed) == {"broken.json", "foreign.json", "latin1.json", "list.json", "missing.json"}
    assert "JSON" in failed["broken.json"] and "UTF-8" in failed["latin1.json"]


def test_malformed_messages_are_tolerated(service, tmp_path):
    data = {"session_id": "m1", "messages": [None, "text", 3,
                                             {"role": "user", "content": [{"type": "text",
                                                                          "text": "part one"}]},
                                             {"role": "assistant", "content": None,
                                              "tool_calls": [{"id": "c1", "function": {"name": "ls"}}]}]}
    (tmp_path / "m1.json").write_text(json.dumps(data))
    report = service.import_praisonai([tmp_path], index=False)
    assert report.session_ids == ["m1"]
    turns = turns_of(service, "m1")
    assert [t["content"] for t in turns] == ["part one", ""]
    assert turns[1]["tool_calls"] == [{"id": "c1", "function": {"name": "ls"}}]


@pytest.mark.integration
def test_cli_import_then_sessions_shows_counts(tmp_path):
    folder = tmp_path / "pa"
    folder.mkdir()
    session_file(folder, "c1", archived=4, active=1)
    (folder / "bad.json").write_text("{")
    home = tmp_path / "cli-home"
    run = [sys.executable, "-m", "memviewer.cli", "--home", str(home)]
    res = subprocess.run([*run, "import", "praisonai", str(folder), "--no-index"],
                         capture_output=True, text=True)
    assert res.returncode == 1, res.stderr  # one file failed
    assert "bad.json" in res.stderr and "imported 1 sessions" in res.stdout
    out = subprocess.run([*run, "sessions", "--json"], capture_output=True, text=True, check=True)
    page = json.loads(out.stdout)
    (s,) = page["sessions"]
    assert (s["session_id"], s["archived_turns"], s["active_turns"], s["episodes"]) == ("c1", 4, 2, 0)
