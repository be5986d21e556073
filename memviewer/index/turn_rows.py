"""One SQLite turn as a row of the vector index: the text embedded, the flags, the hash.

A new turn, a reconciled one and one an integrity check re-embeds all go through
``embed_turns``, so they are indexed alike. Rows come from ``store.indexing`` (the turn
with its session's scope).
"""

from __future__ import annotations

import hashlib
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memviewer.index.embedder import Embedder

#: Turns embedded per model call inside a batch: between two, a stopping indexer gives up the
#: batch (its watermark not moved: the next start embeds it again), so a hub stops within about
#: one such call (0.2–1 s on 2 cores) instead of a whole read batch (5–20 s).
EMBED_CHUNK = 128


class IndexerStopping(Exception):
    """The background indexer was asked to stop in the middle of a pass."""


def text_hash(text: str) -> str:
    """A short digest of a turn's text: an index row whose hash differs is embedded again."""
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def embed_text(row: dict[str, Any], contexts: dict[str, str]) -> str:
    """The text embedded for a turn: its session's summary opening first, when there is one."""
    context = contexts.get(row["session_id"])
    text = str(row["content"])
    return f"{context}\n\n{text}" if context else text


def lance_flags(row: dict[str, Any]) -> dict[str, Any]:
    """The columns of an index row that follow the turn without a new vector."""
    return {
        "scope": row["scope"] or "",
        "scope_id": row["scope_id"] or "",
        "role": row["role"],
        "archived": bool(row["archived"]),
        "is_summary": bool(row["is_compaction_summary"]),
        "episode_id": row["episode_id"],
        "timestamp": float(row["timestamp"]),
    }


def lance_row(r: dict[str, Any], vector: Any) -> dict[str, Any]:
    """The index row of a turn with its vector."""
    return {
        "turn_id": r["id"],
        "num": int(r["num"]),
        "session_id": r["session_id"],
        "episode_id": r["episode_id"],
        "scope": r["scope"] or "",
        "scope_id": r["scope_id"] or "",
        "role": r["role"],
        "archived": bool(r["archived"]),
        "is_summary": bool(r["is_compaction_summary"]),
        "timestamp": float(r["timestamp"]),
        "text": str(r["content"]),
        "text_hash": text_hash(str(r["content"])),
        "vector": vector,
    }


def embed_turns(
    rows: list[dict[str, Any]], embedder: Embedder, contexts: dict[str, str], stop: threading.Event
) -> list[dict[str, Any]]:
    """Embed ``rows`` ``EMBED_CHUNK`` at a time; raises ``IndexerStopping`` once ``stop`` is set."""
    if not rows:
        return []
    texts = [embed_text(r, contexts) for r in rows]
    vectors: list[Any] = []
    for i in range(0, len(texts), EMBED_CHUNK):
        if stop.is_set():
            raise IndexerStopping(f"stopped with {len(texts) - i} of {len(texts)} turns of a batch left")
        vectors.extend(embedder.embed(texts[i : i + EMBED_CHUNK]))
    return [lance_row(r, v) for r, v in zip(rows, vectors, strict=True)]
