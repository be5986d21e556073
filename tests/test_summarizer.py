"""Session summaries: the offline extractive default and the cached LLM path
(against a fake OpenAI-compatible server on 127.0.0.1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_llm import (
    FakeLlm,
    completion,
)

from memviewer.index.summarizer import (
    REFRESH_MIN_TURNS,
    Summarizer,
    SummaryCache,
    extractive,
    informative_sentence,
    needs_refresh,
    sentences,
)
from memviewer.llm import LlmEndpoint

TURNS = [
    {
        "role": "user",
        "content": "I need to renew my passport before the trip to Reykjavik. What documents do I need?",
        "timestamp": 1_684_569_600.0,
    },
    {
        "role": "assistant",
        "content": "Bring the old passport, a photo and the renewal form DS-82.",
        "timestamp": 1_684_569_660.0,
    },
    {
        "role": "user",
        "content": "My appointment at the Boston Passport Agency is on 2023-06-14.",
        "timestamp": 1_684_569_720.0,
    },
]


SUMMARY = "User renews a passport for Reykjavik; appointment 2023-06-14."


@pytest.fixture
def summary_llm(fake_llm: FakeLlm) -> FakeLlm:
    """The fake LLM answering every summary request with SUMMARY."""
    fake_llm.reply = completion(SUMMARY)
    return fake_llm


def endpoint(fake: FakeLlm) -> LlmEndpoint:
    return fake.endpoint(timeout=5.0)


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


def test_llm_summary_is_cached_on_disk(summary_llm: FakeLlm, tmp_path: Path) -> None:
    first = Summarizer(endpoint(summary_llm), tmp_path / "summaries")
    result = first.summarize(TURNS)
    assert result.method == "llm:fake-model" and result.summary == SUMMARY
    assert len(summary_llm.requests) == 1
    sent = summary_llm.bodies[0]
    assert sent["model"] == "fake-model" and "Reykjavik" in sent["messages"][1]["content"]
    again = Summarizer(endpoint(summary_llm), tmp_path / "summaries")  # a new process, same disk cache
    assert again.summarize(TURNS).summary == SUMMARY
    assert len(summary_llm.requests) == 1 and again.cache_hits == 1 and again.llm_calls == 0
    files = list((tmp_path / "summaries").rglob("*.json"))
    assert len(files) == 1
    assert files[0].stem == SummaryCache.key("fake-model", sent["messages"][1]["content"])


def test_empty_text_makes_no_call(summary_llm: FakeLlm, tmp_path: Path) -> None:
    summarizer = Summarizer(endpoint(summary_llm), tmp_path / "summaries")
    assert summarizer.llm_summary("") is None and summarizer.llm_summary("  \n ") is None
    result = summarizer.summarize([{"role": "user", "content": "   ", "timestamp": 1.0}])
    assert summary_llm.requests == [] and result.method == "extractive"


def test_llm_failure_falls_back_to_extractive(fake_llm: FakeLlm, tmp_path: Path) -> None:
    fake_llm.reply = completion(SUMMARY, status=500)
    result = Summarizer(endpoint(fake_llm), tmp_path / "s").summarize(TURNS)
    assert len(fake_llm.requests) == 1
    assert result.method.startswith("extractive (llm failed")
    assert result.summary == extractive(TURNS)[0]
    assert not list((tmp_path / "s").rglob("*.json"))  # failures are not cached


def test_service_uses_llm_summaries_when_configured(summary_llm: FakeLlm, settings: Any) -> None:
    from memviewer.index.embedder import HashEmbedder
    from memviewer.index.lance import SUMMARIES
    from memviewer.service import MemoryService

    s = settings.with_overrides(summary_llm=True, llm_base_url=summary_llm.base_url, llm_model="fake-model")
    with MemoryService(s, embedder=HashEmbedder()) as svc:
        svc.import_session(
            {"id": "p1", "scope": "user", "scope_id": "u"},
            [{"id": f"t{i}", **t} for i, t in enumerate(TURNS)],
        )
        svc.sync_index()
        rows = svc.parts.lance.rows(SUMMARIES, None, ["summary", "method"])
        assert rows == [{"summary": SUMMARY, "method": "llm:fake-model"}]
        assert len(summary_llm.requests) == 1
        svc.indexer().rebuild()  # a rebuild reuses the disk cache
        assert len(summary_llm.requests) == 1


def test_refresh_rule() -> None:
    assert needs_refresh(None, 1)
    assert not needs_refresh(10, 10 + REFRESH_MIN_TURNS - 1)
    assert needs_refresh(10, 10 + REFRESH_MIN_TURNS)
    assert not needs_refresh(100, 120) and needs_refresh(100, 125)
    assert needs_refresh(100, 100, force=True)


def test_sentences_do_not_end_at_abbreviations() -> None:
    text = "I saw Dr. Patel at St. Mary's, e.g. for the sinus check. Then I went home!  Done?"
    assert sentences(text) == [
        "I saw Dr. Patel at St. Mary's, e.g. for the sinus check.",
        "Then I went home!",
        "Done?",
    ]
    assert sentences("My answer was no. I moved to Berlin.") == ["My answer was no.", "I moved to Berlin."]
    assert sentences("It was plan B. Then we left.") == ["It was plan B.", "Then we left."]


def test_informative_sentence_skips_filler_for_the_users_fact() -> None:
    turn = (
        "That's really helpful, thanks! I just got diagnosed with chronic sinusitis by an ENT "
        "specialist, Dr. Patel. Any tips?"
    )
    assert informative_sentence(turn) == (
        "I just got diagnosed with chronic sinusitis by an ENT specialist, Dr. Patel."
    )
    # the opening request stays when it is the informative one
    ask = "I need to renew my passport before the trip to Reykjavik. Thanks so much."
    assert informative_sentence(ask) == "I need to renew my passport before the trip to Reykjavik."
    assert informative_sentence("ok") == "ok"
    assert informative_sentence("   ") == ""
    assert len(informative_sentence("I " + "word " * 200)) <= 160


def test_extractive_summary_leads_with_each_turns_fact() -> None:
    turns = [
        {
            "role": "user",
            "content": "Great, thanks! My sister Ana and I adopted a beagle.",
            "timestamp": 1_684_540_800,
        },
        {"role": "assistant", "content": "Congratulations on the beagle!", "timestamp": 1_684_540_900},
    ]
    summary, _ = extractive(turns)
    assert summary.startswith("User: My sister Ana and I adopted a beagle.")
