"""A tiny OpenAI-compatible chat client built on the standard library only.

The LLM is an optional helper (intent tie-breaks, summaries), so it must not drag an
HTTP stack into the install, and every failure has to surface as one of three stable
error codes the callers can fall back on: ``llm_timeout``, ``llm_output_malformed`` or
``internal``.
"""

from __future__ import annotations

import http.client
import json
import logging
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, cast

from memviewer.errors import MemviewerError

log = logging.getLogger("memviewer.llm")

# How much of a bad reply we quote back in an error: enough to debug, not a whole dump.
_SNIPPET = 200

# A reply wrapped in a Markdown code fence, optionally tagged ```json.
_FENCE_RE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n?(.*?)\r?\n?[ \t]*```", re.DOTALL)


@dataclass(frozen=True)
class LlmEndpoint:
    """Where to reach an OpenAI-compatible server (Ollama, llama.cpp, vLLM, OpenAI...)."""

    base_url: str  # e.g. http://127.0.0.1:11434/v1
    model: str
    timeout: float = 5.0
    api_key: str | None = None

    def __repr__(self) -> str:
        # Never let the API key end up in a log line or a traceback.
        key = "***" if self.api_key else None
        return (
            f"LlmEndpoint(base_url={self.base_url!r}, model={self.model!r}, "
            f"timeout={self.timeout!r}, api_key={key!r})"
        )

    @property
    def chat_url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"


def chat_json(endpoint: LlmEndpoint, system: str, user: str) -> dict[str, Any]:
    """Ask for a JSON object reply and return it parsed.

    Requests ``response_format: json_object`` with temperature 0 so verdicts are
    repeatable, but still tolerates servers that ignore the flag and fence the JSON.
    """
    content = _complete(endpoint, system, user, json_mode=True)
    return _parse_json_object(content, endpoint.chat_url)


def chat_text(endpoint: LlmEndpoint, system: str, user: str) -> str:
    """Ask for a plain-text reply (temperature 0) and return the message content."""
    return _complete(endpoint, system, user, json_mode=False)


def _complete(endpoint: LlmEndpoint, system: str, user: str, *, json_mode: bool) -> str:
    url = endpoint.chat_url
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        # urlopen would happily read file:// URLs; an LLM endpoint is only ever HTTP.
        raise MemviewerError(
            "invalid_argument",
            f"LLM base_url must be http(s), got {endpoint.base_url!r}",
            data={"url": url},
        )
    payload: dict[str, Any] = {
        "model": endpoint.model,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ],
        "temperature": 0,
    }
    if json_mode:
        payload["response_format"] = {"type": "json_object"}
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if endpoint.api_key:
        headers["Authorization"] = f"Bearer {endpoint.api_key}"
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode("utf-8"), headers=headers, method="POST"
    )
    log.debug("LLM request to %s (model=%s, json=%s)", url, endpoint.model, json_mode)
    raw = _send(request, url, endpoint.timeout)
    return _extract_content(raw, url)


def _send(request: urllib.request.Request, url: str, timeout: float) -> bytes:
    """POST and read the body, mapping every transport failure onto a stable code."""
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return cast("bytes", response.read())
    except urllib.error.HTTPError as exc:  # before URLError: it is a subclass
        detail = _http_error_detail(exc)
        raise MemviewerError(
            "internal",
            f"LLM endpoint {url} answered HTTP {exc.code}{detail}",
            data={"url": url, "status": exc.code},
        ) from exc
    except urllib.error.URLError as exc:
        if _is_timeout(exc.reason):
            raise _timeout_error(url, timeout) from exc
        raise MemviewerError(
            "internal",
            f"cannot reach LLM endpoint {url}: {exc.reason}",
            data={"url": url},
        ) from exc
    except TimeoutError as exc:  # socket.timeout while waiting for the reply
        raise _timeout_error(url, timeout) from exc
    except (OSError, http.client.HTTPException) as exc:  # reset, bad status line, ...
        raise MemviewerError(
            "internal",
            f"LLM endpoint {url} failed: {exc.__class__.__name__}: {exc}",
            data={"url": url},
        ) from exc


def _is_timeout(reason: object) -> bool:
    if isinstance(reason, TimeoutError):  # socket.timeout is an alias since 3.10
        return True
    return isinstance(reason, str) and "timed out" in reason.lower()


def _timeout_error(url: str, timeout: float) -> MemviewerError:
    log.warning("LLM endpoint %s timed out after %.2fs", url, timeout)
    return MemviewerError(
        "llm_timeout",
        f"LLM endpoint {url} did not answer within {timeout:g}s",
        data={"url": url, "timeout": timeout},
    )


def _http_error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        body = exc.read(_SNIPPET).decode("utf-8", "replace").strip()
    except Exception:  # the status code alone is still worth reporting
        return ""
    return f": {body}" if body else ""


def _malformed(message: str, url: str, text: str | None = None) -> MemviewerError:
    data: dict[str, Any] = {"url": url}
    if text is not None:
        data["snippet"] = text[:_SNIPPET]
    return MemviewerError("llm_output_malformed", message, data=data)


def _extract_content(raw: bytes, url: str) -> str:
    """Pull ``choices[0].message.content`` out of a chat-completions body."""
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        text = raw[:_SNIPPET].decode("utf-8", "replace")
        raise _malformed(f"LLM endpoint {url} returned a non-JSON body", url, text) from exc
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError) as exc:
        raise _malformed(
            f"LLM endpoint {url} reply has no choices[0].message.content", url, str(body)
        ) from exc
    if not isinstance(content, str):
        raise _malformed(f"LLM endpoint {url} returned non-text content", url, repr(content))
    return content


def _parse_json_object(content: str, url: str) -> dict[str, Any]:
    """Parse the content as one JSON object, unwrapping a Markdown fence if present."""
    candidates = [content.strip()]
    fenced = _FENCE_RE.search(content)
    if fenced:
        candidates.insert(0, fenced.group(1).strip())
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
        raise _malformed(
            f"LLM endpoint {url} returned JSON {type(value).__name__}, expected an object",
            url,
            content,
        )
    raise _malformed(f"LLM endpoint {url} returned content that is not JSON", url, content)
