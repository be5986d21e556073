"""The stdlib chat client against a real (local, fake) OpenAI-compatible HTTP server."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from fake_llm import (
    FakeLlm,
    Reply,
    completion,
    refused_url,
)

from memviewer.errors import MemviewerError
from memviewer.llm import LlmEndpoint, chat_json, chat_text


def expect_error(code: str, call: Callable[[], object]) -> MemviewerError:
    with pytest.raises(MemviewerError) as info:
        call()
    assert info.value.code == code, info.value
    return info.value


def test_chat_json_happy_path_sends_openai_request(fake_llm: FakeLlm) -> None:
    fake_llm.reply = completion('{"kind": "task", "confidence": 0.9}')
    ep = fake_llm.endpoint(api_key="sk-test")

    assert chat_json(ep, "be brief", "fix it") == {"kind": "task", "confidence": 0.9}

    (req,) = fake_llm.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["Authorization"] == "Bearer sk-test"
    body = req.body
    assert body["model"] == "fake-model"
    assert body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "fix it"},
    ]


def test_chat_text_returns_content_without_json_mode(fake_llm: FakeLlm) -> None:
    fake_llm.reply = completion("  plain answer\n")
    assert chat_text(fake_llm.endpoint(), "s", "u") == "  plain answer\n"
    (req,) = fake_llm.requests
    assert "response_format" not in req.body
    assert "Authorization" not in req.headers


def test_trailing_slash_in_base_url(fake_llm: FakeLlm) -> None:
    fake_llm.reply = completion('{"a": 1}')
    ep = LlmEndpoint(fake_llm.base_url + "/", "m")
    assert chat_json(ep, "s", "u") == {"a": 1}
    assert fake_llm.requests[0].path == "/v1/chat/completions"


@pytest.mark.parametrize(
    "content",
    [
        '```json\n{"kind": "meta", "confidence": 1}\n```',
        '```\n{"kind": "meta", "confidence": 1}\n```',
        '  ```JSON {"kind": "meta", "confidence": 1} ```  ',
        'Sure! Here it is:\n```json\n{"kind": "meta", "confidence": 1}\n```\nHope it helps.',
    ],
)
def test_fenced_json_is_unwrapped(fake_llm: FakeLlm, content: str) -> None:
    fake_llm.reply = completion(content)
    assert chat_json(fake_llm.endpoint(), "s", "u") == {"kind": "meta", "confidence": 1}


def test_timeout_maps_to_llm_timeout(fake_llm: FakeLlm) -> None:
    fake_llm.delay = 3.0
    started = time.monotonic()
    err = expect_error("llm_timeout", lambda: chat_json(fake_llm.endpoint(timeout=0.3), "s", "u"))
    assert time.monotonic() - started < 2.0
    assert fake_llm.base_url in err.message


@pytest.mark.parametrize(
    "reply",
    [
        completion("not json at all"),
        completion("[1, 2, 3]"),
        completion('"just a string"'),
        completion(None),
        (200, b"<html>gateway</html>"),
        (200, b'{"choices": []}'),
        (200, b'{"error": "nope"}'),
        (200, b"\xff\xfe"),
    ],
)
def test_malformed_output(fake_llm: FakeLlm, reply: Reply) -> None:
    fake_llm.reply = reply
    expect_error("llm_output_malformed", lambda: chat_json(fake_llm.endpoint(), "s", "u"))


def test_chat_text_rejects_missing_content(fake_llm: FakeLlm) -> None:
    fake_llm.reply = (200, b'{"choices": [{"message": {}}]}')
    expect_error("llm_output_malformed", lambda: chat_text(fake_llm.endpoint(), "s", "u"))


def test_http_error_is_internal_and_names_url(fake_llm: FakeLlm) -> None:
    fake_llm.reply = (500, b'{"error": "model not loaded"}')
    err = expect_error("internal", lambda: chat_json(fake_llm.endpoint(), "s", "u"))
    assert fake_llm.base_url in err.message
    assert "500" in err.message
    assert err.data["status"] == 500


def test_connection_refused_is_internal_and_names_url() -> None:
    url = refused_url()
    err = expect_error("internal", lambda: chat_json(LlmEndpoint(url, "m", timeout=1), "s", "u"))
    assert url in err.message


def test_non_http_url_is_rejected_without_io() -> None:
    ep = LlmEndpoint("file:///etc", "m")
    expect_error("invalid_argument", lambda: chat_text(ep, "s", "u"))


def test_repr_hides_api_key() -> None:
    assert "sk-secret" not in repr(LlmEndpoint("http://x/v1", "m", api_key="sk-secret"))
