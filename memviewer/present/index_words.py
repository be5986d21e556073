"""The vector index's state in words: its lag (``index.progress.index_lag`` counts it), who
embeds the waiting turns (``wire.embedding.who_embeds`` decides) and a damaged index's error
(``recall.index_guard``). Doctor, import, recall, the hub and the viewer say them alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memviewer.words import plural

NO_INDEXER_FIX = "run `memviewer reindex --catch-up`, or start `memviewer serve` / the viewer"
#: What to do about a vector index that cannot be read.
DAMAGE_HINT = "run `memviewer reindex` (keyword search still works; a hub repairs missing indexes on start)"


def damage_message(exc: BaseException) -> str:
    """The first line of a LanceDB/Arrow error, without its Rust source locations."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = text.split(", /root/.cargo/")[0].split(", /rustc/")[0]
    return text[:300]


@dataclass(frozen=True)
class Embedding:
    """Who embeds a home's new turns (``memviewer.wire.embedding.who_embeds`` decides).

    ``indexer``: ``"hub"`` (the background indexer of the hub serving the home),
    ``"background"`` (a live ``memviewer reindex --catch-up``, ``pid``) or None: nothing
    does. ``idle_hub``: a hub serves the home but runs no indexer (``serve --no-index``).
    """

    indexer: str | None
    pid: int | None = None
    idle_hub: str | None = None

    @property
    def fix(self) -> str | None:
        """What to do when nothing embeds (None while something does)."""
        if self.indexer is not None:
            return None
        if self.idle_hub is not None:
            return f"the hub on {self.idle_hub} runs no indexer (`serve --no-index`): restart it without it"
        return NO_INDEXER_FIX

    def who(self) -> str:
        """``"the hub's indexer is embedding them"``, or ``"nothing is embedding them: <fix>"``."""
        if self.indexer == "hub":
            return "the hub's indexer is embedding them"
        if self.indexer == "background":
            return f"a background `memviewer reindex --catch-up` (pid {self.pid}) is embedding them"
        return f"nothing is embedding them: {self.fix}"

    def public(self) -> dict[str, Any]:
        """The JSON form beside a lag: ``{"indexer"}``, plus ``"fix"`` when it is None."""
        return {"indexer": self.indexer} if self.indexer is not None else {"indexer": None, "fix": self.fix}


def waiting_line(lag: dict[str, Any], embedding: Embedding) -> str:
    """``"3 turns wait and nothing is embedding them: run …"`` (doctor, import, recall)."""
    n = int(lag["lag"])
    return f"{plural(n, 'turn')} wait{'s' if n == 1 else ''} and {embedding.who()}"


def describe(lag: dict[str, Any]) -> str:
    """``"1,234 turns not embedded yet (about 40 s)"`` for people."""
    eta = lag.get("eta_s")
    when = "" if eta is None else f" (about {_human_seconds(float(eta))})"
    return f"{plural(int(lag['lag']), 'turn')} not embedded yet{when}"


def _human_seconds(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"
