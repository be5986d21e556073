"""Recall rows carry their turn's tool calls when a front end asks (``with_tool_calls``),
from the rows recall already read, so no display reads them again; the JSON contract's
rows (the default) stay without them. In process with the hash embedder, and through a
real hub process with the real model (marked)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_runs import run_cli

from memviewer.errors import MemviewerError
from memviewer.recall.lagging import INDEX_LAGGING
from memviewer.recall_log import RecordAs

WEATHER = {
    "id": "c1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
}


def _weather_session(service: Any) -> None:
    service.open_session(session_id="s-tools", agent="agent", scope="user", scope_id="u1")
    ep = service.start_episode("s-tools", "Check the weather in Oslo for the ferry trip")
    service.add_turn(ep["episode_id"], "assistant", "", tool_calls=[WEATHER])
    service.add_turn(ep["episode_id"], "assistant", "Oslo: rain, 8 degrees; the ferry runs.")
    service.sync_index()


def _recall(service: Any, **kw: Any) -> dict[str, Any]:
    return service.recall(
        "Oslo ferry weather", scope="user", scope_id="u1", chunks_per_session=10, mode="flat", **kw
    )


def test_rows_carry_their_tool_calls_only_when_asked(service: Any) -> None:
    _weather_session(service)
    shown = {r["index"]: r for r in _recall(service, with_tool_calls=True)["results"]}
    assert shown[1]["content"] == "" and shown[1]["tool_calls"] == [WEATHER]
    assert "tool_calls" not in shown[2]  # a turn without tool calls gets no key
    assert "tool_calls" not in shown[0]
    contract = _recall(service)["results"]
    assert {r["index"] for r in contract} == set(shown)
    assert all("tool_calls" not in r for r in contract)


def test_a_bad_with_tool_calls_is_refused(service: Any) -> None:
    _weather_session(service)
    with pytest.raises(MemviewerError) as err:
        _recall(service, with_tool_calls="yes")
    assert err.value.code == "invalid_argument" and "with_tool_calls" in err.value.message


def test_the_option_is_not_a_logged_recall_parameter(service: Any) -> None:
    _weather_session(service)
    _recall(service, with_tool_calls=True, record=RecordAs("cli"))
    (entry,) = service.recalls()["recalls"]
    assert entry["params"]["mode"] == "flat"  # the recall's own parameters are logged
    assert "with_tool_calls" not in entry["params"]


def test_keyword_rows_of_a_lagging_index_carry_them_too(service: Any) -> None:
    _weather_session(service)
    service.import_session(  # stored, not embedded: recall adds it from keyword search
        {"id": "s-new", "title": "s-new", "started_at": 1_700_000_000.0, "scope": "user", "scope_id": "u1"},
        [
            {
                "id": "s-new-t0",
                "role": "assistant",
                "content": "zanzibar rollout: checking the forecast",
                "tool_calls": [WEATHER],
                "timestamp": 1_700_000_000.0,
            }
        ],
    )
    out = service.recall("zanzibar rollout", with_tool_calls=True)
    assert INDEX_LAGGING in out["diagnostics"]["escalations"]
    (extra,) = [r for r in out["results"] if "keyword_only" in r["score_breakdown"]]
    assert extra["turn_id"] == "s-new-t0" and extra["tool_calls"] == [WEATHER]
    plain = service.recall("zanzibar rollout")
    assert all("tool_calls" not in r for r in plain["results"])


FOLDER_FILE = {
    "session_id": "carol-weather",
    "user_id": "carol",
    "created_at": 1_700_300_000,
    "messages": [
        {"role": "user", "content": "What is the weather in Oslo today?", "timestamp": 1_700_300_000},
        {"role": "assistant", "content": None, "tool_calls": [WEATHER], "timestamp": 1_700_300_001},
        {"role": "tool", "content": '{"temp_c": 3}', "tool_call_id": "c1", "timestamp": 1_700_300_002},
        {"role": "assistant", "content": "It is 3 °C in Oslo.", "timestamp": 1_700_300_003},
    ],
}


def _cli(home: Path, socket: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(home, *args, socket=socket)


@pytest.mark.integration
@pytest.mark.model
def test_the_cli_shows_tool_calls_of_a_recall_answered_by_the_hub(tmp_path: Path, short_tmp: Path) -> None:
    from memviewer.wire.testing import HubProcess

    folder = tmp_path / "praisonai"
    folder.mkdir()
    (folder / "carol-weather.json").write_text(json.dumps(FOLDER_FILE), encoding="utf-8")
    home = tmp_path / "home"
    imported = _cli(home, short_tmp / "nohub.sock", "import", "praisonai", str(folder), "--wait")
    assert imported.returncode == 0, imported.stderr
    args = ("recall", "weather in Oslo", "--scope-id", "carol", "--chunks-per-session", "10")
    sock = short_tmp / "hub.sock"
    with HubProcess(home, sock, args=("--no-index",)):
        human = _cli(home, sock, *args)  # piped: one tab-separated line per result
        as_json = _cli(home, sock, *args, "--json")
    assert human.returncode == 0, human.stderr
    rows = [line.split("\t") for line in human.stdout.splitlines()]
    header = rows[0]
    by_index = {r[header.index("idx")]: r for r in rows[1:] if len(r) == len(header)}
    assert by_index["1"][header.index("snippet")] == "→ get_weather(…)"
    assert by_index["3"][header.index("snippet")] == "It is 3 °C in Oslo."
    out = json.loads(as_json.stdout)  # the hub's JSON is the contract's: no tool calls
    (blank,) = [r for r in out["results"] if r["index"] == 1]
    assert blank["content"] == "" and "tool_calls" not in blank
