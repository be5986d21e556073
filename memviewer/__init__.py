"""memviewer: a local recall debugger for AI agent memory."""

__version__ = "0.1.0"
