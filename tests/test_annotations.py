"""Tags and notes on sessions and turns: store, service, search, exports, import, CLI."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from cli_runs import invoke_on

from memviewer.api import Writer
from memviewer.errors import MemviewerError
from memviewer.io.export import export_sessions
from memviewer.io.json_import import import_file
from memviewer.service import MemoryService
from memviewer.store.migrations import latest_version

T0 = 1_781_000_000.0


def _fill(svc: MemoryService, sid: str = "s-a", words: str = "zebra crossing") -> list[str]:
    turns = [
        {"id": f"{sid}-t{i}", "role": role, "content": text, "timestamp": T0 + i, "archived": False}
        for i, (role, text) in enumerate(
            [("user", f"tell me about the {words}"), ("assistant", "it is striped"), ("user", "thanks")]
        )
    ]
    svc.import_session(
        {
            "id": sid,
            "agent": "a",
            "scope": "user",
            "scope_id": "u",
            "title": f"about {words}",
            "started_at": T0,
        },
        turns,
    )
    return [t["id"] for t in turns]


@pytest.fixture
def filled(service: MemoryService) -> MemoryService:
    _fill(service, "s-a", "zebra crossing")
    _fill(service, "s-b", "giraffe neck")
    return service


def test_the_service_is_an_annotation_writer_and_the_schema_has_migration_7(filled: MemoryService) -> None:
    assert isinstance(filled, Writer)
    assert filled.store.schema_version() == latest_version() >= 7


def test_tags_and_notes_are_stored_listed_and_removed(filled: MemoryService) -> None:
    out = filled.tag("s-a-t1", ["Bug", "needs-review", "bug"])
    assert out["target_kind"] == "turn" and out["session_id"] == "s-a" and out["index"] == 1
    assert out["tags"] == ["bug", "needs-review"] and out["changed"] == ["bug", "needs-review"]
    assert filled.tag("s-a-t1", ["bug"])["changed"] == []  # already there: no change
    filled.note("s-a", "  the session I keep coming back to  ")
    listed = {a["target_id"]: a for a in filled.annotations()}
    assert listed["s-a-t1"]["tags"] == ["bug", "needs-review"]
    assert listed["s-a"]["note"] == "the session I keep coming back to"
    assert [a["target_id"] for a in filled.annotations(tag="needs-review")] == ["s-a-t1"]
    gone = filled.tag("s-a-t1", ["bug", "never-had"], remove=True)
    assert gone["changed"] == ["bug"] and gone["tags"] == ["needs-review"]
    assert filled.note("s-a", None)["changed"] is True
    assert filled.note("s-a", None)["changed"] is False
    assert [a["target_id"] for a in filled.annotations()] == ["s-a-t1"]


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda s: s.tag("nope", ["x"]), "not_found"),
        (lambda s: s.note("nope", "x"), "not_found"),
        (lambda s: s.annotations("nope"), "not_found"),
        (lambda s: s.tag("s-a", ["two words"]), "invalid_argument"),
        (lambda s: s.tag("s-a", [""]), "invalid_argument"),
        (lambda s: s.tag("s-a", ["x" * 65]), "invalid_argument"),
        (lambda s: s.tag("s-a", []), "invalid_argument"),
        (lambda s: s.note("s-a", "   "), "invalid_argument"),
        (lambda s: s.note("s-a", "x" * 4001), "invalid_argument"),
    ],
)
def test_bad_ids_and_values_are_clear_errors_that_store_nothing(
    filled: MemoryService, call: Any, code: str
) -> None:
    with pytest.raises(MemviewerError) as err:
        call(filled)
    assert err.value.code == code
    assert "nope" in err.value.message if code == "not_found" else err.value.message
    assert filled.annotations() == []


def test_sessions_and_session_carry_annotations_only_when_present(filled: MemoryService) -> None:
    plain = {s["session_id"]: s for s in filled.sessions()["sessions"]}
    assert "tags" not in plain["s-a"] and "annotated_turns" not in plain["s-a"]
    assert "annotations" not in filled.session("s-a")
    filled.tag("s-a", ["keep"])
    filled.note("s-a-t2", "polite")
    rows = {s["session_id"]: s for s in filled.sessions()["sessions"]}
    assert rows["s-a"]["tags"] == ["keep"] and rows["s-a"]["annotated_turns"] == 1
    assert "tags" not in rows["s-b"]
    view = filled.session("s-a")
    assert view["annotations"] == {
        "s-a": {"tags": ["keep"], "note": None},
        "s-a-t2": {"tags": [], "note": "polite"},
    }


def test_deleting_a_session_deletes_its_tags_and_notes(filled: MemoryService) -> None:
    filled.tag("s-a", ["x"])
    filled.tag("s-a-t0", ["y"])
    filled.note("s-a-t1", "z")
    filled.tag("s-b-t0", ["x"])
    filled.delete_session("s-a")
    assert [a["target_id"] for a in filled.annotations()] == ["s-b-t0"]


def test_a_reimport_that_drops_a_turn_drops_its_annotations(filled: MemoryService) -> None:
    filled.tag("s-a-t2", ["gone-soon"])
    filled.tag("s-a-t0", ["stays"])
    session = filled.session("s-a")
    turns = [
        {
            "id": t["turn_id"],
            "role": t["role"],
            "content": t["content"],
            "timestamp": T0 + t["index"],
            "archived": False,
        }
        for t in session["turns"][:2]
    ]
    filled.import_session(
        {"id": "s-a", "title": "about zebra crossing", "started_at": T0}, turns, replace=True
    )
    assert [a["target_id"] for a in filled.annotations()] == ["s-a-t0"]


def test_search_by_tag_and_by_note_text(filled: MemoryService) -> None:
    filled.tag("s-b-t1", ["mammal"])
    filled.tag("s-a", ["mammal", "road"])
    only_tag = filled.search("tag:mammal")
    assert only_tag["success"] and only_tag["tags"] == ["mammal"]
    found = {(h["session_id"], h["target_kind"]) for h in only_tag["results"]}
    assert found == {("s-b", "turn"), ("s-a", "session")}
    turn_hit = next(h for h in only_tag["results"] if h["target_kind"] == "turn")
    assert turn_hit["anchor_index"] == 1 and turn_hit["snippet"] == "it is striped"
    assert any(m["index"] == 1 for m in turn_hit["messages"])
    # words and a tag: keyword search inside the tagged sessions only
    both = filled.search("tag:mammal giraffe")
    assert [h["session_id"] for h in both["results"]] == ["s-b"]
    assert filled.search("tag:road giraffe")["results"] == []
    assert filled.search("tag:nobody")["results"] == []
    assert filled.search("tag:Two%Bad")["success"] is False
    # note text (and tag names) match plain queries beside the keyword hits
    filled.note("s-a-t2", "Remember the pedestrian rules")
    plain = filled.search("pedestrian")
    assert plain["success"] and plain["results"] == []
    assert [(a["target_id"], a["matched"]) for a in plain["annotations"]] == [("s-a-t2", "note")]
    assert [a["target_id"] for a in filled.search("road")["annotations"]] == ["s-a"]
    assert "annotations" not in filled.search("zebra")  # nothing annotated matches: the old shape


def _export(svc: MemoryService, fmt: str, **kw: Any) -> str:
    buf = io.StringIO()
    export_sessions(svc.store, ["s-a"], fmt, buf, home=svc.home, **kw)
    return buf.getvalue()


def test_exports_carry_tags_and_notes_and_stay_unchanged_without(
    filled: MemoryService, tmp_path: Path
) -> None:
    before = {fmt: _export(filled, fmt) for fmt in ("json", "jsonl", "md")}
    assert "tags" not in before["json"] and "note" not in before["jsonl"]
    filled.tag("s-a", ["road"])
    filled.note("s-a", "crossing <b>notes</b>")
    filled.tag("s-a-t1", ["striped"])
    filled.note("s-a-t1", "answer")
    record = json.loads(_export(filled, "json"))["sessions"][0]
    assert record["session"]["tags"] == ["road"] and record["session"]["note"] == "crossing <b>notes</b>"
    by_id = {t["turn_id"]: t for t in record["turns"]}
    assert by_id["s-a-t1"]["tags"] == ["striped"] and by_id["s-a-t1"]["note"] == "answer"
    assert "tags" not in by_id["s-a-t0"] and "note" not in by_id["s-a-t0"]
    lines = [json.loads(x) for x in _export(filled, "jsonl").splitlines()]
    assert lines[1]["tags"] == ["striped"] and lines[1]["note"] == "answer"
    assert all(x["session_tags"] == ["road"] for x in lines) and "tags" not in lines[0]
    md = _export(filled, "md")
    assert "| tags | road |" in md and "crossing &lt;b>notes&lt;/b>" in md
    assert "*tags: `striped`*" in md and "*note:* answer" in md
    out = tmp_path / "pr"
    export_sessions(filled.store, ["s-a"], "praisonai", out, home=filled.home)
    doc = json.loads((out / "s-a.json").read_text(encoding="utf-8"))
    marks = doc["metadata"]["memviewer_annotations"]
    assert marks["session"] == {"tags": ["road"], "note": "crossing <b>notes</b>"}
    assert marks["turns"]["s-a-t1"] == {"tags": ["striped"], "note": "answer"}


def test_redacted_exports_mask_secrets_in_notes(filled: MemoryService) -> None:
    secret = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
    filled.note("s-a-t0", f"key was {secret}")
    text = _export(filled, "json", redact="standard")
    assert secret not in text and json.loads(text)["sessions"][0]["turns"][0]["note"].startswith("key was")


def test_json_import_round_trips_tags_and_notes(filled: MemoryService, settings: Any, tmp_path: Path) -> None:
    filled.tag("s-a", ["road"])
    filled.tag("s-a-t1", ["striped", "b"])
    filled.note("s-a-t1", "answer")
    path = tmp_path / "a.json"
    path.write_text(_export(filled, "json"), encoding="utf-8")
    other = settings.with_overrides(home=str(tmp_path / "other"))
    with MemoryService(other) as fresh:
        report = import_file(fresh.import_session, path, annotate=fresh.import_annotations)
        assert not report["failed"]
        assert fresh.session("s-a")["annotations"] == filled.session("s-a")["annotations"]
        again = tmp_path / "b.json"
        again.write_text(_export(fresh, "json"), encoding="utf-8")
    assert again.read_text(encoding="utf-8") == path.read_text(encoding="utf-8")


def test_json_import_refuses_bad_annotations_and_stores_nothing(
    filled: MemoryService, tmp_path: Path
) -> None:
    filled.tag("s-a", ["road"])
    record = json.loads(_export(filled, "json"))
    record["sessions"][0]["turns"][0]["tags"] = ["has space"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    with MemoryService(filled.settings.with_overrides(home=str(tmp_path / "o"))) as fresh:
        with pytest.raises(ValueError, match="turn 's-a-t0'.*no spaces"):
            import_file(fresh.import_session, path, annotate=fresh.import_annotations)
        assert fresh.sessions()["total"] == 0


def test_cli_tag_note_tags_and_their_json(filled: MemoryService) -> None:
    s = filled.settings
    r = invoke_on(s, "tag", "s-a-t0", "bug", "perf", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["tags"] == ["bug", "perf"]
    r = invoke_on(s, "note", "s-b", "look here")
    assert r.exit_code == 0 and "note set on session s-b" in r.output
    r = invoke_on(s, "tags", "--json")
    listed = json.loads(r.output)["annotations"]
    assert {a["target_id"] for a in listed} == {"s-a-t0", "s-b"}
    r = invoke_on(s, "tags", "s-a-t0")
    assert "bug, perf" in r.output
    r = invoke_on(s, "tag", "s-a-t0", "perf", "--remove")
    assert r.exit_code == 0 and "tags now: bug" in r.output
    r = invoke_on(s, "note", "s-b", "--remove", "--json")
    assert json.loads(r.output)["changed"] is True
    r = invoke_on(s, "search", "tag:bug", "--json")
    assert [h["session_id"] for h in json.loads(r.output)["results"]] == ["s-a"]


def test_cli_unknown_id_and_bad_arguments_fail_clearly(filled: MemoryService) -> None:
    s = filled.settings
    r = invoke_on(s, "tag", "nope", "bug")
    assert r.exit_code == 1 and "unknown session or turn 'nope'" in r.output
    r = invoke_on(s, "tag", "nope", "bug", "--json")
    assert json.loads(r.output)["code"] == "not_found"
    r = invoke_on(s, "note", "s-a")
    assert r.exit_code == 1 and "TEXT, or --remove" in r.output
    r = invoke_on(s, "note", "s-a", "x", "--remove")
    assert r.exit_code == 1
    r = invoke_on(s, "tags", "--tag", "has space", "--json")
    assert r.exit_code == 1 and json.loads(r.output)["code"] == "invalid_argument"
    assert filled.annotations() == []


def test_a_readonly_service_writes_annotations_beside_a_writer(filled: MemoryService) -> None:
    """The viewer beside a running hub reads the store read-only: its tag goes to SQLite anyway."""
    with MemoryService(filled.settings, readonly=True) as ro:
        ro.tag("s-a", ["from-viewer"])
        ro.note("s-a-t0", "seen")
    assert {a["target_id"] for a in filled.annotations()} == {"s-a", "s-a-t0"}


def test_tag_filter_with_an_id_keeps_only_a_match(filled: MemoryService) -> None:
    filled.tag("s-a-t1", ["one"])
    assert filled.annotations("s-a-t1", tag="other") == []
    assert [a["tags"] for a in filled.annotations("s-a-t1", tag="one")] == [["one"]]
    assert filled.annotations("s-a-t0") == [
        {
            "target_id": "s-a-t0",
            "target_kind": "turn",
            "session_id": "s-a",
            "index": 0,
            "tags": [],
            "note": None,
        }
    ]


@pytest.mark.integration
def test_tags_written_beside_a_real_hub_are_read_and_searched_through_it(
    tmp_path: Path, short_tmp: Path
) -> None:
    """A CLI beside a running hub writes the tag into SQLite; the hub's own reads (its
    ``search`` and ``sessions`` methods, what RemoteService asks) see it at once."""
    import os
    import subprocess
    import sys

    from memviewer.wire.remote import RemoteService
    from memviewer.wire.testing import HubProcess

    home, sock = tmp_path / "home", short_tmp / "hub.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVIEWER_")}
    env.update({"MEMVIEWER_CONFIG": os.devnull, "MEMVIEWER_SOCKET": str(sock)})

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        code = "from memviewer.cli import main; main()"
        return subprocess.run(
            [sys.executable, "-c", code, "--home", str(home), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=240,
        )

    fixtures = Path(__file__).parent / "fixtures" / "praisonai"
    assert (
        run("import", "praisonai", str(fixtures / "billing-review-8c1e.json"), "--no-index").returncode == 0
    )
    with HubProcess(home, sock, args=("--no-index",)):
        sid = json.loads(run("sessions", "--json").stdout)["sessions"][0]["session_id"]
        done = run("tag", sid, "billing", "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["tags"] == ["billing"]
        assert run("tag", "no-such-id", "x").returncode == 1
        remote = RemoteService(sock)
        try:
            found = remote.search("tag:billing")
            assert [h["session_id"] for h in found["results"]] == [sid]
            row = next(s for s in remote.sessions()["sessions"] if s["session_id"] == sid)
            assert row["tags"] == ["billing"]
        finally:
            remote.close()


def test_cli_export_then_import_json_keeps_tags_and_notes(filled: MemoryService, tmp_path: Path) -> None:
    filled.tag("s-a-t1", ["kept"])
    filled.note("s-b", "and this")
    out = tmp_path / "all.json"
    r = invoke_on(filled.settings, "export", "--all", "--format", "json", "-o", str(out))
    assert r.exit_code == 0, r.output
    other = filled.settings.with_overrides(home=str(tmp_path / "other"))
    r = invoke_on(other, "import", "json", str(out), "--no-index", "--json")
    assert r.exit_code == 0, r.output
    r = invoke_on(other, "tags", "--json")
    got = {a["target_id"]: (a["tags"], a["note"]) for a in json.loads(r.output)["annotations"]}
    assert got == {"s-a-t1": (["kept"], None), "s-b": ([], "and this")}
