"""``memviewer mcp``: the MCP server (stdio, or streamable HTTP on loopback)."""

from __future__ import annotations

import click

from memviewer.commands.common import fail, settings_of


@click.command("mcp")
@click.option(
    "--http",
    "http",
    default=None,
    metavar="HOST:PORT",
    help="serve streamable HTTP on this loopback address (path /mcp) instead of stdio",
)
@click.pass_context
def mcp_cmd(ctx: click.Context, http: str | None) -> None:
    """Serve memviewer's memory to agents over MCP (read-only tools).

    Tools: session_search (PraisonAI's parameters and JSON), recall (the recall --json
    contract), get_session, list_sessions. Reads go through the hub serving the home
    when one runs, else the store read-only; every search and recall is recorded in
    the recall log (source mcp).
    """
    from memviewer.errors import MemviewerError

    try:
        from memviewer.mcp import server
    except ImportError as exc:
        fail(f"the MCP server needs the mcp package ({exc})", hint="pip install 'mcp>=2.3'")
    try:
        server.run(settings_of(ctx), http)
    except MemviewerError as exc:
        fail(exc.message, hint=exc.hint)
    except KeyboardInterrupt:
        pass


COMMANDS = (mcp_cmd,)
