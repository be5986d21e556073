"""Logging with correlation ids carried by ``contextvars``.

Code inside ``log_context(session_id=..., episode_id=...)`` logs on its named
channel and every record carries the ids, without passing loggers around.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator

_session: contextvars.ContextVar[str | None] = contextvars.ContextVar("session_id", default=None)
_episode: contextvars.ContextVar[str | None] = contextvars.ContextVar("episode_id", default=None)

CHANNELS = (
    "memviewer.session",
    "memviewer.session.intent",
    "memviewer.episode",
    "memviewer.store",
    "memviewer.hub",
    "memviewer.index",
    "memviewer.recall",
    "memviewer.io",
)


@contextlib.contextmanager
def log_context(session_id: str | None = None, episode_id: str | None = None) -> Iterator[None]:
    tokens = []
    if session_id is not None:
        tokens.append((_session, _session.set(session_id)))
    if episode_id is not None:
        tokens.append((_episode, _episode.set(episode_id)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


class ContextFilter(logging.Filter):
    """Stamp ``session_id`` / ``episode_id`` on every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.session_id = _session.get() or "-"
        record.episode_id = _episode.get() or "-"
        return True


def install_context_filter() -> None:
    """Attach the filter to the memviewer channels (idempotent)."""
    for name in ("memviewer", *CHANNELS):
        logger = logging.getLogger(name)
        if not any(isinstance(f, ContextFilter) for f in logger.filters):
            logger.addFilter(ContextFilter())


def configure_logging(level: str = "WARNING", path: str | None = None) -> None:
    install_context_filter()
    fmt = "%(asctime)s %(levelname)s %(name)s [s=%(session_id)s e=%(episode_id)s] %(message)s"
    handler: logging.Handler = logging.FileHandler(path) if path else logging.StreamHandler()
    handler.setFormatter(logging.Formatter(fmt))
    handler.addFilter(ContextFilter())
    root = logging.getLogger("memviewer")
    root.handlers[:] = [handler]
    root.setLevel(level)
