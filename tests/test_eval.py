"""The LongMemEval harness on a tiny synthetic file (HashEmbedder, real store and index)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from memviewer.eval.longmemeval import Gold, Ranked, Scores, load_questions, markdown_table, run
from memviewer.index.embedder import HashEmbedder


def question(qid: str, qtype: str, text: str, answer_sid: str, answer_turn: str) -> dict:
    filler = [
        [
            {"role": "user", "content": f"filler chat {qid} {i} about the weather and news"},
            {"role": "assistant", "content": f"sure, filler reply {i}"},
        ]
        for i in range(6)
    ]
    sessions = [
        *filler[:3],
        [
            {"role": "user", "content": "Let me tell you something.", "has_answer": False},
            {"role": "user", "content": answer_turn, "has_answer": True},
            {"role": "assistant", "content": "Thanks for sharing."},
        ],
        *filler[3:],
    ]
    ids = [f"f{i}" for i in range(3)] + [answer_sid] + [f"f{i}" for i in range(3, 6)]
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": text,
        "answer": "x",
        "question_date": "2023/05/30 (Tue) 10:18",
        "answer_session_ids": [answer_sid],
        "haystack_session_ids": ids,
        "haystack_dates": [f"2023/05/{20 + i} (Sat) 07:47" for i in range(len(ids))],
        "haystack_sessions": sessions,
    }


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    data = [
        question(
            "q1",
            "single-session-user",
            "Which gym did I join in Oslo?",
            "ans1",
            "I joined the Frogner gym in Oslo last week.",
        ),
        question(
            "q2",
            "multi-session",
            "What colour is my new bicycle?",
            "ans2",
            "My new bicycle is teal with yellow tyres.",
        ),
    ]
    path = tmp_path / "mini.json.gz"
    path.write_bytes(gzip.compress(json.dumps(data).encode()))
    return path


def test_run_scores_every_system(dataset: Path, tmp_path: Path) -> None:
    report = run(dataset, embedder=HashEmbedder(), cache_dir=tmp_path / "cache", split=None)
    assert report["meta"]["questions"] == 2 and report["meta"]["turns"] == 2 * (6 * 2 + 3)
    for system in ("hierarchical", "flat", "bm25", "dense"):
        overall = report["systems"][system]["all"]
        assert overall["n"] == 2 and overall["turn_recall@10"] == 1.0
        assert overall["session_any@5"] == 1.0 and overall["session_all@5"] == 1.0
    assert set(report["systems"]["hierarchical"]) == {"all", "single-session-user", "multi-session"}
    table = markdown_table(report)
    assert "| all | 2 | hierarchical | 1.000 | 1.000 | 1.000 |" in table
    # the embedding cache was written and is used by the next run
    again = run(dataset, embedder=HashEmbedder(), cache_dir=tmp_path / "cache", split=None)
    assert again["meta"]["embed_cache"]["misses"] == 0 and again["meta"]["embed_cache"]["hits"] > 0


def test_evidence_stamped_after_the_question_is_still_memory(tmp_path: Path) -> None:
    """LongMemEval stamps some evidence later on the question's own day; the benchmark's
    memory is the whole haystack, so the evaluator does not hide it (``hide_later``)."""
    q = question(
        "q1",
        "temporal-reasoning",
        "Which gym did I join in Oslo?",
        "ans1",
        "I joined the Frogner gym in Oslo.",
    )
    q["haystack_dates"][3] = "2023/05/30 (Tue) 19:40"  # the answer, 9 hours after the question
    path = tmp_path / "late.json"
    path.write_text(json.dumps([q]))
    report = run(path, embedder=HashEmbedder(), cache_dir=tmp_path / "cache", split=None)
    for system in ("hierarchical", "flat"):
        assert report["systems"][system]["all"]["turn_recall@10"] == 1.0, system


def test_scores_follow_the_documented_definitions() -> None:
    s = Scores()
    s.add(Gold({"a", "b"}, {"t1", "t2", "t3", "t4"}), Ranked(["a", "x"], ["t1", "t9", "t3"], 1.0))
    s.add(Gold({"c"}, set()), Ranked(["c"], [], 3.0))
    out = s.summary()
    assert out["session_any@5"] == 1.0 and out["session_all@5"] == 0.5
    assert out["turn_recall@10"] == 0.5 and out["n_turn_gold"] == 1 and out["p50_ms"] == 2.0


def test_bad_files_are_rejected_clearly(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not LongMemEval JSON"):
        load_questions(bad)
    bad.write_text(json.dumps([{"question_id": "q"}]))
    with pytest.raises(ValueError, match="lacks question, haystack_sessions"):
        load_questions(bad)


def test_cli_reports_a_bad_file(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from memviewer.cli import cli

    bad = tmp_path / "bad.json"
    bad.write_text("[]x")
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / "h"), "eval", "longmemeval", str(bad)])
    assert result.exit_code != 0 and "not LongMemEval JSON" in result.output


def _ok(**over) -> dict:
    return {
        "question_id": "q1",
        "question": "what?",
        "answer_session_ids": ["h1"],
        "haystack_session_ids": ["h1"],
        "haystack_sessions": [[{"role": "user", "content": "hi"}]],
        **over,
    }


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (
            [_ok(haystack_sessions=[[{"role": "user"}]])],
            "haystack session h1, turn 0: content must be a string",
        ),
        ([_ok(haystack_sessions=[["hello"]])], "turn 0 must be an object, not a string"),
        ([_ok(haystack_sessions=["abc"])], "haystack session h1 must be a list of turns"),
        ([_ok(haystack_sessions="abc", haystack_session_ids="abc")], "haystack_session_ids must be a list"),
        ([_ok(haystack_session_ids=["h1", "h2"])], "2 haystack_session_ids but 1 haystack_sessions"),
        ([_ok(haystack_dates=[12345])], "haystack_dates must be a list of date strings"),
        ([_ok(question_date=5)], "question_date must be a string"),
        ([_ok(haystack_sessions=[[{"role": {"x": 1}, "content": "hi"}]])], "role must be one of"),
        ([_ok(question_id=None)], "question #0: question_id must be a string, not null"),
        ([_ok(), _ok()], "question #1 (q1): question_id also used by question #0"),
    ],
)
def test_malformed_questions_are_named_with_the_file(tmp_path: Path, data: list, words: str) -> None:
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError) as err:
        load_questions(path)
    assert str(err.value).startswith(str(path)) and words in str(err.value)


def test_damaged_gzip_and_non_utf8_files_name_the_file(tmp_path: Path) -> None:
    gz = tmp_path / "cut.json.gz"
    gz.write_bytes(gzip.compress(json.dumps([_ok()]).encode())[:-12])
    with pytest.raises(ValueError, match=f"{gz}: damaged gzip file"):
        load_questions(gz)
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'[{"question": "caf\xe9"}]')
    with pytest.raises(ValueError, match=f"{latin} is not LongMemEval JSON: not valid UTF-8"):
        load_questions(latin)


def test_cli_reports_a_truncated_gzip_instead_of_aborted(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from memviewer.cli import cli

    gz = tmp_path / "cut.json.gz"
    gz.write_bytes(gzip.compress(json.dumps([_ok()]).encode())[:-12])
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / "h"), "eval", "longmemeval", str(gz)])
    assert result.exit_code == 1 and "damaged gzip file" in result.output and "Aborted" not in result.output


def test_keep_home_refuses_a_real_memviewer_home(dataset: Path, tmp_path: Path, service) -> None:
    service.open_session(session_id="s-mine", title="my real memory")
    home = service.settings.home_path
    with pytest.raises(ValueError, match="holding 1 session not from an evaluation"):
        run(dataset, home=home, embedder=HashEmbedder(), cache_dir=tmp_path / "cache")
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="not empty and holds no memviewer store"):
        run(dataset, home=tmp_path / "project", embedder=HashEmbedder(), cache_dir=tmp_path / "cache")
    assert not (tmp_path / "project" / "memviewer.db").exists()


def test_keep_home_reuses_an_eval_home_and_a_bad_cache_dir_fails_first(dataset: Path, tmp_path: Path) -> None:
    home = tmp_path / "eval-home"
    kw = {"embedder": HashEmbedder(), "cache_dir": tmp_path / "cache", "split": None}
    run(dataset, home=home, **kw)
    assert run(dataset, home=home, **kw)["meta"]["questions"] == 2  # its own home: accepted again
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match="cannot use .* as the embedding cache folder"):
        run(dataset, embedder=HashEmbedder(), cache_dir=tmp_path / "afile" / "sub")
