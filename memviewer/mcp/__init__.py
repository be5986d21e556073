"""``memviewer mcp``: memviewer's memory as read-only MCP tools for agents.

``tools`` holds the four tools (schemas and the calls behind them, plain Python);
``server`` puts them on the official ``mcp`` SDK's server over stdio or streamable
HTTP. Every read goes through ``memviewer.api.open_reader`` (the hub serving the
home, else the store read-only) and every search or recall is recorded in the recall
log with source ``mcp``.
"""
