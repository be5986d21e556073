"""Intent rules in English and Chinese, and the LLM tie-break with its fallbacks."""

from __future__ import annotations

import json
import logging
import urllib.request
from collections.abc import Callable

import pytest
from fake_llm import (
    FakeLlm,
    Reply,
    completion,
    refused_url,
)

from memviewer.errors import MemviewerError
from memviewer.llm import LlmEndpoint
from memviewer.session.intent import (
    KINDS,
    RULES,
    IntentClassifier,
    IntentResult,
    heuristic_classify,
)


def verdict(kind: object, confidence: object = 0.8) -> Reply:
    """The LLM's reply carrying an intent verdict as its JSON content."""
    return completion(json.dumps({"kind": kind, "confidence": confidence}))


def classifier(fake: FakeLlm, timeout: float = 2.0) -> IntentClassifier:
    return IntentClassifier(fake.endpoint(timeout=timeout))


def expect_error(code: str, call: Callable[[], object]) -> None:
    with pytest.raises(MemviewerError) as info:
        call()
    assert info.value.code == code


# ---- heuristic rules -------------------------------------------------------------------------

STRONG_CASES = [
    # task
    ("fix the failing test in test_store.py", "task", "en.task.imperative_verb"),
    ("Please write a migration for the users table", "task", "en.task.imperative_verb"),
    ("can you refactor parse() into two functions?", "task", "en.task.imperative_verb"),
    ("ok thanks, now run the linter", "task", "en.task.imperative_verb"),
    ("Explain how to configure the embedder", "task", "en.task.imperative_verb"),
    ("I need you to add retries to the client", "task", "en.task.need_you_to"),
    ("帮我看看这个报错", "task", "zh.task.help_me"),
    ("写一个解析日志的脚本", "task", "zh.task.write_a"),
    ("请把这个函数改成异步的", "task", "zh.task.please_verb"),
    ("实现LRU缓存", "task", "zh.task.verb"),
    ("修复登录页面的问题", "task", "zh.task.verb"),
    # memory_probe
    ("what did we decide about the schema?", "memory_probe", "en.memory_probe.what_did_we"),
    ("What did we discuss yesterday", "memory_probe", "en.memory_probe.what_did_we"),
    ("last time the build broke on CI", "memory_probe", "en.memory_probe.last_time"),
    ("do you remember the port we picked?", "memory_probe", "en.memory_probe.do_you_remember"),
    ("remind me what the plan was", "memory_probe", "en.memory_probe.remind_me"),
    ("earlier you said sqlite was enough", "memory_probe", "en.memory_probe.earlier_you_said"),
    ("你还记得我们用的端口吗", "memory_probe", "zh.memory_probe.remember"),
    ("上次说到哪了", "memory_probe", "zh.memory_probe.last_time"),
    ("之前我们决定用什么数据库", "memory_probe", "zh.memory_probe.previously_we"),
    ("我们讨论过这个方案", "memory_probe", "zh.memory_probe.discussed"),
    # chitchat
    ("thanks!", "chitchat", "en.chitchat.greeting_ack"),
    ("ok", "chitchat", "en.chitchat.greeting_ack"),
    ("Hi there", "chitchat", "en.chitchat.greeting_ack"),
    ("good morning :)", "chitchat", "en.chitchat.greeting_ack"),
    ("lol", "chitchat", "en.chitchat.greeting_ack"),
    ("ok, thank you so much!", "chitchat", "en.chitchat.greeting_ack"),
    ("谢谢", "chitchat", "zh.chitchat.greeting_ack"),
    ("你好！", "chitchat", "zh.chitchat.greeting_ack"),
    ("好的", "chitchat", "zh.chitchat.greeting_ack"),
    ("哈哈哈", "chitchat", "zh.chitchat.greeting_ack"),
    ("好的，谢谢啦", "chitchat", "zh.chitchat.greeting_ack"),
    # meta
    ("/memos status", "meta", "any.meta.slash_command"),
    ("/memory export --format md", "meta", "any.meta.slash_command"),
    ("/help", "meta", "any.meta.slash_command"),
    ("/记忆 导出", "meta", "any.meta.slash_command"),
]


@pytest.mark.parametrize(("message", "kind", "rule_id"), STRONG_CASES)
def test_strong_rules(message: str, kind: str, rule_id: str) -> None:
    result = heuristic_classify(message)
    assert (result.kind, result.rule_id, result.source) == (kind, rule_id, "heuristic")
    assert result.confidence >= IntentClassifier.STRONG
    assert result.error is None


@pytest.mark.parametrize(
    ("message", "kind", "rule_id"),
    [
        ("thanks, that works", "chitchat", "en.chitchat.short_opener"),
        ("好的，不过还有个问题", "chitchat", "zh.chitchat.short_opener"),
        ("how do I install the hooks", "task", "en.task.how_do_i"),
        ("如何配置这个模型", "task", "zh.task.how_to"),
        ("as we discussed, sqlite it is", "memory_probe", "en.memory_probe.we_discussed"),
        ("/home/me/app.py crashes on start", "meta", "any.meta.leading_slash"),
        ("let's add a cache", "task", "en.task.lets"),
    ],
)
def test_weak_rules(message: str, kind: str, rule_id: str) -> None:
    result = heuristic_classify(message)
    assert (result.kind, result.rule_id) == (kind, rule_id)
    assert 0 < result.confidence < IntentClassifier.STRONG


@pytest.mark.parametrize(
    "message",
    [
        "the weather is nice",
        "k8s is down",
        "make sense?",
        "天气不错",
        # chitchat words inside a long message are not chitchat
        "thanks " + "x" * 100,
    ],
)
def test_no_match_is_unknown(message: str) -> None:
    assert heuristic_classify(message) == IntentResult("unknown", 0.0, "none", "heuristic")


def test_best_rule_wins_over_weaker_match() -> None:
    # "thanks" opens it (weak chitchat) but the imperative after it is the point.
    assert heuristic_classify("thanks a lot, now add tests").kind == "task"
    # Memory wording beats the polite "hey" and the task rule.
    assert heuristic_classify("hey, remind me what we decided about auth").kind == "memory_probe"


def test_full_width_input_is_normalized() -> None:
    assert heuristic_classify("／memos status").rule_id == "any.meta.slash_command"
    assert heuristic_classify("ｆｉｘ ｔｈｅ ｂｕｇ").kind == "task"


def test_rules_are_well_formed() -> None:
    ids = [rule.rule_id for rule in RULES]
    assert len(ids) == len(set(ids))
    for rule in RULES:
        lang, kind, _ = rule.rule_id.split(".")
        assert lang in {"en", "zh", "any"} and kind == rule.kind and kind in KINDS
        assert 0 < rule.confidence < 1


@pytest.mark.timeout(20)  # a hang guard against catastrophic backtracking, not a benchmark
def test_pathological_input_is_fast() -> None:
    # Nested repetition in the chitchat rules must not backtrack exponentially.
    for message in ["哈" * 19 + "x", "ok, " * 5000 + "x", "a" * 100_000]:
        result = heuristic_classify(message)
        assert result.kind in KINDS and 0.0 <= result.confidence <= 1.0


@pytest.mark.parametrize("message", ["", "   ", "\n\t"])
def test_empty_message_is_invalid(message: str) -> None:
    expect_error("invalid_argument", lambda: heuristic_classify(message))
    expect_error("invalid_argument", lambda: IntentClassifier().classify(message))


# ---- classifier and LLM tie-break ------------------------------------------------------------


def test_strong_match_never_calls_llm(fake_llm: FakeLlm) -> None:
    fake_llm.reply = verdict("chitchat", 1.0)
    result = classifier(fake_llm).classify("fix the bug in main.py")
    assert (result.kind, result.source) == ("task", "heuristic")
    assert fake_llm.requests == []


def test_llm_breaks_weak_match(fake_llm: FakeLlm) -> None:
    fake_llm.reply = verdict("task", 0.7)
    result = classifier(fake_llm).classify("thanks, that works")
    assert result == IntentResult("task", 0.7, "llm", "llm")
    (request,) = fake_llm.requests
    assert request.body["messages"][1]["content"] == "thanks, that works"
    assert '"kind"' in request.body["messages"][0]["content"]
    assert request.body["response_format"] == {"type": "json_object"}


def test_llm_decides_when_nothing_matches(fake_llm: FakeLlm) -> None:
    fake_llm.reply = completion('```json\n{"kind": "chitchat", "confidence": 0.55}\n```')
    result = classifier(fake_llm).classify("the weather is nice")
    assert result == IntentResult("chitchat", 0.55, "llm", "llm")


def test_llm_timeout_falls_back(fake_llm: FakeLlm, caplog: pytest.LogCaptureFixture) -> None:
    fake_llm.delay = 3.0
    fake_llm.reply = verdict("task", 0.9)
    with caplog.at_level(logging.WARNING, logger="memviewer.session.intent"):
        result = classifier(fake_llm, timeout=0.3).classify("thanks, that works")
    assert result == IntentResult("chitchat", 0.6, "en.chitchat.short_opener", "fallback", "llm_timeout")
    assert any("llm_timeout" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "content",
    [
        "I think this is a task",
        json.dumps({"kind": "question", "confidence": 0.9}),
        json.dumps({"kind": "task", "confidence": 7}),
        json.dumps({"kind": "task", "confidence": "high"}),
        json.dumps({"kind": "task"}),
        json.dumps(["task", 0.9]),
    ],
)
def test_malformed_llm_output_falls_back(fake_llm: FakeLlm, content: str) -> None:
    fake_llm.reply = completion(content)
    result = classifier(fake_llm).classify("the weather is nice")
    assert result == IntentResult("unknown", 0.0, "none", "fallback", "llm_output_malformed")


def test_unreachable_llm_falls_back() -> None:
    unreachable = IntentClassifier(LlmEndpoint(refused_url(), "m", timeout=1))
    result = unreachable.classify("how do I install the hooks")
    assert (result.kind, result.source, result.error) == ("task", "fallback", "internal")


def test_no_endpoint_means_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("network used without an endpoint")

    monkeypatch.setattr(urllib.request, "urlopen", forbidden)
    offline = IntentClassifier()
    assert offline.classify("thanks, that works").source == "heuristic"
    assert offline.classify("the weather is nice") == IntentResult("unknown", 0.0, "none", "heuristic")


def test_llm_verdict_is_logged(fake_llm: FakeLlm, caplog: pytest.LogCaptureFixture) -> None:
    fake_llm.reply = verdict("memory_probe", 0.8)
    with caplog.at_level(logging.INFO, logger="memviewer.session.intent"):
        classifier(fake_llm).classify("the weather is nice")
    assert any("memory_probe" in r.getMessage() for r in caplog.records)
