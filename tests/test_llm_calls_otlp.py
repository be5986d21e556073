"""LLM calls end to end: real clients (the OpenTelemetry SDK's OTLP/HTTP exporter, a
pydantic-ai agent run offline with its TestModel, the stdlib publisher) into a real hub
process, read back with the real CLI (``memviewer calls``)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_sources_otlp import _provider, session_for, start_otlp_hub, wait_for

from memviewer.wire.remote import RemoteService

pytestmark = pytest.mark.integration


@pytest.fixture
def hub(
    tmp_path: Path, short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, RemoteService]]:
    """A hub process with the OTLP receiver (test_sources_otlp's), home ``tmp_path/home``."""
    proc, remote, endpoint = start_otlp_hub(tmp_path / "home", short_tmp / "hub.sock", monkeypatch)
    try:
        yield endpoint, remote
    finally:
        remote.close()
        proc.stop()


def cli(home: Path, *args: str) -> Any:
    out = subprocess.run(
        [str(Path(sys.executable).parent / "memviewer"), "--home", str(home), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _calls(home: Path, sid: str, n: int) -> list[dict[str, Any]]:
    def ready() -> list[dict[str, Any]] | None:
        page = cli(home, "calls", "--session", sid)
        return page["calls"] if len(page["calls"]) >= n else None

    return wait_for(ready, timeout=30, what=f"{n} LLM calls")


def _text(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


DOCS = [
    "The billing provider is Adyen, chosen in March for card payments.",
    "Invoices are generated on the third working day of each month.",
    "Refunds above 500 EUR need approval from the finance lead.",
]


def test_retriever_then_chat_two_of_three_documents_in_the_prompt(hub, tmp_path: Path) -> None:
    endpoint, remote = hub
    provider, _ = _provider(endpoint)
    tracer = provider.get_tracer("rag")
    conv = "rag-1"
    question = "Who handles our card billing, and when are invoices made?"
    with tracer.start_as_current_span("agent run") as run:
        run.set_attribute("openinference.span.kind", "AGENT")
        run.set_attribute("session.id", conv)
        with tracer.start_as_current_span("retrieve") as r:  # OpenInference-style retriever
            r.set_attribute("openinference.span.kind", "RETRIEVER")
            r.set_attribute("session.id", conv)
            r.set_attribute("input.value", question)
            for i, doc in enumerate(DOCS):
                r.set_attribute(f"retrieval.documents.{i}.document.id", f"doc-{i}")
                r.set_attribute(f"retrieval.documents.{i}.document.content", doc)
                r.set_attribute(f"retrieval.documents.{i}.document.score", 0.9 - i * 0.1)
        system = "You answer billing questions.\nContext:\n" + "\n".join(DOCS[:2])  # the third is cut
        with tracer.start_as_current_span("chat gpt-test") as chat:
            chat.set_attribute("gen_ai.operation.name", "chat")
            chat.set_attribute("session.id", conv)
            chat.set_attribute("gen_ai.request.model", "gpt-test")
            chat.set_attribute("gen_ai.usage.input_tokens", 88)
            chat.set_attribute("gen_ai.usage.output_tokens", 12)
            chat.set_attribute("memviewer.context_window", 8192)
            chat.set_attribute(
                "gen_ai.input.messages", json.dumps([_text("system", system), _text("user", question)])
            )
            chat.set_attribute("gen_ai.output.messages", json.dumps([_text("assistant", "Adyen; on day 3.")]))
    provider.force_flush()
    home = tmp_path / "home"  # the fixture's hub serves it
    sid = session_for(conv)
    (call,) = _calls(home, sid, 1)
    assert call["model"] == "gpt-test" and call["usage"] == {"input_tokens": 88, "output_tokens": 12}
    assert len(call["recall_ids"]) == 1 and call["latency_ms"] >= 0
    shown = cli(home, "calls", "show", call["call_id"])
    a = shown["anatomy"]
    assert [m["kind"] for m in a["messages"]] == ["system_prompt", "new_user_message"]
    by_doc = {r["doc_id"]: r for r in a["recalled"]}
    assert {d: (r["in_prompt"], r["matched_by"]) for d, r in by_doc.items()} == {
        "doc-0": (True, "text"),
        "doc-1": (True, "text"),
        "doc-2": (False, "text"),
    }
    assert a["counts"]["not_in_prompt"] == 1
    parts = {p["kind"]: p for p in a["parts"]}
    assert parts["recalled_memories"]["tokens"] == by_doc["doc-0"]["tokens"] + by_doc["doc-1"]["tokens"]
    assert parts["system_prompt"]["tokens"] > 0 and parts["new_user_message"]["tokens"] > 0
    assert a["context_window"] == 8192 and a["reported_input_tokens"] == 88
    assert a["rules"]["in_prompt_by_text"].startswith("text:")
    provider.shutdown()


def test_sdk_chat_spans_and_a_call_without_conversation_id(hub, tmp_path: Path) -> None:
    endpoint, remote = hub
    provider, _ = _provider(endpoint)
    tracer = provider.get_tracer("sdk")
    history = [_text("system", "You are terse.")]
    for i in range(3):  # three calls, each re-sending the history plus one exchange
        history.append(_text("user", f"question {i}"))
        with tracer.start_as_current_span("chat m") as chat:
            chat.set_attribute("gen_ai.operation.name", "chat")
            chat.set_attribute("gen_ai.conversation.id", "sdk-1")
            chat.set_attribute("gen_ai.input.messages", json.dumps(history))
            chat.set_attribute("gen_ai.output.messages", json.dumps([_text("assistant", f"answer {i}")]))
        history.append(_text("assistant", f"answer {i}"))
    with tracer.start_as_current_span("chat m") as chat:  # no conversation id, input not JSON
        chat.set_attribute("gen_ai.operation.name", "chat")
        chat.set_attribute("gen_ai.input.messages", "[{broken")
    provider.force_flush()
    home = tmp_path / "home"  # the fixture's hub serves it
    calls = _calls(home, session_for("sdk-1"), 3)
    shown = cli(home, "calls", "show", calls[2]["call_id"])
    assert [m["kind"] for m in shown["anatomy"]["messages"]] == [
        "system_prompt",
        "active_turns",
        "active_turns",
        "active_turns",
        "active_turns",
        "new_user_message",
    ]
    # the earlier exchanges are stored turns of the session, matched by text
    assert all(m["turn_id"] for m in shown["anatomy"]["messages"][1:])
    d = shown["diff"]
    assert d["previous_call_id"] == calls[1]["call_id"] and d["kept"] == 4
    assert [m["preview"] for m in d["entered"]] == ["answer 1", "question 2"] and d["left"] == []

    page = wait_for(lambda: (p := cli(home, "calls")) and p["total"] >= 4 and p, what="the broken call")
    assert page["problems"] == {"without_conversation_id": 1, "input_not_json": 1}
    broken = next(c for c in page["calls"] if c["problems"])
    raw = cli(home, "calls", "show", broken["call_id"])
    assert raw["call"]["raw_input"] == "[{broken" and raw["anatomy"]["counts"]["unattributed"] == 1
    provider.shutdown()


def test_pydantic_ai_test_model_calls_have_their_anatomy(hub, tmp_path: Path) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.test import TestModel

    endpoint, remote = hub
    provider, _ = _provider(endpoint, "weather-service")
    agent = Agent(
        TestModel(),
        name="weather-agent",
        system_prompt="Answer with the tool's words.",
        capabilities=[Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))],
    )

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return f"sunny in {city}"

    agent.run_sync("What is the weather in Paris?")
    provider.force_flush()
    home = tmp_path / "home"  # the fixture's hub serves it
    sessions = wait_for(
        lambda: [s for s in remote.sessions()["sessions"] if s["agent"] == "weather-agent"],
        what="the session",
    )
    calls = _calls(home, sessions[0]["session_id"], 2)
    assert [c["model"] for c in calls] == ["test", "test"]
    assert all(c["usage"]["input_tokens"] for c in calls)  # what pydantic-ai reported
    second = cli(home, "calls", "show", calls[1]["call_id"])
    kinds = [m["kind"] for m in second["anatomy"]["messages"]]
    assert kinds == ["system_prompt", "new_user_message", "active_turns", "tool_results"]
    assert second["anatomy"]["messages"][1]["turn_id"]  # the question is the session's first turn
    entered = [m["kind"] for m in second["diff"]["entered"]]
    assert entered == ["active_turns", "tool_results"]  # the tool call and its result entered
    assert second["anatomy"]["tokenizer"]["model_own"] is False
    provider.shutdown()


def test_publisher_record_llm_call_through_the_hub(hub, tmp_path: Path, short_tmp: Path) -> None:
    from memviewer.client import Publisher

    home = tmp_path / "home"  # the fixture's hub serves it
    with Publisher(short_tmp / "hub.sock", home=home) as pub:
        sid = pub.open_session(agent="embedded")
        eid = pub.start_episode(sid, "remind me of the vendor")
        rid = pub.record_recall("vendor", [{"text": DOCS[0], "id": "doc-0"}], session_id=sid, episode_id=eid)
        cid = pub.record_llm_call(
            [
                {"role": "system", "content": "Memory: " + DOCS[0]},
                {"role": "user", "content": "remind me of the vendor"},
            ],
            [{"role": "assistant", "content": "Adyen."}],
            session_id=sid,
            episode_id=eid,
            model="local-7b",
            input_tokens=40,
            output_tokens=3,
            latency_ms=120.5,
            recall_ids=[rid],
            in_prompt=["doc-0"],
            context_window=4096,
        )
        assert pub.flush(timeout=20)
    shown = cli(home, "calls", "show", cid)
    assert shown["call"]["session_id"] == sid and shown["call"]["latency_ms"] == 120.5
    (item,) = shown["anatomy"]["recalled"]
    assert (item["in_prompt"], item["matched_by"], item["doc_id"]) == (True, "id", "doc-0")
    assert shown["anatomy"]["recalls_followed"] == [rid]
