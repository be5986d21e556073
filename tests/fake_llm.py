"""One fake OpenAI-compatible chat server on 127.0.0.1 for every test that needs an LLM.

The LLM client, the intent tie-break and the summarizer all talk plain HTTP to an
OpenAI-compatible endpoint, so they are tested against a real local socket rather than a
mocked ``urlopen``: that keeps timeouts, HTTP errors and bad bodies honest.

``tests/conftest.py`` registers this module as a plugin, so every test can take the
``fake_llm`` fixture; import ``FakeLlm``/``completion`` for types and replies.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from memviewer.llm import LlmEndpoint

Reply = tuple[int, bytes]  # HTTP status, raw response body


def completion(content: str | None, status: int = 200) -> Reply:
    """A chat-completions reply whose ``choices[0].message.content`` is *content*."""
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
    return status, json.dumps(body).encode()


@dataclass(frozen=True)
class Recorded:
    """One request the fake received, as the server saw it."""

    path: str
    headers: dict[str, str]
    body: Any  # the parsed JSON payload


@dataclass
class FakeLlm:
    """An OpenAI-compatible endpoint whose reply and delay each test sets.

    ``reply`` is sent verbatim (status and raw bytes), so a test can answer with a good
    completion, an HTTP error or a body that is not JSON at all. With ``delay`` > 0 the
    server waits that long before answering (to trip client timeouts); shutting the
    fake down cuts the wait short.
    """

    model: str = "fake-model"
    base_url: str = ""
    reply: Reply = field(default_factory=lambda: completion("{}"))
    delay: float = 0.0
    requests: list[Recorded] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)

    def endpoint(self, timeout: float = 2.0, api_key: str | None = None) -> LlmEndpoint:
        return LlmEndpoint(self.base_url, self.model, timeout=timeout, api_key=api_key)

    @property
    def bodies(self) -> list[Any]:
        """The JSON payloads received so far, oldest first."""
        return [request.body for request in self.requests]

    @classmethod
    @contextmanager
    def serve(cls, **options: Any) -> Iterator[FakeLlm]:
        """Run a fake on a free local port for the duration of the block."""
        fake = cls(**options)
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
        server.daemon_threads = True
        # A client that times out closes its socket under the handler; that is expected.
        server.handle_error = lambda request, address: None  # type: ignore[method-assign]
        fake.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
        thread.start()
        try:
            yield fake
        finally:
            fake._stop.set()
            server.shutdown()
            server.server_close()
            thread.join(timeout=2)


def _handler(fake: FakeLlm) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            length = int(self.headers.get("Content-Length", "0"))
            fake.requests.append(Recorded(self.path, dict(self.headers), json.loads(self.rfile.read(length))))
            if fake.delay and fake._stop.wait(fake.delay):
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


@pytest.fixture(name="fake_llm")
def fake_llm_fixture() -> Iterator[FakeLlm]:
    """A running :class:`FakeLlm` that answers ``{}`` until the test says otherwise."""
    with FakeLlm.serve() as fake:
        yield fake


def refused_url() -> str:
    """A local URL with nobody listening, so connecting fails fast."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
