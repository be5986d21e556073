"""Error codes shared by the manager, the hub protocol and the CLI.

One exception type with a machine-readable ``code`` keeps every transport
(in-process calls, JSON-RPC errors, CLI exit messages) speaking the same words.
"""

from __future__ import annotations

from typing import Any

SESSION_NOT_FOUND = "session_not_found"
EPISODE_NOT_FOUND = "episode_not_found"
CONFLICT = "conflict"
INVALID_ARGUMENT = "invalid_argument"
INTERNAL = "internal"
LLM_TIMEOUT = "llm_timeout"
LLM_OUTPUT_MALFORMED = "llm_output_malformed"
NOT_FOUND = "not_found"


class MemviewerError(Exception):
    """An expected failure with a stable code (the table in docs/cli.md, "Errors").

    ``hint`` (what to do about it) is an attribute; on the wire it stays inside ``data``,
    so it lives there alone and an error rebuilt from a hub's answer has it too.
    """

    def __init__(
        self, code: str, message: str, *, data: dict[str, Any] | None = None, hint: str | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = dict(data or {})
        if hint is not None:
            self.data["hint"] = hint

    @property
    def hint(self) -> str | None:
        """The one line that says what to do, or ``None``."""
        hint = self.data.get("hint")
        return str(hint) if hint else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data:
            out["data"] = self.data
        return out

    def __repr__(self) -> str:
        return f"MemviewerError({self.code!r}, {self.message!r})"


# -- failures a front end tells apart (raised below the API, caught by the CLI and the viewer) --
class ModelNotFoundError(Exception):
    """The embedding model (or part of it) is not installed where we look.

    The message names the missing package, file or folder and how to fix it.
    """


class ModelChecksumError(Exception):
    """The packaged model file is not the one memviewer was validated with."""


class ModelLoadError(ModelNotFoundError):
    """The model files exist but cannot be used (corrupt, wrong format, bad settings).

    A subclass of ModelNotFoundError so every caller that reports a missing model
    with a fix hint reports this one too, instead of a traceback.
    """


class WhyCancelled(Exception):
    """The caller stopped the fix search (``cancelled()`` said so) before it ended."""

    def __init__(self, done: int, planned: int) -> None:
        super().__init__(f"why-not cancelled after {done} of {planned} re-runs")
        self.done, self.planned = done, planned
