"""LLM calls as records (the ``record_llm_call`` op, content-addressed messages) and their
context anatomy, on a real store through ``MemoryService``."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from memviewer.errors import MemviewerError
from memviewer.store import llm_calls as rows

T0 = time.time() - 1000  # the recall log keeps 30 days: times near now


def _msg(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": text}


def _session(service: Any) -> tuple[str, str]:
    sid = service.open_session(agent="a", session_id="s-calls")["session_id"]
    ep = service.start_episode(sid, "what did we pick for billing?", episode_id="e-1", turn_id="t-u1")
    service.add_turn(ep["episode_id"], "assistant", "Let me check my notes.", turn_id="t-a1")
    return sid, ep["episode_id"]


def _call(service: Any, **args: Any) -> dict[str, Any]:
    (res,) = service.apply_batch([{"op": "record_llm_call", **args}])
    return res


def test_consecutive_calls_store_their_shared_prefix_once(service) -> None:
    sid, ep = _session(service)
    history = [_msg("system", "You are the billing agent.")] + [
        _msg("user", f"message {i}") for i in range(19)
    ]
    _call(
        service, call_id="c-1", session_id=sid, input=history, output=[_msg("assistant", "ok")], ts=T0 + 10.0
    )
    _call(service, call_id="c-2", session_id=sid, input=history + [_msg("user", "one more")], ts=T0 + 11.0)
    with service.store.read() as conn:
        counts = rows.counts(conn)
    assert counts["calls"] == 2
    assert counts["messages"] == 20 + 1 + 1  # the 20 shared ones once, the answer, the new one
    # a replay is a no-op
    assert _call(service, call_id="c-1", session_id=sid, input=[], ts=T0 + 12.0) == {"ok": {"call_id": "c-1"}}
    # in order with the turns: each call names the last turn stored before it was sent
    listed = service.llm_calls(session_id=sid)["calls"]
    assert [c["call_id"] for c in listed] == ["c-1", "c-2"]
    assert [c["after_index"] for c in listed] == [None, None]  # T0 is before the turns
    _call(service, call_id="c-3", session_id=sid, input=history, ts=time.time() + 5)
    assert service.llm_calls(session_id=sid)["calls"][-1]["after_index"] == 1
    shown = service.llm_call("c-2")
    assert shown["call"]["input"][-1] == _msg("user", "one more")
    assert shown["diff"]["previous_call_id"] == "c-1"
    assert [m["preview"] for m in shown["diff"]["entered"]] == ["one more"]
    assert shown["diff"]["left"] == [] and shown["diff"]["kept"] == 20


def test_bad_input_is_kept_and_counted(service) -> None:
    assert "ok" in _call(service, call_id="c-raw", input="{not json", output="plain words", ts=T0 + 5.0)
    page = service.llm_calls()
    assert page["total"] == 1
    assert page["problems"] == {"without_conversation_id": 1, "input_not_json": 1, "output_not_json": 1}
    shown = service.llm_call("c-raw")
    assert shown["call"]["raw_input"] == "{not json" and shown["call"]["raw_output"] == "plain words"
    anat = shown["anatomy"]
    assert anat["counts"]["unattributed"] == 1
    assert anat["messages"][0]["reason"].startswith("the input is not a JSON list")
    assert anat["parts"][-1]["kind"] == "unattributed" and anat["parts"][-1]["tokens"] > 0
    # a wrong type for a field no row can hold is refused, naming the field
    res = _call(service, call_id="c-bad", input=[], usage={"input_tokens": "many"})
    assert res["error"]["code"] == "invalid_argument" and "usage.input_tokens" in res["error"]["message"]
    with pytest.raises(MemviewerError):
        service.llm_call("c-nope")


def test_anatomy_parts_recalled_items_and_compacted_away(service) -> None:
    sid, ep = _session(service)
    # an archived turn of another session that recall finds, and one that is in the prompt
    other = service.open_session(agent="a", session_id="s-old")["session_id"]
    old = service.start_episode(other, "billing vendor?", episode_id="e-old", turn_id="t-o1")
    service.add_turn(
        old["episode_id"], "assistant", "We chose Adyen for card billing in March.", turn_id="t-o2"
    )
    service.add_turn(old["episode_id"], "assistant", "The invoice run happens on the 3rd.", turn_id="t-o3")
    with service.store.write() as tx:
        from memviewer.store import repos

        repos.update_turn(tx.conn, "t-o3", archived=True)
    service.apply_batch(
        [
            {
                "op": "record_recall",
                "recall_id": "r-1",
                "query": "billing vendor",
                "session_id": sid,
                "results": [
                    {"turn_id": "t-o2", "score": 0.9},
                    {"turn_id": "t-o3", "score": 0.5},
                    {"text": "ok", "score": 0.1},
                ],
                "ts": T0 + 9.0,
            }
        ]
    )
    prompt = [
        _msg("system", "You are the billing agent.\nMemories:\nWe chose Adyen for card billing in March."),
        _msg("user", "what did we pick for billing?"),
        _msg("assistant", "Let me check my notes."),
        {"role": "tool", "content": "lookup: 3 invoices", "tool_call_id": "x"},
        _msg("user", "and which vendor again?"),
        {"role": "critic", "content": "be brief"},
    ]
    _call(
        service, call_id="c-a", session_id=sid, episode_id=ep, input=prompt, ts=T0 + 10.0, context_window=1000
    )
    anat = service.llm_call("c-a")["anatomy"]
    kinds = [m["kind"] for m in anat["messages"]]
    assert kinds == [
        "system_prompt",
        "active_turns",
        "active_turns",
        "tool_results",
        "new_user_message",
        "unattributed",
    ]
    assert anat["messages"][1]["turn_id"] == "t-u1" and anat["messages"][2]["turn_id"] == "t-a1"
    assert anat["messages"][5]["reason"] == "unknown role 'critic'"
    parts = {p["kind"]: p for p in anat["parts"]}
    assert anat["recalls_followed"] == ["r-1"], anat
    assert parts["recalled_memories"]["tokens"] > 0, anat
    assert (
        parts["system_prompt"]["tokens"]
        == anat["messages"][0]["tokens"] - anat["messages"][0]["recalled_tokens"]
    )
    assert sum(p["tokens"] for p in anat["parts"]) == anat["input_tokens"]
    assert parts["active_turns"]["share_of_window"] == round(parts["active_turns"]["tokens"] / 1000, 4)
    got = {(r["turn_id"], r["in_prompt"], r["matched_by"]) for r in anat["recalled"]}
    assert got == {("t-o2", True, "text"), ("t-o3", False, "text"), (None, None, None)}
    assert [c["turn_id"] for c in anat["compacted_away"]] == ["t-o3"]
    assert anat["recalls_followed"] == ["r-1"]
    assert anat["tokenizer"]["model_own"] is False and "WordPiece" in anat["tokenizer"]["name"]

    # the agent says which ids it put in the prompt: matching is by id, not text
    _call(
        service,
        call_id="c-b",
        session_id=sid,
        input=prompt,
        recall_ids=["r-1"],
        in_prompt=["t-o3"],
        ts=T0 + 11.0,
    )
    anat = service.llm_call("c-b")["anatomy"]
    got = {(r["turn_id"], r["in_prompt"], r["matched_by"]) for r in anat["recalled"]}
    assert got == {("t-o2", False, "id"), ("t-o3", True, "id"), (None, False, "id")}
    assert anat["compacted_away"] == []


def test_deleting_a_session_deletes_its_calls_and_their_messages(service) -> None:
    sid, _ = _session(service)
    shared = [_msg("system", "shared prompt")]
    _call(service, call_id="c-1", session_id=sid, input=shared + [_msg("user", "mine")], ts=T0 + 1.0)
    _call(service, call_id="c-2", session_id="s-other", input=shared, ts=T0 + 2.0)
    service.delete_session(sid)
    with service.store.read() as conn:
        assert rows.get(conn, "c-1") is None
        left = rows.messages(
            conn, [rows.message_hash(rows.canonical(m)) for m in shared + [_msg("user", "mine")]]
        )
    assert list(left.values()) == shared  # the other session's call keeps the shared message


def test_otel_parts_shape_is_read(service) -> None:
    prompt = [
        {"role": "system", "parts": [{"type": "text", "content": "Be helpful."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "1", "name": "w", "arguments": {"c": "P"}}],
        },
        {"role": "user", "parts": [{"type": "tool_call_response", "id": "1", "response": "sunny"}]},
    ]
    _call(service, call_id="c-o", session_id="s-x", input=json.dumps(prompt), ts=T0 + 1.0)
    kinds = [m["kind"] for m in service.llm_call("c-o")["anatomy"]["messages"]]
    assert kinds == ["system_prompt", "new_user_message", "active_turns", "tool_results"]


def _export(service: Any, path: Any, redact: str | None = None) -> dict[str, Any]:
    service.export(None, "json", str(path), redact=redact)
    return json.loads(path.read_text())


def test_calls_are_exported_imported_and_redacted_with_their_session(service, settings, tmp_path) -> None:
    from memviewer.index.embedder import HashEmbedder
    from memviewer.io.json_import import import_file
    from memviewer.service import MemoryService

    sid, ep = _session(service)
    secret = "mail me at alice@example.com"
    prompt = [_msg("system", "You are the billing agent."), _msg("user", secret)]
    _call(
        service,
        call_id="c-1",
        session_id=sid,
        episode_id=ep,
        input=prompt,
        output=[_msg("assistant", "ok")],
        usage={"input_tokens": 9},
        model="m",
        ts=T0 + 1.0,
    )
    _call(service, call_id="c-2", session_id=sid, input="not json at all", ts=T0 + 2.0)
    doc = _export(service, tmp_path / "out.json")
    (record,) = doc["sessions"]
    assert [c["call_id"] for c in record["llm_calls"]] == ["c-1", "c-2"]
    assert record["llm_calls"][0]["input"] == prompt and record["llm_calls"][0]["usage"] == {
        "input_tokens": 9
    }
    assert record["llm_calls"][1]["raw_input"] == "not json at all"

    red = _export(service, tmp_path / "red.json", redact="standard")
    text = json.dumps(red["sessions"][0]["llm_calls"])
    assert "alice@example.com" not in text and "[REDACTED:email" in text

    other = load_settings_copy(settings, tmp_path / "home2")
    with MemoryService(other, embedder=HashEmbedder()) as svc2:
        report = import_file(svc2.import_session, tmp_path / "out.json", record_calls=svc2.import_llm_calls)
        assert not report["failed"]
        again = svc2.llm_call("c-1")
        assert again["call"]["input"] == prompt and again["call"]["episode_id"] == ep
        assert svc2.llm_calls()["problems"] == {"input_not_json": 1}  # flagged again, kept as received
        assert svc2.llm_call("c-2")["call"]["raw_input"] == "not json at all"
        import_file(svc2.import_session, tmp_path / "out.json", record_calls=svc2.import_llm_calls)
        assert svc2.llm_calls()["total"] == 2  # idempotent


def load_settings_copy(settings: Any, home: Any) -> Any:
    from memviewer.config import load_settings

    return load_settings(
        home / "no-config.toml", env={}, home=str(home), socket=str(settings.socket_path) + "2"
    )
