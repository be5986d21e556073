"""What the viewer remembers across restarts: the theme and the Recall query history.

One small JSON file in the home (``viewer.json``, mode 0600 like the rest of the home).
It is a convenience, never a source of truth: a missing, unreadable or malformed file
reads as defaults, and a failed write is logged, never raised into the UI.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger("memviewer.tui")

FILE_NAME = "viewer.json"
HISTORY_MAX = 200


class ViewerPrefs:
    """Load once, save on change (a few hundred bytes: written whole, atomically)."""

    def __init__(self, home: Path) -> None:
        self.path = Path(home) / FILE_NAME
        self.theme: str | None = None
        self.history: list[str] = []
        self._load()

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if not isinstance(data, dict):
            return
        if isinstance(data.get("theme"), str):
            self.theme = data["theme"]
        history = data.get("recall_history")
        if isinstance(history, list):
            self.history = [q for q in history if isinstance(q, str) and q.strip()][-HISTORY_MAX:]

    def save(self) -> bool:
        if not self.path.parent.is_dir():
            return False  # no home yet (a viewer-only run): nothing to remember into
        tmp = self.path.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(self.as_dict(), fh, ensure_ascii=False)
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("cannot save viewer preferences to %s: %s", self.path, exc)
            tmp.unlink(missing_ok=True)
            return False
        return True

    def as_dict(self) -> dict[str, Any]:
        return {"theme": self.theme, "recall_history": self.history}

    def set_theme(self, name: str) -> None:
        if name != self.theme:
            self.theme = name
            self.save()

    def add_query(self, query: str) -> None:
        """The newest last; a repeated query moves to the end instead of appearing twice."""
        query = query.strip()
        if not query:
            return
        if self.history and self.history[-1] == query:
            return
        self.history = [q for q in self.history if q != query][-(HISTORY_MAX - 1) :] + [query]
        self.save()
