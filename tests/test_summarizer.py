"""Session summaries: the offline extractive default and the cached LLM path
(against a fake OpenAI-compatible server on 127.0.0.1)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from memviewer.index.summarizer import (
    REFRESH_MIN_TURNS,
    Summarizer,
    SummaryCache,
    extractive,
    needs_refresh,
)
from memviewer.llm import LlmEndpoint

TURNS = [
    {"role": "user", "content": "I need to renew my passport before the trip to Reykjavik. "
                                "What documents do I need?", "timestamp": 1_684_569_600.0},
    {"role": "assistant", "content": "Bring the old passport, a photo and the renewal form DS-82.",
     "timestamp": 1_684_569_660.0},
    {"role": "user", "content": "My appointment at the Boston Passport Agency is on 2023-06-14.",
     "timestamp": 1_684_569_720.0},
]


class FakeLlm:
    """A tiny OpenAI-compatible chat endpoint that counts its calls."""

    def __init__(self, reply: str = "User renews a passport for Reykjavik; appointment 2023-06-14.",
                 status: int = 200) -> None:
        self.calls: list[dict[str, Any]] = []
        self.reply = reply
        self.status = status
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.calls.append(body)
                data = json.dumps({"choices": [{"message": {"role": "assistant",
                                                            "content": fake.reply}}]}).encode()
                self.send_response(fake.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> LlmEndpoint:
        return LlmEndpoint(f"http://127.0.0.1:{self.server.server_address[1]}/v1", "fake-model", 5.0)


@pytest.fixture
def fake_llm() -> Iterator[FakeLlm]:
    fake = FakeLlm()
    fake.thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()


def test_extractive_summary_keeps_requests_names_and_dates() -> None:
    summary, search = extractive(TURNS)
    assert summary.startswith("User: I need to renew my passport before the trip to Reykjavik.")
    assert "Boston Passport Agency" in summary and "2023-06-14" in summary
    assert "Dates: 2023-05-20" in summary
    assert "passport" in summary.lower()
    assert "My appointment at the Boston Passport Agency" in search  # every user turn is searchable
    assert "DS-82" in summary or "ds" in search.lower()


def test_extractive_summary_of_empty_session() -> None:
    assert extractive([], title="untitled") == ("untitled", "untitled")


def test_llm_summary_is_cached_on_disk(fake_llm: FakeLlm, tmp_path: Path) -> None:
    first = Summarizer(fake_llm.endpoint, tmp_path / "summaries")
    result = first.summarize(TURNS)
    assert result.method == "llm:fake-model" and result.summary == fake_llm.reply
    assert len(fake_llm.calls) == 1
    sent = fake_llm.calls[0]
    assert sent["model"] == "fake-model" and "Reykjavik" in sent["messages"][1]["content"]
    again = Summarizer(fake_llm.endpoint, tmp_path / "summaries")  # a new process, same disk cache
    assert again.summarize(TURNS).summary == fake_llm.reply
    assert len(fake_llm.calls) == 1 and again.cache_hits == 1 and again.llm_calls == 0
    files = list((tmp_path / "summaries").rglob("*.json"))
    assert len(files) == 1
    assert files[0].stem == SummaryCache.key("fake-model", sent["messages"][1]["content"])


def test_empty_text_makes_no_call(fake_llm: FakeLlm, tmp_path: Path) -> None:
    summarizer = Summarizer(fake_llm.endpoint, tmp_path / "summaries")
    assert summarizer.llm_summary("") is None and summarizer.llm_summary("  \n ") is None
    result = summarizer.summarize([{"role": "user", "content": "   ", "timestamp": 1.0}])
    assert fake_llm.calls == [] and result.method == "extractive"


def test_llm_failure_falls_back_to_extractive(tmp_path: Path) -> None:
    fake = FakeLlm(status=500)
    fake.thread.start()
    try:
        result = Summarizer(fake.endpoint, tmp_path / "s").summarize(TURNS)
    finally:
        fake.server.shutdown()
        fake.server.server_close()
    assert result.method.startswith("extractive (llm failed")
    assert result.summary == extractive(TURNS)[0]
    assert not list((tmp_path / "s").rglob("*.json"))  # failures are not cached


def test_service_uses_llm_summaries_when_configured(fake_llm: FakeLlm, settings: Any) -> None:
    from memviewer.index.embedder import HashEmbedder
    from memviewer.index.indexer import lance_index_for
    from memviewer.index.lance import SUMMARIES
    from memviewer.service import MemoryService

    s = settings.with_overrides(summary_llm=True, llm_base_url=fake_llm.endpoint.base_url,
                                llm_model="fake-model")
    with MemoryService(s, embedder=HashEmbedder()) as svc:
        svc.import_session({"id": "p1", "scope": "user", "scope_id": "u"},
                           [{"id": f"t{i}", **t} for i, t in enumerate(TURNS)])
        svc.sync_index()
        rows = lance_index_for(svc).rows(SUMMARIES, None, ["summary", "method"])
        assert rows == [{"summary": fake_llm.reply, "method": "llm:fake-model"}]
        assert len(fake_llm.calls) == 1
        svc.indexer().rebuild()  # a rebuild reuses the disk cache
        assert len(fake_llm.calls) == 1


def test_refresh_rule() -> None:
    assert needs_refresh(None, 1)
    assert not needs_refresh(10, 10 + REFRESH_MIN_TURNS - 1)
    assert needs_refresh(10, 10 + REFRESH_MIN_TURNS)
    assert not needs_refresh(100, 120) and needs_refresh(100, 125)
    assert needs_refresh(100, 100, force=True)
