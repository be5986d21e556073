"""Round trips: export → import into a fresh store → export gives identical bytes
(json and praisonai), and PraisonAI files survive memviewer without loss."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from memviewer.io.export import export_sessions
from memviewer.io.json_import import ExportFileError, import_file
from memviewer.praisonai.importer import import_paths
from memviewer.session.manager import SessionManager
from memviewer.store.db import Store

FIXTURES = Path(__file__).parent / "fixtures" / "praisonai"
_counter = itertools.count()

json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
meta_keys = st.sampled_from(["a", "note", "x y", "ключ", "title"])
meta = st.none() | st.dictionaries(meta_keys, json_value, max_size=3)
ident = st.text(alphabet="abcxyz019-_./: ", min_size=1, max_size=10)


@st.composite
def session_bundle(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    sid = "s" + draw(ident)
    t = draw(st.floats(1e9, 2e9))
    n_eps = draw(st.integers(0, 2))
    episodes = [
        {
            "id": f"{sid}-e{i}",
            "status": draw(st.sampled_from(["open", "closed"])),
            "closed_by": draw(st.none() | st.sampled_from(["finalized", "abandoned"])),
            "started_at": t + i,
            "ended_at": draw(st.none() | st.just(t + i + 0.5)),
            "intent_kind": draw(st.sampled_from(["task", "chitchat", "unknown"])),
            "intent_confidence": draw(st.floats(0, 1)),
            "intent_rule": "r",
            "intent_source": "heuristic",
            "r_task": draw(st.none() | st.floats(0, 1)),
            "meta": draw(meta),
        }
        for i in range(n_eps)
    ]
    n = draw(st.integers(0, 8))
    n_archived = draw(st.integers(0, n))
    turns = []
    for i in range(n):
        t += draw(st.floats(0, 5000))
        turns.append(
            {
                "id": f"{sid}-t{i}",
                "episode_id": draw(st.none() | st.sampled_from([e["id"] for e in episodes] or [None])),
                "role": draw(st.sampled_from(["user", "assistant", "tool", "system"])),
                "content": draw(st.text(max_size=40)),
                "timestamp": t,
                "archived": i < n_archived,
                "tool_calls": draw(
                    st.none()
                    | st.lists(
                        st.fixed_dictionaries(
                            {
                                "id": ident,
                                "type": st.just("function"),
                                "function": st.fixed_dictionaries(
                                    {"name": ident, "arguments": st.text(max_size=20)}
                                ),
                            }
                        ),
                        max_size=2,
                    )
                ),
                "tool_call_id": draw(st.none() | ident),
                "meta": draw(meta),
            }
        )
    if n_archived and n_archived < n or (n_archived and draw(st.booleans())):
        turns.insert(
            n_archived,
            {
                "id": f"{sid}-sum",
                "episode_id": None,
                "role": "system",
                "timestamp": t + 1,
                "content": f"[compaction summary] {n_archived} earlier turns were archived.",
                "archived": False,
                "is_compaction_summary": True,
                "replaced_count": n_archived,
                "meta": {"compaction": True, "compacted_count": n_archived},
                "tool_calls": None,
                "tool_call_id": None,
            },
        )
    scope = draw(st.sampled_from(["user", "agent", "team"]))
    session = {
        "id": sid,
        "agent": draw(st.text(max_size=8)),
        "scope": scope,
        "scope_id": draw(st.text(max_size=6)),
        "title": draw(st.text(max_size=20)),
        "started_at": t - 1e6,
        "last_seen_at": t,
        "closed_at": draw(st.none() | st.just(t + 2)),
        "status": draw(st.sampled_from(["open", "closed"])),
        "source": draw(st.none() | st.sampled_from(["cli", "cron", ""])),
        "lineage_id": draw(st.none() | ident),
        "root_session_id": draw(st.none() | ident),
        "thread_id": None,
        "parent_session_id": draw(st.none() | ident),
        "retention": draw(st.sampled_from(["compact", "keep_all"])),
        "active_window": draw(st.integers(2, 500)),
        "meta": draw(meta),
    }
    return session, turns, episodes


def _fresh(tmp: Path) -> tuple[Store, SessionManager]:
    store = Store.open(tmp / f"rt-{next(_counter)}.db")
    return store, SessionManager(store)


def _json_export(store: Store) -> str:
    buf = io.StringIO()
    export_sessions(store, None, "json", buf)
    return buf.getvalue()


def _folder_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


ROUNDTRIP = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@ROUNDTRIP
@given(bundles=st.lists(session_bundle(), min_size=1, max_size=3, unique_by=lambda b: b[0]["id"]))
def test_json_round_trip_is_byte_identical(tmp_path: Path, bundles) -> None:
    a, mgr_a = _fresh(tmp_path)
    b, mgr_b = _fresh(tmp_path)
    try:
        for session, turns, episodes in bundles:
            mgr_a.import_session(session, turns, episodes)
        first = _json_export(a)
        path = tmp_path / f"export-{next(_counter)}.json"
        path.write_text(first, encoding="utf-8")
        report = import_file(mgr_b.import_session, path)
        assert len(report["imported"]) == len(bundles)
        assert _json_export(b) == first
        assert import_file(mgr_b.import_session, path)["imported"][0]["new_turns"] == 0  # idempotent
    finally:
        a.close()
        b.close()


@ROUNDTRIP
@given(bundles=st.lists(session_bundle(), min_size=1, max_size=3, unique_by=lambda b: b[0]["id"]))
def test_praisonai_round_trip_is_byte_identical(tmp_path: Path, bundles) -> None:
    a, mgr_a = _fresh(tmp_path)
    b, mgr_b = _fresh(tmp_path)
    n = next(_counter)
    try:
        for session, turns, episodes in bundles:
            mgr_a.import_session(session, turns, episodes)
        export_sessions(a, None, "praisonai", tmp_path / f"pa1-{n}")
        report = import_paths(mgr_b.import_session, [tmp_path / f"pa1-{n}"])
        assert not report.failed and len(report.imported) == len(bundles)
        export_sessions(b, None, "praisonai", tmp_path / f"pa2-{n}")
        assert _folder_bytes(tmp_path / f"pa2-{n}") == _folder_bytes(tmp_path / f"pa1-{n}")
    finally:
        a.close()
        b.close()


def _rows(store: Store) -> dict[str, list[tuple]]:
    with store.read() as conn:
        return {
            "sessions": [tuple(r) for r in conn.execute(text("SELECT * FROM sessions ORDER BY id"))],
            "turns": [tuple(r)[1:] for r in conn.execute(text("SELECT * FROM turns ORDER BY id"))],
        }


def test_praisonai_files_survive_memviewer_losslessly(tmp_path: Path) -> None:
    a, mgr_a = _fresh(tmp_path)
    b, mgr_b = _fresh(tmp_path)
    try:
        assert not import_paths(mgr_a.import_session, [FIXTURES]).failed
        export_sessions(a, None, "praisonai", tmp_path / "out")
        assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
            p.name for p in FIXTURES.glob("*.json")
        )
        assert not import_paths(mgr_b.import_session, [tmp_path / "out"]).failed
        assert _rows(b) == _rows(a)  # same ids, contents, flags and metadata
        original = json.loads((FIXTURES / "billing-review-8c1e.json").read_text())
        written = json.loads((tmp_path / "out" / "billing-review-8c1e.json").read_text())
        assert written == original  # this file already had every key in canonical form
    finally:
        a.close()
        b.close()


# -- import json: malformed files and id collisions ----------------------------------
GOOD = {
    "session": {"session_id": "s-good", "started_at": 1.7e9, "last_seen_at": 1.7e9},
    "episodes": [],
    "turns": [
        {"turn_id": "g-1", "index": 0, "role": "user", "content": "hi", "timestamp": 1.7e9, "archived": False}
    ],
}


def _turn(**over: Any) -> dict[str, Any]:
    return {"turn_id": "b-1", "index": 0, "role": "user", "content": "x", "timestamp": 1.7e9, **over}


def _export_file(path: Path, *records: dict[str, Any]) -> Path:
    lines = ",\n".join(json.dumps(r) for r in records)
    path.write_text(
        '{"format":"memviewer.export","version":1,"redaction":null,"sessions":[\n' + lines + "\n]}\n",
        encoding="utf-8",
    )
    return path


BAD_RECORDS = {
    "episodes_int": ({"session": {"session_id": "b"}, "episodes": 5}, "'episodes' must be a list"),
    "turns_int": ({"session": {"session_id": "b"}, "turns": 7}, "'turns' must be a list"),
    "huge_ts": ({"session": {"session_id": "b"}, "turns": [_turn(timestamp=1e300)]}, "1970 and 9999"),
    "str_ts": ({"session": {"session_id": "b"}, "turns": [_turn(timestamp="soon")]}, "epoch seconds"),
    "bad_role": ({"session": {"session_id": "b"}, "turns": [_turn(role="wizard")]}, "role must be one of"),
    "list_content": ({"session": {"session_id": "b"}, "turns": [_turn(content=["x"])]}, "content must be"),
    "dict_tool_id": (
        {"session": {"session_id": "b"}, "turns": [_turn(tool_call_id={"a": 1})]},
        "tool_call_id",
    ),
    "ep_no_id": ({"session": {"session_id": "b"}, "episodes": [{"started_at": 1.7e9}]}, "episode_id"),
    "dup_turn": ({"session": {"session_id": "b"}, "turns": [_turn(), _turn(index=1)]}, "appears twice"),
    "scope_list": ({"session": {"session_id": "b", "scope": ["x"]}}, "scope must be a string"),
    "meta_str": ({"session": {"session_id": "b", "metadata": "x"}}, "metadata must be an object"),
    "window_str": ({"session": {"session_id": "b", "active_window": "9"}}, "active_window"),
    "count_neg": ({"session": {"session_id": "b"}, "turns": [_turn(replaced_count=-1)]}, "replaced_count"),
    "surrogate": ({"session": {"session_id": "b"}, "turns": [_turn(content="\ud800")]}, "surrogate"),
    "stray_episode": (
        {"session": {"session_id": "b"}, "turns": [_turn(episode_id="e-x")]},
        "episode e-x is not in session b",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_RECORDS))
def test_a_malformed_export_stores_nothing_and_names_the_field(tmp_path: Path, case: str) -> None:
    svc, mgr = _fresh(tmp_path)
    record, words = BAD_RECORDS[case]
    path = _export_file(tmp_path / f"{case}.json", GOOD, record)
    try:
        if case == "stray_episode":  # only the store can tell: the good session still goes in
            report = import_file(mgr.import_session, path)
            assert [r["session_id"] for r in report["imported"]] == ["s-good"]
            assert words in report["failed"][0]["error"]
            return
        with pytest.raises(ExportFileError) as err:
            import_file(mgr.import_session, path)
        assert str(err.value).startswith(f"{path}: ") and words in str(err.value)
        assert _rows(svc)["sessions"] == []  # the good session before it was not stored either
    finally:
        svc.close()


def test_nan_or_absurd_nesting_or_huge_ints_are_file_errors(tmp_path: Path) -> None:
    svc, mgr = _fresh(tmp_path)
    head = '{"format":"memviewer.export","version":1,"redaction":null,"sessions":[\n'
    cases = {
        "nan": '{"session":{"session_id":"b","started_at":NaN}}',
        "deep": "[" * 100_000 + "]" * 100_000,
        "bigint": '{"session":{"session_id":"b","active_window":' + "9" * 5000 + "}}",
    }
    try:
        for name, line in cases.items():
            path = tmp_path / f"{name}.json"
            path.write_text(head + line + "\n]}\n")
            with pytest.raises(ExportFileError, match=f"{path}: damaged session line 2"):
                import_file(mgr.import_session, path)
    finally:
        svc.close()


def test_sessions_owned_elsewhere_fail_alone(tmp_path: Path) -> None:
    svc, mgr = _fresh(tmp_path)
    try:
        mgr.open_session(session_id="s-live", title="live")  # published live
        mgr.import_session(
            {"id": "s-other"}, [{"id": "t-taken", "role": "user", "content": "x", "timestamp": 1.7e9}]
        )
        path = _export_file(
            tmp_path / "e.json",
            {"session": {"session_id": "s-live", "title": "from the file"}},
            {"session": {"session_id": "s-thief"}, "turns": [_turn(turn_id="t-taken")]},
            GOOD,
        )
        report = import_file(mgr.import_session, path)
        assert [r["session_id"] for r in report["imported"]] == ["s-good"]
        errors = {f["session_id"]: f["error"] for f in report["failed"]}
        assert errors == {
            "s-live": "session s-live already exists (from published live)",
            "s-thief": "session s-thief: turn t-taken belongs to session s-other",
        }
        replaced = import_file(mgr.import_session, path, replace=True)
        assert {r["session_id"] for r in replaced["imported"]} == {"s-live", "s-good"}
        assert "s-thief" in {f["session_id"] for f in replaced["failed"]}  # --replace never steals turns
    finally:
        svc.close()


def test_cli_import_json_goes_on_after_a_bad_file(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from memviewer.cli import cli

    good = _export_file(tmp_path / "good.json", GOOD)
    bad = _export_file(tmp_path / "bad.json", BAD_RECORDS["huge_ts"][0])
    home = tmp_path / "h"
    res = CliRunner().invoke(
        cli,
        [
            "--home",
            str(home),
            "import",
            "json",
            "--no-index",
            "--json",
            str(bad),
            str(tmp_path / "missing.json"),
            str(good),
        ],
    )
    assert res.exit_code == 1 and "Traceback" not in res.output
    report = json.loads(res.stdout)
    assert [r["session_id"] for r in report["imported"]] == ["s-good"]
    assert [f["path"] for f in report["failed"]] == [str(bad), str(tmp_path / "missing.json")]
    text_run = CliRunner().invoke(cli, ["--home", str(home), "import", "json", "--no-index", str(bad)])
    assert text_run.exit_code == 1 and f"failed: {bad}: session b: turn 0 (b-1): timestamp" in text_run.stderr


def test_an_export_file_that_changes_between_check_and_import_reports_what_was_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memviewer.io.json_import as json_import

    a, mgr_a = _fresh(tmp_path)
    b, mgr_b = _fresh(tmp_path)
    try:
        for n in range(3):
            mgr_a.import_session(
                {"id": f"s-{n}", "title": f"t {n}"},
                [{"id": f"s-{n}-t0", "role": "user", "content": "x", "timestamp": 1e9}],
            )
        path = tmp_path / "export.json"
        path.write_text(_json_export(a), encoding="utf-8")
        real = json_import._records
        calls = {"n": 0}

        def records(p: Path):  # noqa: ANN202 - the second read finds the file cut short
            calls["n"] += 1
            for i, rec in enumerate(real(p)):
                if calls["n"] == 2 and i == 1:
                    raise ExportFileError("truncated after 1 session")
                yield rec

        monkeypatch.setattr(json_import, "_records", records)
        report = import_file(mgr_b.import_session, path)
        assert [r["session_id"] for r in report["imported"]] == ["s-0"]
        ((fail,),) = [report["failed"]]
        assert (
            "changed while it was imported" in fail["error"] and "stays stored (1 session)" in fail["error"]
        )
    finally:
        a.close()
        b.close()
