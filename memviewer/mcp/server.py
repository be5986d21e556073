"""The MCP server: ``memviewer.mcp.tools`` on the official ``mcp`` SDK's low-level server.

The low-level server (not the decorator one) because the schemas are the contract:
each tool declares its own input and output JSON Schema, annotations
``readOnlyHint: true`` / ``openWorldHint: false``, and answers both a JSON text (what
PraisonAI's ``session_search`` returns) and the same object as structured content.
Tool calls run in worker threads (the reader blocks); a failure is an ``isError``
result whose text is ``{"error", "code", "hint"}``.

Transports: stdio (the default; stdout carries only the protocol, logs go to stderr)
and streamable HTTP on a loopback address (``--http 127.0.0.1:PORT``, path ``/mcp``). Over
HTTP every request needs the home's bearer token (``memviewer.access``; the SDK's own
bearer middleware checks it, 401 otherwise) and a ``Host`` naming the bound address exactly
(the SDK's DNS-rebinding check, given exact names instead of its ``127.0.0.1:*`` pattern,
which matched ``127.0.0.1:P.evil.example`` too).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import threading
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server

from memviewer import __version__
from memviewer.api import Reader, open_reader
from memviewer.config import Settings
from memviewer.errors import INVALID_ARGUMENT, MemviewerError
from memviewer.mcp.tools import TOOLS, Caller, ToolFailure, call_tool
from memviewer.wire.protocol import dumps

log = logging.getLogger("memviewer.mcp")

HTTP_PATH = "/mcp"
INSTRUCTIONS = (
    "memviewer holds this agent's past sessions (archived and active turns). Use "
    "session_search to find a past discussion and read around it, recall for a question "
    "answered from memory, list_sessions and get_session to browse."
)


class ReaderHolder:
    """The reader, reopened once when the hub it talked to went away (a restart, a stop)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._reader: Reader | None = None

    def get(self) -> Reader:
        with self._lock:
            if self._reader is None:
                self._reader = open_reader(self.settings, client="memviewer.mcp")
            return self._reader

    def reset(self, stale: Reader) -> None:
        with self._lock:
            if self._reader is stale:
                self._reader = None
        stale.close()

    def close(self) -> None:
        with self._lock:
            reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()

    def call(self, name: str, arguments: dict[str, Any] | None, caller: Caller) -> dict[str, Any]:
        reader = self.get()
        try:
            return call_tool(reader, name, arguments, caller)
        except ToolFailure as failure:
            if not failure.message.startswith("hub unavailable"):
                raise
            self.reset(reader)  # the hub is gone: the next reader is a new hub or the store
            return call_tool(self.get(), name, arguments, caller)


def _tool_list() -> list[types.Tool]:
    return [
        types.Tool(
            name=spec.name,
            title=spec.title,
            description=spec.description,
            input_schema=spec.input_schema,
            output_schema=spec.output_schema,
            annotations=types.ToolAnnotations(
                title=spec.title,
                read_only_hint=True,
                destructive_hint=False,
                idempotent_hint=True,
                open_world_hint=False,
            ),
        )
        for spec in TOOLS
    ]


def build_server(holder: ReaderHolder) -> Server[Any]:
    tools = _tool_list()

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        caller = Caller.from_meta(params.meta)
        try:
            out = await anyio.to_thread.run_sync(holder.call, params.name, params.arguments, caller)
            text = dumps(out)
        except ToolFailure as failure:
            body = failure.to_dict()
            return types.CallToolResult(content=[types.TextContent(text=dumps(body))], is_error=True)
        return types.CallToolResult(
            content=[types.TextContent(text=text)], structured_content=json.loads(text)
        )

    return Server(
        "memviewer",
        version=__version__,
        title="memviewer",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call,
    )


def parse_http(value: str) -> tuple[str, int]:
    """``HOST:PORT`` on a loopback address, or a ``MemviewerError`` saying why not."""
    host, sep, port_text = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise MemviewerError(
            INVALID_ARGUMENT,
            f"--http takes HOST:PORT, not {value!r}",
            hint="memviewer mcp --http 127.0.0.1:8765",
        )
    loopback = host == "localhost"
    if not loopback:
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
    if not loopback:
        raise MemviewerError(
            INVALID_ARGUMENT,
            f"--http serves only a loopback address (127.0.0.1, ::1, localhost), not {host!r}",
            hint="memory stays on this machine; tunnel it yourself if you must",
        )
    return host, int(port_text)


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


class HomeTokenVerifier:
    """The SDK's ``TokenVerifier`` for the home's one token (``memviewer.access``)."""

    def __init__(self, token: str) -> None:
        self.token = token

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        from memviewer.access import bearer_ok

        if not bearer_ok(f"Bearer {token}", self.token):
            return None
        return AccessToken(token=token, client_id="memviewer-home", scopes=[])


def bind(host: str, port: int) -> Any:
    """The listening socket, bound before the app is built: the ``Host`` check needs the
    real port (``--http 127.0.0.1:0`` asks for any)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


def http_app(server: Server[Any], host: str, port: int, token: str) -> Any:
    """The streamable HTTP app with the token and the exact-``Host`` check."""
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.transport_security import TransportSecuritySettings

    from memviewer.access import host_names

    names = sorted(host_names(host, port))
    url = f"http://{names[0]}"
    return server.streamable_http_app(
        streamable_http_path=HTTP_PATH,
        host=host,
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=names,
            allowed_origins=[f"http://{n}" for n in names],
        ),
        auth=AuthSettings(issuer_url=url, resource_server_url=f"{url}{HTTP_PATH}", required_scopes=[]),  # type: ignore[arg-type]
        token_verifier=HomeTokenVerifier(token),
    )


async def serve_http(server: Server[Any], sock: Any, token: str, ready: Any = None) -> None:
    import uvicorn

    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(http_app(server, host, port, token), log_level="warning", lifespan="on")
    userver = uvicorn.Server(config)
    if ready is not None:
        ready(userver)
    await userver.serve(sockets=[sock])


def run(settings: Settings, http: str | None = None) -> None:
    """Serve until stdin closes (stdio) or the process is interrupted (HTTP)."""
    address = parse_http(http) if http else None
    holder = ReaderHolder(settings)
    holder.get()  # a store that cannot be opened fails here, before the client waits on us
    server = build_server(holder)
    try:
        if address is None:
            anyio.run(serve_stdio, server)
        else:
            import sys

            from memviewer.access import home_token, token_path

            token, created = home_token(settings.home_path)
            try:
                sock = bind(*address)
            except OSError as exc:
                raise MemviewerError(
                    INVALID_ARGUMENT, f"cannot listen on {address[0]}:{address[1]}: {exc.strerror or exc}"
                ) from None
            host, port = sock.getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            where = token_path(settings.home_path)
            print(
                f"memviewer mcp: streamable HTTP on http://{shown}:{port}{HTTP_PATH}; every request "
                f"needs 'Authorization: Bearer <token>', the token in {where}"
                + (f" (new: {token})" if created else ""),
                file=sys.stderr,
                flush=True,
            )
            anyio.run(serve_http, server, sock, token)
    finally:
        holder.close()
