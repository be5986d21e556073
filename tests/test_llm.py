"""The stdlib chat client against a real (local, fake) OpenAI-compatible HTTP server."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from memviewer.errors import MemviewerError
from memviewer.llm import LlmEndpoint, chat_json, chat_text

Reply = tuple[int, bytes]  # status, body


def completion(content: str | None) -> Reply:
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
    return 200, json.dumps(body).encode()


@dataclass
class FakeLlm:
    """An OpenAI-compatible endpoint whose answer and delay each test sets."""

    base_url: str = ""
    reply: Reply = field(default_factory=lambda: completion("{}"))
    delay: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def endpoint(self, timeout: float = 2.0, api_key: str | None = None) -> LlmEndpoint:
        return LlmEndpoint(self.base_url, "fake-model", timeout=timeout, api_key=api_key)


def _handler(fake: FakeLlm) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            length = int(self.headers.get("Content-Length", "0"))
            fake.requests.append(
                {
                    "path": self.path,
                    "headers": dict(self.headers),
                    "body": json.loads(self.rfile.read(length)),
                }
            )
            if fake.delay and fake.stop.wait(fake.delay):
                return
            status, body = fake.reply
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:  # the client gave up (timeout tests)
                pass

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

    return Handler


@pytest.fixture
def fake_llm() -> Iterator[FakeLlm]:
    fake = FakeLlm()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    server.handle_error = lambda request, address: None  # type: ignore[method-assign]
    fake.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield fake
    finally:
        fake.stop.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=2)


def refused_url() -> str:
    """A local port with nobody listening, so connecting fails fast."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


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
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sk-test"
    body = req["body"]
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
    assert "response_format" not in req["body"]
    assert "Authorization" not in req["headers"]


def test_trailing_slash_in_base_url(fake_llm: FakeLlm) -> None:
    fake_llm.reply = completion('{"a": 1}')
    ep = LlmEndpoint(fake_llm.base_url + "/", "m")
    assert chat_json(ep, "s", "u") == {"a": 1}
    assert fake_llm.requests[0]["path"] == "/v1/chat/completions"


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
