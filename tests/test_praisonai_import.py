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
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"archived {sid} {i}",
            "timestamp": T0 + i,
            "metadata": {"pos": i},
        }
        for i in range(archived)
    ]
    messages = []
    if archived:
        messages.append(
            {
                "role": "system",
                "content": f"Summary of {archived} turns",
                "timestamp": T0 + 50,
                "metadata": {"compaction": True, "compacted_count": archived},
            }
        )
    messages += [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"active {sid} {i}",
            "timestamp": T0 + 100 + i,
            "metadata": {},
        }
        for i in range(active)
    ]
    data = {
        "session_id": sid,
        "messages": messages,
        "archived_messages": msgs_archived,
        "created_at": "2026-06-10T14:00:00+00:00",
        "updated_at": "2026-06-10T15:00:00+00:00",
        "agent_name": agent_name,
        "user_id": user_id,
        "metadata": {"title": f"Title {sid}"},
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
    data = {
        "session_id": "m1",
        "messages": [
            None,
            "text",
            3,
            {"role": "user", "content": [{"type": "text", "text": "part one"}]},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {"name": "ls"}}]},
        ],
    }
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
    res = subprocess.run(
        [*run, "import", "praisonai", str(folder), "--no-index"], capture_output=True, text=True
    )
    assert res.returncode == 1, res.stderr  # one file failed
    assert "bad.json" in res.stderr and "imported 1 session (" in res.stdout
    out = subprocess.run([*run, "sessions", "--json"], capture_output=True, text=True, check=True)
    page = json.loads(out.stdout)
    (s,) = page["sessions"]
    assert (s["session_id"], s["archived_turns"], s["active_turns"], s["episodes"]) == ("c1", 4, 2, 0)


# -- malformed files: each fails alone, by name, and the run goes on -----------------
BAD_FILES = {
    "cc_bad.json": (
        {
            "messages": [
                {
                    "role": "system",
                    "content": "sum",
                    "metadata": {"compaction": True, "compacted_count": "abc"},
                }
            ]
        },
        "compacted_count",
    ),
    "cc_dict.json": (
        {
            "messages": [
                {"role": "system", "content": "s", "metadata": {"compaction": True, "compacted_count": {}}}
            ]
        },
        "compacted_count",
    ),
    "ts_str.json": (
        {"messages": [{"role": "user", "content": "x", "timestamp": "notatime"}]},
        "messages[0].timestamp",
    ),
    "ts_bool.json": ({"messages": [{"role": "user", "content": "x", "timestamp": True}]}, "timestamp"),
    "ts_list.json": ({"messages": [{"role": "user", "content": "x", "timestamp": [1]}]}, "timestamp"),
    "ts_huge.json": ({"messages": [{"role": "user", "content": "x", "timestamp": 1e300}]}, "1970..9999"),
    "ts_neg.json": ({"messages": [{"role": "user", "content": "x", "timestamp": -1e12}]}, "1970..9999"),
    "ts_c_str.json": ({"created_at": "soon", "messages": [{"role": "user", "content": "x"}]}, "created_at"),
    "ts_c_huge.json": ({"created_at": 1e300, "messages": [{"role": "user", "content": "x"}]}, "created_at"),
    "role_weird.json": ({"messages": [{"role": ["x"], "content": "x"}]}, "messages[0].role"),
    "tool_call_id.json": (
        {"messages": [{"role": "tool", "content": "x", "tool_call_id": {"a": 1}}]},
        "tool_call_id",
    ),
    "tool_calls.json": (
        {"messages": [{"role": "tool", "content": "x", "tool_calls": "notalist"}]},
        "tool_calls",
    ),
    "meta_str.json": ({"metadata": "str", "messages": [{"role": "user", "content": "x"}]}, "metadata"),
    "msg_meta.json": (
        {"messages": [{"role": "user", "content": "x", "metadata": "x"}]},
        "messages[0].metadata",
    ),
    "agent.json": ({"agent_name": ["x"], "messages": [{"role": "user", "content": "x"}]}, "agent_name"),
    "user.json": ({"user_id": {"a": 1}, "messages": [{"role": "user", "content": "x"}]}, "user_id"),
    "lineage.json": (
        {"parent_session_id": {"x": 1}, "messages": [{"role": "user", "content": "x"}]},
        "parent_session_id",
    ),
    "source.json": ({"source": ["a"], "messages": [{"role": "user", "content": "x"}]}, "source"),
    "sid_dict.json": ({"session_id": {"a": 1}, "messages": [{"role": "user", "content": "x"}]}, "session_id"),
    "deep_meta.json": (
        {"metadata": {"k": json.loads("[" * 80 + "]" * 80)}, "messages": [{"role": "user", "content": "x"}]},
        "nested deeper than 64",
    ),
}
RAW_BAD_FILES = {
    "surrogate.json": ('{"messages":[{"role":"user","content":"\\ud800 lone"}]}', "surrogate"),
    "deep.json": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "bigint.json": (
        '{"messages": [{"role": "user", "content": "x", "timestamp": ' + "9" * 5000 + "}]}",
        "digits",
    ),
    "ts_nan.json": ('{"messages": [{"role": "user", "content": "x", "timestamp": NaN}]}', "NaN"),
    "ts_inf.json": ('{"messages": [{"role": "user", "content": "x", "timestamp": Infinity}]}', "Infinity"),
}


def _bad_folder(tmp_path):
    folder = tmp_path / "mix"
    folder.mkdir()
    session_file(folder, "a-first")
    for name, (data, _) in BAD_FILES.items():
        (folder / name).write_text(json.dumps({"session_id": name[:-5], **data}))
    for name, (raw, _) in RAW_BAD_FILES.items():
        (folder / name).write_text(raw)
    session_file(folder, "z-last")
    return folder


def test_malformed_files_fail_alone_with_the_field_named(service, tmp_path):
    folder = _bad_folder(tmp_path)
    report = service.import_praisonai([folder], index=False)
    assert sorted(report.session_ids) == ["a-first", "z-last"]  # the run went on past every bad file
    failed = {p.rsplit("/", 1)[-1]: e for p, e in report.failed}
    expected = {**BAD_FILES, **RAW_BAD_FILES}
    assert set(failed) == set(expected)
    for name, (_, words) in expected.items():
        assert words in failed[name], (name, failed[name])
    assert {s["session_id"] for s in service.sessions()["sessions"]} == {"a-first", "z-last"}


def test_cli_reports_every_failed_file_in_json_and_exits_1(tmp_path):
    from click.testing import CliRunner

    from memviewer.cli import cli

    folder = _bad_folder(tmp_path)
    res = CliRunner().invoke(
        cli, ["--home", str(tmp_path / "h"), "import", "praisonai", "--no-index", "--json", str(folder)]
    )
    assert res.exit_code == 1 and "Traceback" not in res.output
    report = json.loads(res.stdout)
    assert len(report["imported"]) == 2 and len(report["failed"]) == len(BAD_FILES) + len(RAW_BAD_FILES)


def test_epoch_microseconds_are_read_as_such(service, tmp_path):
    (tmp_path / "us.json").write_text(
        json.dumps(
            {
                "session_id": "us",
                "messages": [{"role": "user", "content": "x", "timestamp": 1781172800123456}],
            }
        )
    )
    assert not service.import_praisonai([tmp_path / "us.json"], index=False).failed
    assert turns_of(service, "us")[0]["timestamp"] == pytest.approx(1781172800.123456)


# -- re-import and id collisions (docs/architecture.md, "Imports") ------------------
def test_an_edited_file_replaces_its_turns_and_an_unchanged_one_changes_nothing(service, tmp_path):
    path = session_file(tmp_path, "ed", archived=0, active=3)
    service.import_praisonai([path], index=False)
    data = json.loads(path.read_text())
    data["messages"][1]["content"] = "EDITED"
    path.write_text(json.dumps(data))
    report = service.import_praisonai([path], index=False)
    assert report.imported[0]["new_turns"] == 1 and report.imported[0]["removed_turns"] == 1
    turns = turns_of(service, "ed")
    assert [t["content"] for t in turns] == ["active ed 0", "EDITED", "active ed 2"]
    assert [t["idx"] for t in turns] == [0, 1, 2]
    before = turns_of(service, "ed")
    again = service.import_praisonai([path], index=False).imported[0]
    assert (again["new_turns"], again["updated_turns"], again["removed_turns"]) == (0, 0, 0)
    assert turns_of(service, "ed") == before


def test_a_file_without_any_times_reimports_as_a_no_op(service, tmp_path):
    path = tmp_path / "nt.json"
    path.write_text(
        json.dumps(
            {
                "session_id": "nt",
                "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}],
            }
        )
    )
    service.import_praisonai([path], index=False)
    ids = [t["id"] for t in turns_of(service, "nt")]
    again = service.import_praisonai([path], index=False).imported[0]
    assert again["new_turns"] == 0 and again["removed_turns"] == 0
    assert [t["id"] for t in turns_of(service, "nt")] == ids


def _live_session(service, sid):
    service.open_session(session_id=sid, scope="user", scope_id="u-bob", title="Billing", meta={"demo": True})
    ep = service.start_episode(sid, "live question")
    service.add_turn(ep["episode_id"], "assistant", "live answer")


def test_a_live_session_is_not_overwritten_without_replace(service, tmp_path):
    _live_session(service, "s-live")
    path = session_file(tmp_path, "s-live", archived=0, active=2)
    report = service.import_praisonai([path], index=False)
    assert not report.imported
    ((where, why),) = report.failed
    assert where == str(path) and why == "session s-live already exists (from published live)"
    assert [t["content"] for t in turns_of(service, "s-live")] == ["live question", "live answer"]
    assert service.session("s-live")["session"]["scope_id"] == "u-bob"


def test_replace_takes_the_file_and_drops_the_live_turns_from_every_index(service, tmp_path):
    from memviewer.index.lance import TURNS

    _live_session(service, "s-live")
    service.sync_index()
    path = session_file(tmp_path, "s-live", archived=0, active=2)
    report = service.import_praisonai([path], index=True, replace=True)
    assert report.imported[0]["removed_turns"] == 2 and not report.failed
    turns = turns_of(service, "s-live")
    assert [t["content"] for t in turns] == ["active s-live 0", "active s-live 1"]
    assert [t["idx"] for t in turns] == [0, 1]
    assert service.session("s-live")["episodes"] == []  # the live episode went with its turns
    rows = service.parts.lance.rows(TURNS, "session_id = 's-live'", ["turn_id"])
    assert sorted(r["turn_id"] for r in rows) == sorted(t["id"] for t in turns)
    assert service.search("answer")["results"] == []  # gone from the keyword index too
    # now the session is this file's: re-importing it needs no --replace
    assert not service.import_praisonai([path], index=False).failed


def test_another_file_with_the_same_session_id_is_refused_unless_identical(service, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = session_file(tmp_path / "a", "dup", archived=0, active=2)
    service.import_praisonai([first], index=False)
    copy = tmp_path / "b" / "dup.json"
    copy.write_bytes(first.read_bytes())
    assert not service.import_praisonai([copy], index=False).failed  # identical: nothing to do
    other = session_file(tmp_path / "b", "dup", archived=0, active=3)
    ((_, why),) = service.import_praisonai([other], index=False).failed
    assert why == f"session dup already exists (from PraisonAI file {first.resolve()})"
    assert len(turns_of(service, "dup")) == 2


def test_reimporting_a_file_never_silently_drops_turns_published_live_since(service, tmp_path):
    """The file is the record of what it held, not of what an agent added afterwards."""
    path = session_file(tmp_path, "grown", archived=0, active=2)
    service.import_praisonai([path], index=False)
    from sqlalchemy import text  # a session imported open (a JSON export of a live one) goes on live

    with service.store.write() as tx:
        tx.conn.execute(text("UPDATE sessions SET status = 'open', closed_at = NULL WHERE id = 'grown'"))
    ep = service.start_episode("grown", "a live follow-up")
    service.add_turn(ep["episode_id"], "assistant", "answered live")
    report = service.import_praisonai([path], index=False)
    ((where, why),) = report.failed
    assert where == str(path) and "2 turns published live since it was imported" in why
    assert [t["content"] for t in turns_of(service, "grown")][-2:] == ["a live follow-up", "answered live"]
    report = service.import_praisonai([path], index=False, replace=True)  # told to: the file wins
    assert not report.failed and len(turns_of(service, "grown")) == 2


def test_an_import_without_origin_never_takes_a_live_session(service):
    """Direct API callers pass no origin; a live session is still refused (its turns would go)."""
    from memviewer.errors import MemviewerError

    _live_session(service, "s-api")
    with pytest.raises(MemviewerError) as err:
        service.import_session(
            {"id": "s-api", "title": "from the API"},
            [{"id": "t-api-0", "role": "user", "content": "only this", "timestamp": 1e9}],
        )
    assert err.value.code == "conflict" and "published live" in err.value.message
    assert [t["content"] for t in turns_of(service, "s-api")] == ["live question", "live answer"]
