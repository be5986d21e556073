"""Recall on an index that is still catching up (an import that did not wait).

The vector index lags SQLite while a hub or a background indexer embeds what an import
stored. Recall then still answers with what is indexed, says so in its diagnostics
(escalation ``INDEX_LAGGING``, ``diagnostics["index_lag"]``: turns not embedded yet, an
ETA and who embeds them, ``indexer``), and adds the keyword index's best turns among those
not embedded yet after the vector results, marked ``score_breakdown: {"keyword_only": …}``
(SQLite's BM25, not comparable to the vector scores): keyword search covers every stored
turn as soon as it is committed. A lag within the indexer's normal delay (turns published
a moment ago, ``within_grace``) is reported in ``index_lag`` but does not escalate.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memviewer.params import DEFAULT_TOP_K
from memviewer.present.index_words import Embedding

if TYPE_CHECKING:
    from memviewer.store.db import Store

INDEX_LAGGING = "index:lagging"


def add_lag(
    store: Store,
    home: Path,
    search: Callable[..., dict[str, Any]],
    query: str,
    out: dict[str, Any],
    params: dict[str, Any],
    *,
    absent: Callable[[list[str]], set[str]] | None = None,
    embedding: Callable[[], Embedding] | None = None,
) -> dict[str, Any]:
    """``out`` with the lag escalation and keyword results when the index is behind.

    ``search`` is the keyword search to ask (the service's). ``absent`` (given when the
    index lost rows below its watermark, or cannot be queried at all) says which of
    some turn ids the vector index does not hold: keyword hits on those are added too
    (``memviewer.recall.index_guard``). ``embedding`` says who embeds the home
    (``memviewer.wire.embedding.who_embeds``), asked only when turns wait."""
    from memviewer.index.progress import index_lag
    from memviewer.store import repos
    from memviewer.store.index_progress import turns_at

    with store.read() as conn:
        lag = index_lag(home, conn)
    if lag["lag"] <= 0 and absent is None:
        return out
    diagnostics = out.setdefault("diagnostics", {})
    if lag["lag"] > 0:
        if not lag["within_grace"]:
            diagnostics.setdefault("escalations", []).append(INDEX_LAGGING)
        who = embedding() if embedding is not None else Embedding(None)
        diagnostics["index_lag"] = {
            **{k: lag[k] for k in ("lag", "eta_s", "rate_turns_s", "waiting_s", "within_grace")},
            **who.public(),
        }
    top_k = int(params.get("top_k") or DEFAULT_TOP_K)
    found = search(query, limit=top_k, window=0, scope=params.get("scope"), scope_id=params.get("scope_id"))
    hits = found.get("results") or [] if found.get("success") else []
    keys = [(h["session_id"], int(h["anchor_index"])) for h in hits]
    with store.read() as conn:
        turns = turns_at(conn, keys)
    have = {r.get("turn_id") for r in out.get("results", [])}
    below = [r["id"] for r in turns.values() if int(r["num"]) <= lag["turn_num"]]
    lost = absent(below) if absent is not None and below else set()
    added = 0
    for hit, key in zip(hits, keys, strict=True):
        row = turns.get(key)
        if row is None or row["id"] in have:
            continue
        if int(row["num"]) <= lag["turn_num"] and row["id"] not in lost:
            continue  # embedded turns are the vector search's to rank
        have.add(row["id"])
        pub = repos.turn_public(row)
        out.setdefault("results", []).append(
            {
                "turn_id": pub["turn_id"],
                "session_id": pub["session_id"],
                "episode_id": pub["episode_id"],
                "index": pub["index"],
                "role": pub["role"],
                "content": pub["content"],
                "archived": pub["archived"],
                "timestamp": pub["timestamp"],
                "score": float(hit["score"]),
                "score_breakdown": {"keyword_only": float(hit["score"])},
                "metadata": row["meta"] if row["meta"] is not None else {},
            }
        )
        if params.get("with_tool_calls") and row["tool_calls"]:  # like recall's own rows
            out["results"][-1]["tool_calls"] = row["tool_calls"]
        added += 1
    if lag["lag"] > 0:
        diagnostics["index_lag"]["keyword_results"] = added
    return out
