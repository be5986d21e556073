"""End to end with the real ONNX model: ``memviewer import praisonai`` then
``memviewer recall`` (single and batch) in real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.model, pytest.mark.integration]

ARCHIVED_META = {"source": "praisonai", "tags": ["travel", "docs"], "nested": {"ok": True, "n": 3}}

SESSIONS = {
    "alice-travel": {
        "session_id": "alice-travel",
        "user_id": "alice",
        "agent_name": None,
        "created_at": 1_700_000_000,
        "updated_at": 1_700_000_600,
        "metadata": {},
        "archived_messages": [
            {
                "role": "user",
                "content": "My passport renewal appointment is at the Lisbon consulate on March 3rd at 10am.",
                "timestamp": 1_700_000_000,
                "metadata": ARCHIVED_META,
            },
            {
                "role": "assistant",
                "content": "Noted: Lisbon consulate, March 3rd, 10am.",
                "timestamp": 1_700_000_010,
                "metadata": {},
            },
        ],
        "messages": [
            {
                "role": "system",
                "content": "Summary of 2 earlier messages.",
                "timestamp": 1_700_000_020,
                "metadata": {"compaction": True, "compacted_count": 2},
            },
            {
                "role": "user",
                "content": "Can you suggest a packing list for a rainy week?",
                "timestamp": 1_700_000_030,
                "metadata": {},
            },
            {
                "role": "assistant",
                "content": "Umbrella, waterproof jacket and quick-dry shoes.",
                "timestamp": 1_700_000_040,
                "metadata": {},
            },
        ],
    },
    "alice-cooking": {
        "session_id": "alice-cooking",
        "user_id": "alice",
        "created_at": 1_700_100_000,
        "messages": [
            {
                "role": "user",
                "content": "How long should I proof sourdough overnight in the fridge?",
                "timestamp": 1_700_100_000,
            },
            {
                "role": "assistant",
                "content": "Twelve to sixteen hours works well for a cold proof.",
                "timestamp": 1_700_100_010,
            },
        ],
    },
    "bob-car": {
        "session_id": "bob-car",
        "user_id": "bob",
        "created_at": 1_700_200_000,
        "messages": [
            {
                "role": "user",
                "content": "My passport appointment is at the Porto office next week.",
                "timestamp": 1_700_200_000,
            },
            {"role": "assistant", "content": "Bring two photos.", "timestamp": 1_700_200_010},
        ],
    },
}

QUESTION = "when is my passport appointment at the consulate?"


def run_cli(
    home: Path, *args: str, env_extra: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVIEWER_")}
    env.update({"MEMVIEWER_CONFIG": os.devnull, "MEMVIEWER_SOCKET": str(home / "no-hub.sock")})
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "memviewer.cli", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=240,
    )


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("e2e")
    folder = root / "praisonai"
    folder.mkdir()
    for sid, data in SESSIONS.items():
        (folder / f"{sid}.json").write_text(json.dumps(data))
        (folder / f"{sid}.json.lock").write_text("")
    home = root / "home"
    proc = run_cli(home, "import", "praisonai", str(folder), "--wait", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert len(report["imported"]) == 3 and report["failed"] == []
    return home


def test_import_returns_once_everything_is_embedded_and_summarised(imported: Path) -> None:
    from memviewer.config import load_settings
    from memviewer.index.indexer import index_status
    from memviewer.index.lance import SUMMARIES, TURNS, LanceIndex

    status = index_status(load_settings(env={}, home=str(imported)))
    assert status["ok"] is True, status
    index = LanceIndex(imported / "lance", readonly=True)
    assert index.count(TURNS) == 9 and index.count(SUMMARIES) == 3
    assert index.load_state()["model"] == "all-MiniLM-L6-v2-int8"


def test_recall_finds_archived_turn_with_metadata_verbatim(imported: Path) -> None:
    proc = run_cli(imported, "recall", QUESTION, "--scope", "user", "--scope-id", "alice", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    top = out["results"][0]
    assert "Lisbon consulate" in top["content"] and top["role"] == "user"
    assert top["archived"] is True and top["index"] == 0 and top["metadata"] == ARCHIVED_META
    assert top["session_id"] == "alice-travel"
    assert {r["session_id"] for r in out["results"]} <= {"alice-travel", "alice-cooking"}
    d = out["diagnostics"]
    assert d["stage1"][0]["session_id"] == "alice-travel" and d["escalations"] == []
    assert top["score_breakdown"]["dense"] > 0.3


def test_recall_human_output(imported: Path) -> None:
    proc = run_cli(imported, "recall", QUESTION, "--scope-id", "alice")
    assert proc.returncode == 0, proc.stderr
    assert "Lisbon consulate" in proc.stdout and "archived" in proc.stdout
    assert "stage 1 sessions" in proc.stdout


def test_batch_keeps_order_and_reports_bad_lines(imported: Path) -> None:
    batch = imported.parent / "queries.jsonl"
    batch.write_text(
        "\n".join(
            [
                json.dumps({"query": QUESTION, "scope": "user", "scope_id": "alice", "top_k": 2}),
                "{not json",
                json.dumps({"query": "sourdough proofing time", "scope_id": "alice", "top_k": 1}),
                json.dumps({"query": "passport", "scope_id": "bob", "top_sessions": "lots"}),
                json.dumps({"query": "passport office", "scope_id": "bob", "top_sessions": 1}),
            ]
        )
        + "\n"
    )
    proc = run_cli(imported, "recall", "--batch", str(batch), "--json")
    assert proc.returncode != 0
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert len(lines) == 5
    assert lines[0]["query"] == QUESTION and len(lines[0]["results"]) == 2
    assert lines[1]["line"] == 2 and "invalid JSON" in lines[1]["error"]
    assert lines[2]["results"][0]["session_id"] == "alice-cooking"
    assert lines[3]["line"] == 4 and "top_sessions" in lines[3]["error"]
    assert lines[4]["results"][0]["session_id"] == "bob-car"
    assert "2 batch lines failed" in proc.stderr


def test_batch_answers_undecodable_and_surrogate_lines_and_goes_on(imported: Path) -> None:
    batch = imported.parent / "bytes.jsonl"
    batch.write_bytes(b'{"query": "passport"}\n\xff\xfe\n{"query": "\\ud800 deploy"}\n{"query": "pasta"}\n')
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "memviewer.cli",
            "--home",
            str(imported),
            "recall",
            "--batch",
            str(batch),
            "--json",
        ],
        capture_output=True,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("MEMVIEWER_")},
            "MEMVIEWER_CONFIG": os.devnull,
            "MEMVIEWER_SOCKET": str(imported / "no-hub.sock"),
        },
        timeout=240,
    )
    lines = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    assert proc.returncode == 1 and b"Traceback" not in proc.stderr
    assert [sorted(x)[:2] for x in lines] == [
        ["diagnostics", "query"],
        ["error", "line"],
        ["error", "line"],
        ["diagnostics", "query"],
    ]
    assert lines[1] == {"error": "not valid UTF-8 (byte 0xff at column 1)", "line": 2}
    assert "lone UTF-16 surrogate" in lines[2]["error"] and lines[2]["line"] == 3
    assert lines[3]["query"] == "pasta"
    assert b"2 batch lines failed" in proc.stderr


def test_missing_model_is_a_clear_error(imported: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty-model"
    empty.mkdir()
    proc = run_cli(imported, "recall", QUESTION, "--json", env_extra={"MEMVIEWER_MODEL_DIR": str(empty)})
    assert proc.returncode != 0
    error = json.loads(proc.stdout)["error"]  # --json: the error is a JSON object too
    assert "model.onnx" in error and str(empty) in error
    assert "Traceback" not in proc.stderr


def test_recall_needs_a_query(imported: Path) -> None:
    proc = run_cli(imported, "recall")
    assert proc.returncode != 0 and "QUERY" in proc.stderr


def test_reindex_rebuilds_from_sqlite(imported: Path) -> None:
    import shutil

    shutil.rmtree(imported / "lance" / "session_summaries.lance")  # a damaged index
    proc = run_cli(imported, "reindex", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["indexed_turns"] == report["sql_turns"] == 9
    assert report["summaries"] == 3 and report["lag"] == 0
    after = run_cli(imported, "recall", QUESTION, "--scope-id", "alice", "--json")
    assert json.loads(after.stdout)["results"][0]["archived"] is True


WEATHER_CALL = {
    "id": "call_w",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
}


def test_tool_call_only_turn_shows_its_calls(tmp_path: Path) -> None:
    folder = tmp_path / "praisonai"
    folder.mkdir()
    (folder / "carol-weather.json").write_text(
        json.dumps(
            {
                "session_id": "carol-weather",
                "user_id": "carol",
                "created_at": 1_700_300_000,
                "messages": [
                    {
                        "role": "user",
                        "content": "What is the weather in Oslo today?",
                        "timestamp": 1_700_300_000,
                    },
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [WEATHER_CALL],
                        "timestamp": 1_700_300_001,
                    },
                    {
                        "role": "tool",
                        "content": '{"temp_c": 3}',
                        "tool_call_id": "call_w",
                        "timestamp": 1_700_300_002,
                    },
                    {"role": "assistant", "content": "It is 3 °C in Oslo.", "timestamp": 1_700_300_003},
                ],
            }
        )
    )
    home = tmp_path / "home"
    assert run_cli(home, "import", "praisonai", str(folder)).returncode == 0
    args = ("recall", "weather in Oslo", "--scope-id", "carol", "--chunks-per-session", "10")

    proc = run_cli(home, *args)  # piped: one tab-separated line per result
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    header = rows[0]
    by_index = {r[header.index("idx")]: r for r in rows[1:] if len(r) == len(header)}
    tool_row = by_index["1"]
    assert tool_row[header.index("role")] == "assistant"
    assert tool_row[header.index("snippet")] == "→ get_weather(…)"
    assert by_index["3"][header.index("snippet")] == "It is 3 °C in Oslo."  # text turns unchanged

    out = json.loads(run_cli(home, *args, "--json").stdout)  # the JSON contract is untouched
    (blank,) = [r for r in out["results"] if r["index"] == 1]
    assert blank["content"] == "" and "tool_calls" not in blank


def test_as_of_sets_the_moment_relative_dates_count_from(imported: Path) -> None:
    proc = run_cli(
        imported,
        "recall",
        "what did I plan a week ago?",
        "--scope-id",
        "alice",
        "--as-of",
        "2023-11-21T22:13:20Z",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    window = json.loads(proc.stdout)["diagnostics"]["time_window"]
    assert window["phrase"] == "a week ago"
    assert window["start"] <= "2023-11-14 22:13" <= window["end"]  # the travel session's day
    batch = imported.parent / "dated.jsonl"
    batch.write_text(
        json.dumps({"query": "what did I plan a week ago?", "as_of": 1_700_604_800})
        + "\n"
        + json.dumps({"query": "x a week ago", "as_of": "someday"})
        + "\n"
    )
    proc = run_cli(imported, "recall", "--batch", str(batch), "--json")
    first, second = (json.loads(x) for x in proc.stdout.splitlines())
    assert first["diagnostics"]["time_window"]["phrase"] == "a week ago"
    assert second["line"] == 2 and "as_of" in second["error"]
    bad = run_cli(imported, "recall", "a week ago", "--as-of", "the day before", "--json")
    assert bad.returncode != 0 and "as_of" in json.loads(bad.stdout)["error"]
    assert "Traceback" not in bad.stderr
    bad = run_cli(imported, "recall", "a week ago", "--as-of", "the day before")
    assert bad.returncode != 0 and bad.stderr.startswith("error:") and "as_of" in bad.stderr
