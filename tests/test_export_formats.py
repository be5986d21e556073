"""Exports: golden files per format, redaction, stdout, errors, nothing half-written.

Regenerate the golden files after an intended format change with
``UPDATE_GOLDEN=1 pytest tests/test_export_formats.py`` and review the diff.
"""

from __future__ import annotations

import errno
import io
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from cli_runs import invoke

from memviewer.errors import MemviewerError
from memviewer.io.export import export_sessions
from memviewer.praisonai.importer import import_paths
from memviewer.session.manager import SessionManager
from memviewer.store.db import Store

GOLDEN = Path(__file__).parent / "golden"
FIXTURES = Path(__file__).parent / "fixtures" / "praisonai"
T0 = 1_781_000_000.0
SECRET = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"


def golden_sessions(mgr: SessionManager) -> None:
    """A live-style session with two episodes, a tool exchange, compaction and secrets,
    plus a PraisonAI file import: every id and timestamp fixed."""
    ep = {
        "status": "closed",
        "closed_by": "finalized",
        "intent_kind": "task",
        "intent_confidence": 0.92,
        "intent_rule": "en.imperative",
        "intent_source": "heuristic",
        "r_task": 0.8,
        "meta": None,
    }
    episodes = [
        {**ep, "id": "e-1", "started_at": T0, "ended_at": T0 + 50},
        {
            **ep,
            "id": "e-2",
            "started_at": T0 + 100,
            "ended_at": None,
            "status": "open",
            "closed_by": None,
            "intent_kind": "memory_probe",
            "intent_confidence": 0.88,
            "intent_rule": "en.recall",
            "r_task": None,
            "meta": {"note": "mail ops@example.com"},
        },
    ]

    def turn(i: int, role: str, content: str, **kw: Any) -> dict[str, Any]:
        return {
            "id": f"t-{i}",
            "episode_id": "e-1" if i < 4 else "e-2",
            "role": role,
            "content": content,
            "timestamp": T0 + 10 * i,
            "archived": i < 4,
            **kw,
        }

    turns = [
        turn(0, "user", f"Deploy with key {SECRET} please.\n# not a heading"),
        turn(
            1,
            "assistant",
            "",
            tool_calls=[
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "deploy",
                        "arguments": json.dumps({"service": "billing", "key": SECRET}),
                    },
                }
            ],
        ),
        turn(2, "tool", '{"status": "ok"}', tool_call_id="call_1"),
        turn(3, "assistant", "Deployed billing. Questions go to ops@example.com.", meta={"model": "m-1"}),
        {
            "id": "t-sum",
            "episode_id": None,
            "role": "system",
            "timestamp": T0 + 95,
            "archived": False,
            "content": "[compaction summary] 4 earlier turns were archived.\n- user: Deploy with key …",
            "is_compaction_summary": True,
            "replaced_count": 4,
            "meta": {"compaction": True, "compacted_count": 4},
        },
        turn(5, "user", "What did we deploy, and which key did I give you?"),
        turn(6, "assistant", f"Billing, with {SECRET}.", meta={"latency_ms": 812}),
    ]
    mgr.import_session(
        {
            "id": "s-live",
            "agent": "deployer",
            "scope": "user",
            "scope_id": "alice",
            "title": "Deploy billing",
            "started_at": T0,
            "last_seen_at": T0 + 60,
            "status": "open",
            "source": "cli",
            "lineage_id": "lin-7",
            "meta": {"team": "payments", "contact": "ops@example.com"},
        },
        turns,
        episodes,
    )
    report = import_paths(mgr.import_session, [FIXTURES / "billing-review-8c1e.json"])
    assert not report.failed


@pytest.fixture
def golden_store(tmp_path: Path):
    store = Store.open(tmp_path / "g.db")
    golden_sessions(SessionManager(store))
    yield store
    store.close()


def _check_golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    assert actual == path.read_text(encoding="utf-8"), f"{name} differs from its golden file"


@pytest.mark.parametrize("fmt,ext", [("json", "json"), ("jsonl", "jsonl"), ("md", "md")])
def test_stream_formats_match_golden(golden_store, fmt: str, ext: str) -> None:
    buf = io.StringIO()
    result = export_sessions(golden_store, None, fmt, buf)
    assert result["sessions"] == 2 and result["turns"] == 7 + 11
    _check_golden(f"export.{ext}", buf.getvalue())


def test_praisonai_folder_matches_golden(golden_store, tmp_path: Path) -> None:
    out = tmp_path / "pa"
    result = export_sessions(golden_store, None, "praisonai", out)
    assert result["path"] == str(out)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["billing-review-8c1e.json", "s-live.json"]  # no staging folder left behind
    for name in names:
        _check_golden(f"praisonai/{name}", (out / name).read_text(encoding="utf-8"))


def test_json_export_is_valid_and_complete(golden_store) -> None:
    buf = io.StringIO()
    export_sessions(golden_store, ["s-live"], "json", buf)
    doc = json.loads(buf.getvalue())
    assert doc["format"] == "memviewer.export" and doc["version"] == 1
    (entry,) = doc["sessions"]
    assert [e["episode_id"] for e in entry["episodes"]] == ["e-1", "e-2"]
    turns = entry["turns"]
    assert [t["index"] for t in turns] == list(range(7))
    assert [t["archived"] for t in turns] == [True] * 4 + [False] * 3
    summary = turns[4]
    assert summary["is_compaction_summary"] and summary["replaced_count"] == 4
    assert turns[1]["tool_calls"][0]["function"]["name"] == "deploy"


def test_redaction_masks_consistently_and_leaves_the_store_alone(golden_store) -> None:
    before = _dump(golden_store)
    buf = io.StringIO()
    result = export_sessions(golden_store, ["s-live"], "json", buf, redact="standard")
    text = buf.getvalue()
    assert SECRET not in text and "ops@example.com" not in text
    doc = json.loads(text)
    entry = doc["sessions"][0]
    assert doc["redaction"] == "standard"
    key_mask = "[REDACTED:api_key:1]"
    assert key_mask in entry["turns"][0]["content"] and key_mask in entry["turns"][6]["content"]
    assert key_mask in entry["turns"][1]["tool_calls"][0]["function"]["arguments"]
    assert entry["session"]["metadata"]["contact"] == "[REDACTED:email:1]"
    assert "[REDACTED:email:1]" in entry["turns"][3]["content"]
    assert entry["episodes"][1]["metadata"]["note"] == "mail [REDACTED:email:1]"
    # ids, timestamps and tool names are never touched
    assert entry["turns"][1]["tool_calls"][0]["id"] == "call_1"
    assert [t["turn_id"] for t in entry["turns"]][:2] == ["t-0", "t-1"]
    assert entry["turns"][0]["timestamp"] == T0
    assert result["redactions"] == {"api_key": 3, "email": 3}
    assert _dump(golden_store) == before


def test_redaction_reaches_titles_and_praisonai_metadata(golden_store, tmp_path: Path) -> None:
    from sqlalchemy import text

    with golden_store.write() as tx:
        tx.conn.execute(
            text("UPDATE sessions SET title = :t, agent = :a WHERE id = 's-live'"),
            {"t": f"key {SECRET}", "a": "bot for ops@example.com"},
        )
    buf = io.StringIO()
    export_sessions(golden_store, ["s-live"], "md", buf, redact="strict")
    assert SECRET not in buf.getvalue() and "# key [REDACTED:api_key:1]" in buf.getvalue()
    assert "ops@example.com" not in buf.getvalue() and "bot for [REDACTED:email:1]" in buf.getvalue()
    buf = io.StringIO()
    export_sessions(golden_store, ["s-live"], "json", buf)  # no redaction: the agent as stored
    assert json.loads(buf.getvalue())["sessions"][0]["session"]["agent"] == "bot for ops@example.com"
    export_sessions(golden_store, ["s-live"], "praisonai", tmp_path / "pa", redact="standard")
    doc = json.loads((tmp_path / "pa" / "s-live.json").read_text())
    assert doc["metadata"]["title"] == "key [REDACTED:api_key:1]"
    assert doc["created_at"] == "2026-06-09T10:13:20+00:00" and doc["user_id"] == "alice"


def _dump(golden_store) -> list:
    from sqlalchemy import text

    with golden_store.read() as conn:
        return [
            tuple(r)
            for t in ("sessions", "episodes", "turns")
            for r in conn.execute(text(f"SELECT * FROM {t} ORDER BY 1"))
        ]


def test_unknown_ids_fail_before_writing_anything(golden_store, tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    with pytest.raises(MemviewerError) as err:
        export_sessions(golden_store, ["s-live", "nope-1", "nope-2"], "json", target)
    assert err.value.code == "session_not_found" and "nope-1, nope-2" in err.value.message
    assert err.value.data["unknown"] == ["nope-1", "nope-2"]
    assert not target.exists() and not list(tmp_path.glob(".out.json*"))
    with pytest.raises(MemviewerError):
        export_sessions(golden_store, None, "praisonai", "-")
    with pytest.raises(MemviewerError):
        export_sessions(golden_store, None, "xml", io.StringIO())


def test_failed_file_export_keeps_the_previous_file(golden_store, tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "out.md"
    target.write_text("previous export\n")
    from memviewer.io.exporters import markdown_format

    def boom(self, bundle):
        raise OSError("disk full")

    monkeypatch.setattr(markdown_format.MarkdownWriter, "write", boom)
    with pytest.raises(MemviewerError, match="cannot write the export to .*out.md: disk full"):
        export_sessions(golden_store, None, "md", target)
    assert target.read_text() == "previous export\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


# -- the CLI -----------------------------------------------------------------------
@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    store = Store.open(h / "memviewer.db")
    golden_sessions(SessionManager(store))
    store.close()
    return h


def test_cli_export_to_stdout_and_file(home: Path, tmp_path: Path) -> None:
    r = invoke(home, "export", "s-live", "--format", "jsonl", "-o", "-")
    assert r.exit_code == 0
    lines = r.stdout.strip().split("\n")
    assert len(lines) == 7 and json.loads(lines[0])["turn_id"] == "t-0"
    assert "exported 1 session (7 turns)" in r.stderr
    one = tmp_path / "one.json"
    assert invoke(home, "export", "s-live", "--format", "json", "-o", str(one)).exit_code == 0
    r = invoke(tmp_path / "other-home", "import", "json", str(one), "--no-index")
    assert r.exit_code == 0 and r.stdout.startswith("imported 1 session (7 turns, 7 new)\n")
    r = invoke(home, "export", "--all", "--format", "json")  # no -o: stdout
    assert r.exit_code == 0 and len(json.loads(r.stdout)["sessions"]) == 2
    out = tmp_path / "all.md"
    r = invoke(home, "export", "--all", "--format", "md", "-o", str(out), "--redact", "standard")
    assert r.exit_code == 0 and str(out) in r.stdout and "masked" in r.stdout
    assert SECRET not in out.read_text() and "# Billing migration review" in out.read_text()


def test_cli_export_errors(home: Path, tmp_path: Path) -> None:
    r = invoke(home, "export", "s-live", "ghost", "--format", "json", "-o", str(tmp_path / "x.json"))
    assert r.exit_code != 0 and "ghost" in r.stderr and not (tmp_path / "x.json").exists()
    assert invoke(home, "export", "--format", "json").exit_code != 0
    assert invoke(home, "export", "--all", "--format", "praisonai").exit_code != 0
    assert invoke(home, "export", "--all", "s-live", "--format", "md").exit_code != 0


def test_cli_json_round_trip_through_import(home: Path, tmp_path: Path) -> None:
    first = tmp_path / "a.json"
    assert invoke(home, "export", "--all", "--format", "json", "-o", str(first)).exit_code == 0
    other = tmp_path / "other-home"
    r = invoke(other, "import", "json", str(first), "--no-index")
    assert r.exit_code == 0 and "imported 2 sessions (18 turns, 18 new)" in r.stdout
    again = invoke(other, "import", "json", str(first), "--no-index")
    assert "18 turns, 0 new" in again.stdout  # idempotent
    second = tmp_path / "b.json"
    assert invoke(other, "export", "--all", "--format", "json", "-o", str(second)).exit_code == 0
    assert first.read_bytes() == second.read_bytes()
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something-else"}')
    r = invoke(other, "import", "json", str(bad))
    assert r.exit_code != 0 and "memviewer.export" in r.stderr


# -- ids that carry personal data ---------------------------------------------------
CAROL, DAVE = "carol@example.com", "dave@example.org"
PSEUDONYM = r"{prefix}-[bcdfghjklmnpqrst]{{10}}"


def email_id_sessions(golden_store, tmp_path: Path) -> None:
    """Two sessions of a user whose id is an e-mail (one also named after it, the other
    pointing at it as its root), and a PraisonAI file whose user_id is an e-mail."""
    mgr = SessionManager(golden_store)
    first = f"{CAROL}#1"
    for sid, extra in ((first, {}), ("s-carol-2", {"root_session_id": first})):
        mgr.import_session(
            {
                "id": sid,
                "scope": "user",
                "scope_id": CAROL,
                "title": "Trip",
                "started_at": T0 + 500,
                "last_seen_at": T0 + 510,
                **extra,
            },
            [{"id": f"{sid}-t0", "role": "user", "content": "Book the train.", "timestamp": T0 + 500}],
        )
    doc = {
        "session_id": "dave-chat",
        "user_id": DAVE,
        "agent_name": None,
        "created_at": T0 + 600,
        "updated_at": T0 + 610,
        "metadata": {},
        "messages": [{"role": "user", "content": "Hello", "timestamp": T0 + 600}],
    }
    (tmp_path / "dave-chat.json").write_text(json.dumps(doc))
    assert not import_paths(mgr.import_session, [tmp_path / "dave-chat.json"]).failed


def _export_all(golden_store, tmp_path: Path, redact: str | None, tag: str = "") -> dict[str, str]:
    """Every format of every session: {format: text}, PraisonAI files keyed by name."""
    out: dict[str, str] = {}
    for fmt in ("json", "jsonl", "md"):
        buf = io.StringIO()
        export_sessions(golden_store, None, fmt, buf, redact=redact)
        out[fmt] = buf.getvalue()
    folder = tmp_path / f"pa-{redact}{tag}"
    export_sessions(golden_store, None, "praisonai", folder, redact=redact)
    for path in sorted(folder.iterdir()):
        out[f"praisonai/{path.name}"] = path.read_text(encoding="utf-8")
    return out


@pytest.mark.parametrize("level", ["standard", "strict"])
def test_email_ids_become_stable_pseudonyms_in_every_format(golden_store, tmp_path: Path, level: str) -> None:
    email_id_sessions(golden_store, tmp_path)
    exported = _export_all(golden_store, tmp_path, level)
    for name, text in exported.items():
        assert CAROL not in text and DAVE not in text, name

    entries = json.loads(exported["json"])["sessions"]
    by_id = {e["session"]["session_id"]: e for e in entries}
    child = by_id["s-carol-2"]["session"]
    named = by_id[child["root_session_id"]]["session"]  # the root link follows the pseudonym
    assert re.fullmatch(PSEUDONYM.format(prefix="session"), named["session_id"])
    user = named["scope_id"]
    assert re.fullmatch(PSEUDONYM.format(prefix="user"), user)
    assert child["scope_id"] == user  # the same user still groups
    (turn,) = by_id[named["session_id"]]["turns"]  # a turn id holding the e-mail, too
    assert re.fullmatch(PSEUDONYM.format(prefix="turn"), turn["turn_id"])
    dave = by_id["dave-chat"]["session"]
    assert re.fullmatch(PSEUDONYM.format(prefix="user"), dave["scope_id"]) and dave["scope_id"] != user
    assert dave["metadata"]["praisonai"]["user_id"] == dave["scope_id"]

    jsonl_ids = {json.loads(line)["session_id"] for line in exported["jsonl"].splitlines()}
    assert named["session_id"] in jsonl_ids and "s-carol-2" in jsonl_ids
    assert f"| scope | user:{user} |" in exported["md"]
    assert f"| session | `{named['session_id']}` |" in exported["md"]
    pa = {name: json.loads(text) for name, text in exported.items() if name.startswith("praisonai/")}
    assert pa[f"praisonai/{named['session_id']}.json"]["session_id"] == named["session_id"]
    assert pa["praisonai/dave-chat.json"]["user_id"] == dave["scope_id"]
    assert pa["praisonai/s-carol-2.json"]["user_id"] == user

    # Plain ids are written unchanged.
    live = by_id["s-live"]["session"]
    assert (live["scope_id"], live["lineage_id"]) == ("alice", "lin-7")
    assert pa["praisonai/billing-review-8c1e.json"]["user_id"] == "alice"

    # The same ids give the same pseudonyms in a second export (a new Redactor).
    again = _export_all(golden_store, tmp_path, level, tag="-again")
    assert again == exported


def test_email_ids_are_kept_without_redaction(golden_store, tmp_path: Path) -> None:
    email_id_sessions(golden_store, tmp_path)
    exported = _export_all(golden_store, tmp_path, None)
    doc = json.loads(exported["json"])
    assert {e["session"]["scope_id"] for e in doc["sessions"]} == {"alice", CAROL, DAVE}
    assert f"{CAROL}#1" in exported["jsonl"] and f"user:{CAROL}" in exported["md"]
    assert json.loads(exported["praisonai/dave-chat.json"])["user_id"] == DAVE


def test_strict_pseudonymises_ids_with_other_personal_data(golden_store, tmp_path: Path) -> None:
    mgr = SessionManager(golden_store)
    mgr.import_session(
        {
            "id": "s-phone",
            "scope": "user",
            "scope_id": "+49 151 12345678",
            "title": "t",
            "started_at": T0 + 700,
            "last_seen_at": T0 + 700,
        },
        [],
    )

    def scope_ids(level: str) -> dict[str, str]:
        buf = io.StringIO()
        export_sessions(golden_store, None, "json", buf, redact=level)
        sessions = json.loads(buf.getvalue())["sessions"]
        return {e["session"]["session_id"]: e["session"]["scope_id"] for e in sessions}

    assert scope_ids("standard")["s-phone"] == "+49 151 12345678"  # standard: e-mails only
    strict = scope_ids("strict")
    assert strict["s-phone"].startswith("user-") and strict["s-live"] == "alice"


def test_cli_pseudonyms_are_keyed_by_the_home(home: Path, tmp_path: Path) -> None:
    from memviewer.io.redact import KEY_FILE, pseudonym

    store = Store.open(home / "memviewer.db")
    SessionManager(store).import_session(
        {
            "id": "s-carol",
            "scope": "user",
            "scope_id": CAROL,
            "title": "t",
            "started_at": T0 + 800,
            "last_seen_at": T0 + 800,
        },
        [],
    )
    store.close()
    r = invoke(home, "export", "s-carol", "--format", "json", "--redact", "standard")
    assert r.exit_code == 0, r.stderr
    scope_id = json.loads(r.stdout)["sessions"][0]["session"]["scope_id"]
    key_file = home / KEY_FILE
    assert key_file.stat().st_mode & 0o777 == 0o600
    key = bytes.fromhex(key_file.read_text().strip())
    assert scope_id == pseudonym(CAROL, "user", key) != pseudonym(CAROL, "user")  # keyed, not bare SHA-256
    assert "1 value masked (standard)" in r.stderr  # the pseudonymised scope id is counted
    again = invoke(home, "export", "s-carol", "--format", "json", "--redact", "strict")
    assert json.loads(again.stdout)["sessions"][0]["session"]["scope_id"] == scope_id


# -- targets that must not be clobbered, and write failures ------------------------------------
@pytest.mark.parametrize("inside", ["memviewer.db", "memviewer.db-wal", "lance/x.json", "new.json", "."])
def test_cli_refuses_a_target_inside_the_home(home: Path, inside: str) -> None:
    (home / "lance").mkdir(exist_ok=True)
    before = (home / "memviewer.db").read_bytes()
    target = home / inside
    r = invoke(home, "export", "--all", "--format", "json", "-o", str(target))
    assert r.exit_code == 1 and "is inside the memviewer home" in r.stderr and "hint:" in r.stderr
    assert (home / "memviewer.db").read_bytes() == before
    assert invoke(home, "sessions", "--json").exit_code == 0


def test_a_symlink_into_the_home_is_refused_and_one_elsewhere_is_followed(home: Path, tmp_path: Path) -> None:
    to_db = tmp_path / "db-link"
    to_db.symlink_to(home / "memviewer.db")
    r = invoke(home, "export", "--all", "--format", "json", "-o", str(to_db))
    assert r.exit_code == 1
    assert f"{to_db} (-> {home / 'memviewer.db'}) is inside the memviewer home" in r.stderr
    real = tmp_path / "real.jsonl"
    real.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    assert invoke(home, "export", "--all", "--format", "jsonl", "-o", str(link)).exit_code == 0
    assert link.is_symlink() and len(real.read_text().splitlines()) == 18  # the link stays, its file is new


def test_a_fifo_is_written_through(golden_store, tmp_path: Path) -> None:
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    result = export_sessions(golden_store, None, "jsonl", fifo)
    reader.join(timeout=10)
    assert result["path"] == str(fifo) and fifo.exists() and not fifo.is_file()  # still the FIFO
    assert len(got[0].splitlines()) == result["turns"] == 18


def test_a_character_device_is_written_through(golden_store) -> None:
    assert export_sessions(golden_store, None, "md", "/dev/null")["path"] == "/dev/null"
    assert Path("/dev/null").is_char_device()


def test_praisonai_does_not_overwrite_existing_files_without_force(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "pz"
    assert invoke(home, "export", "--all", "--format", "praisonai", "-o", str(out)).exit_code == 0
    names = sorted(p.name for p in out.iterdir())
    originals = {n: (out / n).read_bytes() for n in names}
    r = invoke(home, "export", "--all", "--format", "praisonai", "--redact", "standard", "-o", str(out))
    assert r.exit_code == 1
    assert f"2 session files in {out} would be overwritten" in r.stderr and names[0] in r.stderr
    assert "hint: pass --force" in r.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == originals  # no staging folder left either
    r = invoke(
        home, "export", "--all", "--format", "praisonai", "--redact", "standard", "-o", str(out), "--force"
    )
    assert r.exit_code == 0 and SECRET not in "".join(p.read_text() for p in out.iterdir())


@pytest.mark.parametrize(
    ("err", "hint"),
    [
        (errno.ENOSPC, "free space on the disk holding"),
        (errno.EACCES, "check that you may write to"),
    ],
)
@pytest.mark.parametrize("fmt", ["json", "praisonai"])
def test_cli_write_failures_are_one_error_line_and_leave_nothing(
    home: Path, tmp_path: Path, monkeypatch, err: int, hint: str, fmt: str
) -> None:
    real_replace = os.replace

    def failing_replace(src, dst):
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(os, "replace", failing_replace)
    out = tmp_path / "out"
    r = invoke(home, "export", "--all", "--format", fmt, "-o", str(out))
    monkeypatch.setattr(os, "replace", real_replace)
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert r.stderr.startswith(
        f"error: cannot write the export to {out}: {os.strerror(err)}; nothing was written"
    )
    assert hint in r.stderr
    leftovers = [p.name for p in tmp_path.rglob("*") if p.name.startswith(".")]
    assert leftovers == [] and (not out.exists() or list(out.iterdir()) == [])


def test_a_praisonai_export_that_fails_part_way_says_how_much_was_written(
    golden_store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memviewer.io.export as export_mod

    real_replace = os.replace
    calls = {"n": 0}

    def flaky_replace(src: Any, dst: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise PermissionError(errno.EACCES, "Permission denied")
        real_replace(src, dst)

    monkeypatch.setattr(export_mod.os, "replace", flaky_replace)
    with pytest.raises(MemviewerError) as err:
        export_sessions(golden_store, None, "praisonai", tmp_path / "pa")
    from sqlalchemy import text

    with golden_store.read() as conn:
        total = int(conn.execute(text("SELECT COUNT(*) FROM sessions")).scalar())
    assert total >= 2
    assert f"1 of {total} session files were written" in err.value.message
    assert "nothing was written" not in err.value.message
    assert len(list((tmp_path / "pa").glob("*.json"))) == 1
