"""``eval realtalk`` / ``eval conversations`` on tiny synthetic files in each accepted shape
(real store and LanceDB, ``HashEmbedder``)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from memviewer.eval.conversations import (
    SYSTEMS,
    Gold,
    Ranked,
    Scores,
    load_conversations,
    markdown_table,
    run,
)
from memviewer.index.embedder import HashEmbedder

FILLER = ["how was your day", "pretty good, busy at work", "same here, lots of meetings", "talk later"]


def conversation(cid: str, a: str, b: str, fact: str, other: str) -> dict:
    sessions = []
    for n in range(1, 5):
        turns = [
            {"id": f"D{n}:{i + 1}", "speaker": (a, b)[i % 2], "text": f"{t} {cid} {n}"}
            for i, t in enumerate(FILLER)
        ]
        if n == 3:
            turns.append({"id": "D3:9", "speaker": a, "text": fact})
            turns.append({"id": "D3:10", "speaker": b, "text": other})
        sessions.append({"id": str(n), "date": f"2024-01-0{n}T10:00:00Z", "turns": turns})
    return {
        "id": cid,
        "speakers": [a, b],
        "sessions": sessions,
        "questions": [
            {"question": f"Which instrument does {a} play?", "evidence": ["D3:9"], "category": "fact"},
            {"question": "What did they talk about?", "evidence": ["D9:9"], "category": "fact"},
        ],
    }


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    data = [
        conversation("c1", "Ann", "Bob", "I play the cello in an orchestra", "nice, I like jazz"),
        conversation("c2", "Cleo", "Dan", "I play the banjo on weekends", "my bike needs new tyres"),
    ]
    path = tmp_path / "conv.json.gz"
    path.write_bytes(gzip.compress(json.dumps(data).encode()))
    return path


def test_run_scores_every_system_per_split_and_category(dataset: Path, tmp_path: Path) -> None:
    report = run(dataset, embedder=HashEmbedder(), cache_dir=tmp_path / "cache")
    meta = report["meta"]
    assert meta["conversations"] == 2 and meta["sessions"] == 8 and meta["turns"] == 2 * (4 * 4 + 2)
    assert meta["skipped_questions"] == 2 and meta["split"] == 1  # "D9:9" names no turn
    assert set(report["systems"]) == set(SYSTEMS)
    for system in SYSTEMS:
        groups = report["systems"][system]
        assert set(groups) == {"all", "fact", "tune", "holdout"}
        assert groups["all"]["n"] == 2 and groups["tune"]["n"] == 1 and groups["holdout"]["n"] == 1
        assert groups["all"]["session_r@5"] == 1.0, system  # each scope has 4 sessions
    # BM25 finds the instrument turn by its words
    assert report["systems"]["bm25"]["all"]["turn_r@10"] == 1.0
    table = markdown_table(report)
    assert "| all | 2 | bm25 | 1.000 | 1.000 | 1.000 | 1.000 |" in table
    again = run(dataset, embedder=HashEmbedder(), cache_dir=tmp_path / "cache", systems=("bm25",))
    assert again["meta"]["embed_cache"]["misses"] == 0 and set(again["systems"]) == {"bm25"}


def test_speaker_names_are_kept_as_the_turns_author(dataset: Path, tmp_path: Path) -> None:
    from memviewer.config import load_settings
    from memviewer.service import MemoryService

    home = tmp_path / "home"
    run(dataset, home=home, embedder=HashEmbedder(), cache_dir=tmp_path / "cache", systems=("bm25",))
    svc = MemoryService(load_settings(env={}, home=str(home)), embedder=HashEmbedder())
    try:
        sessions = svc.sessions(scope="conv", scope_id="c1")["sessions"]
        assert len(sessions) == 4
        turns = svc.session(next(s["session_id"] for s in sessions if s["session_id"].endswith("s3")))
        by_text = {t["content"]: t for t in turns["turns"]}
        fact = by_text["I play the cello in an orchestra"]
        assert fact["role"] == "user" and fact["metadata"]["speaker"] == "Ann"
        assert by_text["nice, I like jazz"]["role"] == "assistant"
        assert by_text["nice, I like jazz"]["metadata"]["speaker"] == "Bob"
    finally:
        svc.close()


def test_scores_follow_the_documented_definitions() -> None:
    s = Scores()
    gold = Gold({"t1", "t2"}, {"s1", "s2"})
    s.add(gold, Ranked(["s9", "s1"], ["x", "x2", "t2", "x3", "x4", "t1"], 1.0))
    out = s.summary()
    assert out["turn_r@5"] == 0.5 and out["turn_r@10"] == 1.0
    assert out["session_r@5"] == 0.5 and out["session_any@5"] == 1.0
    assert out["mrr"] == round(1 / 3, 4) and out["n"] == 1


def test_reads_realtalk_and_locomo_shapes(tmp_path: Path) -> None:
    realtalk = [
        {
            "chat_id": "Chat_1",
            "name": {"speaker_1": "Emi", "speaker_2": "elise"},
            "session_1": [
                {"clean_text": "hi", "speaker": "Emi", "date_time": "29.12.2023, 00:51:12", "dia_id": "D1:1"},
                {
                    "clean_text": "look at my lunch",
                    "speaker": "elise",
                    "date_time": "29.12.2023, 00:52:00",
                    "dia_id": "D1:2",
                    "blip_caption": "a bowl of ramen",
                },
            ],
            "session_1_date_time": "29.12.2023, 00:51:12",
            "qa": [{"question": "What did elise eat?", "evidence": ["D1:2."], "category": 1}],
        }
    ]
    locomo = [
        {
            "sample_id": "conv-26",
            "conversation": {
                "speaker_a": "Caroline",
                "speaker_b": "Melanie",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [{"speaker": "Caroline", "dia_id": "D1:1", "text": "I went to a support group"}],
            },
            "qa": [
                {"question": "What did Caroline attend?", "evidence": ["D1:1"], "category": 4},
                {"question": "adversarial", "evidence": ["D1:1"], "category": 5},
            ],
        }
    ]
    (tmp_path / "rt.json").write_text(json.dumps(realtalk))
    (tmp_path / "lc.json").write_text(json.dumps(locomo))
    (rt,) = load_conversations(tmp_path / "rt.json")
    assert rt.id == "Chat_1" and rt.speakers == ["Emi", "elise"]
    assert rt.sessions[0].turns[1].text == "look at my lunch [shares a bowl of ramen]"
    assert rt.questions[0].evidence == ["D1:2"] and rt.questions[0].category == "fact"
    assert rt.sessions[0].turns[1].ts - rt.sessions[0].turns[0].ts == 48
    (lc,) = load_conversations(tmp_path / "lc.json")
    assert lc.speakers == ["Caroline", "Melanie"] and len(lc.questions) == 1  # category 5 left out
    assert lc.questions[0].category == "single-hop"
    assert lc.sessions[0].turns[0].ts == lc.sessions[0].date + 60


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"x": 1}, "expected a JSON list of conversation objects"),
        ([{"x": 1}], "neither the conversation+QA format"),
        ([{"id": "c", "speakers": "Ann", "sessions": []}], "speakers must be a list of names"),
        (
            [{"id": "c", "speakers": ["A"], "sessions": [{"turns": [{"speaker": "Z", "text": "hi"}]}]}],
            "speaker 'Z' is not one of",
        ),
        (
            [{"id": "c", "speakers": ["A"], "sessions": [{"date": "yesterday", "turns": []}]}],
            "cannot read the time 'yesterday'",
        ),
        (
            [
                {"id": "c", "speakers": ["A"], "sessions": []},
                {"id": "c", "speakers": ["A"], "sessions": []},
            ],
            "conversation id 'c' is used twice",
        ),
        (
            [
                {
                    "id": "c",
                    "speakers": ["A"],
                    "sessions": [{"turns": [{"id": "t", "speaker": "A", "text": "x"}] * 2}],
                }
            ],
            "turn id 't' is used twice",
        ),
    ],
)
def test_malformed_files_are_named(tmp_path: Path, data: object, words: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError) as err:
        load_conversations(path)
    assert str(err.value).startswith(str(path)) and words in str(err.value)


def test_cli_runs_and_reports_a_bad_file(dataset: Path, tmp_path: Path, monkeypatch) -> None:
    from click.testing import CliRunner

    from memviewer.cli import cli

    bad = tmp_path / "bad.json"
    bad.write_text("[1")
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / "h"), "eval", "realtalk", str(bad)])
    assert result.exit_code == 1 and "is not JSON" in result.output
    result = CliRunner().invoke(
        cli, ["--home", str(tmp_path / "h"), "eval", "conversations", "--system", "nope", str(dataset)]
    )
    assert result.exit_code == 1 and "unknown system 'nope'" in result.output
