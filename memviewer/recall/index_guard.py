"""Recall on a vector index that lost rows or cannot be read: never a traceback.

``MemoryService.recall`` (and so the CLI, the hub's ``recall`` method, the viewer's
Recall screen and the MCP ``recall`` tool) runs recall through ``guarded_recall``:

* the index **cannot be queried** (its ``_indices`` files deleted, a damaged table):
  the answer is the keyword index's best turns (SQLite FTS5, which covers every stored
  turn), marked ``score_breakdown: {"keyword_only": …}``, with the escalation
  ``index:damaged`` and ``diagnostics.index_damage = {"error", "fallback": "keyword",
  "hint"}``;
* the index **lost rows** below its watermark or summaries (``memviewer.index.integrity``'s
  quick check, cached): ``index:incomplete``, and keyword hits on turns the index lacks
  are added the same way; rows SQLite does not have: ``index:ahead``; an index whose
  files are gone but which still answered: ``index:damaged``. The verdict is in
  ``diagnostics.index_integrity``.

Turns above the watermark (an import still being embedded) stay the business of
``memviewer.recall.lagging`` (``index:lagging``). Invalid parameters still raise
``MemviewerError``: only failures of the index itself fall back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memviewer.errors import MemviewerError
from memviewer.index.integrity import INDEX_DAMAGED, recall_check
from memviewer.params import DEFAULT_TOP_K
from memviewer.present.index_words import DAMAGE_HINT, damage_message
from memviewer.recall.lagging import add_lag

if TYPE_CHECKING:
    from memviewer.index.parts import IndexParts
    from memviewer.present.index_words import Embedding

log = logging.getLogger("memviewer.recall")


def _fallback(query: str, params: dict[str, Any], started: float) -> dict[str, Any]:
    """An empty recall answer in the documented shape; keyword results are added after."""
    return {
        "query": query,
        "scope": params.get("scope") or None,
        "scope_id": params.get("scope_id") or None,
        "results": [],
        "diagnostics": {
            "mode": params.get("mode") or "hierarchical",
            "escalations": [],
            "stage1": [],
            "stage2_candidates": 0,
            "post_filter": 0,
            "reranked": False,
            "timings_ms": {"total": round((time.perf_counter() - started) * 1000, 3)},
            "dropped": [],
            "capped": [],
        },
    }


def _who(parts: IndexParts) -> Callable[[], Embedding]:
    """Who embeds the home: this process when it runs the home's background indexer (the
    hub's own recall), else whatever ``who_embeds`` finds."""

    def ask() -> Embedding:
        from memviewer.wire.embedding import who_embeds

        try:
            here = parts.lance.owns()
        except Exception:  # noqa: BLE001 - an index that cannot even open indexes nothing here
            here = False
        return who_embeds(parts.settings, in_process=here)

    return ask


def guarded_recall(
    parts: IndexParts,
    home: Path,
    search: Callable[..., dict[str, Any]],
    query: str,
    params: dict[str, Any],
    run: Callable[..., dict[str, Any]],
) -> dict[str, Any]:
    """``run(parts, query, **params)`` with the lag, integrity and damage handling above."""
    started = time.perf_counter()
    damage: str | None = None
    try:
        out = run(parts, query, **params)
    except MemviewerError:
        raise
    except Exception as exc:  # the index itself failed: answer from the keyword index
        damage = damage_message(exc)
        log.warning("recall could not query the vector index (%s); answering with keyword results", damage)
        out = _fallback(query, params, started)
    health = recall_check(parts.lance, parts.store)
    absent: Callable[[list[str]], set[str]] | None = None
    if damage is not None:
        absent = set  # every keyword hit is a result: the vector side gave none
    elif health is not None and health.turns.missing > 0:

        def absent(ids: list[str]) -> set[str]:
            from memviewer.index.lance import TURNS

            try:
                return set(ids) - parts.lance.present(TURNS, "turn_id", ids)
            except Exception:  # noqa: BLE001 - a lookup that fails adds no keyword results
                return set()

    out = add_lag(parts.store, home, search, query, out, params, absent=absent, embedding=_who(parts))
    diagnostics = out.setdefault("diagnostics", {})
    escalations = diagnostics.setdefault("escalations", [])
    if health is not None and not health.ok:
        escalations.extend(e for e in health.escalations() if e not in escalations)
        diagnostics["index_integrity"] = health.public()
    if damage is not None:
        if INDEX_DAMAGED not in escalations:
            escalations.append(INDEX_DAMAGED)
        diagnostics["index_damage"] = {"error": damage, "fallback": "keyword", "hint": DAMAGE_HINT}
        top_k = int(params.get("top_k") or DEFAULT_TOP_K)
        out["results"] = sorted(out.get("results", []), key=lambda r: -float(r["score"]))[:top_k]
        diagnostics["timings_ms"] = {"total": round((time.perf_counter() - started) * 1000, 3)}
    return out
