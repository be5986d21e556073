"""The texts a chat turn could be embedded with (issue 16, fourth round): the rules measured by
``bench/chat_context_variants.py``. None was adopted (docs/benchmarks.md, "Contextual text for
chat turns"), so they live here, not in the indexer.

A *chat turn* carries its author in ``metadata.speaker`` (the mark the chat rules of recall and
the chat summaries use); any other turn is returned unchanged by every rule. ``prev`` / ``nxt``
are ``(author, content)`` of the turns just before and after it in its session.

=============  ====================================================================
rule           text embedded for a chat turn
=============  ====================================================================
``off``        the message (what the indexer embeds today)
``author``     ``<author>: <message>``
``prev``       ``<prev author>: <prev message, ≤ PREV_CHARS>`` newline ``<author>: <message>``
``prev_brief`` ``prev`` with the previous message cut to 80 characters
``prev_next``  ``prev`` plus ``<next author>: <next message, ≤ PREV_CHARS>``
``prev_short`` ``prev`` for a message of ≤ ``short_words`` words, else ``author``
``ctx_plain``  ``<prev message, ≤ PREV_CHARS>`` newline ``<message>`` (no names)
``short_plain`` ``ctx_plain`` for a message of ≤ ``short_words`` words, else the message
=============  ====================================================================
"""

from __future__ import annotations

from typing import Any

from memviewer.store.speakers import author_of

PREV_CHARS = 200
SHORT_WORDS = 12
RULES = ("off", "author", "prev", "prev_brief", "prev_next", "prev_short", "ctx_plain", "short_plain")

Near = tuple[str | None, str]


author = author_of  # the summarizer's and recall's reading of metadata.speaker, so all agree


def _line(who: str | None, text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return f"{who}: {text}" if who else text


def embed_text(
    content: str,
    who: str | None,
    prev: Near | None = None,
    nxt: Near | None = None,
    rule: str = "off",
    short_words: int = SHORT_WORDS,
) -> str:
    """The text to embed for one turn whose author is ``who`` (None: returned unchanged)."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; one of {', '.join(RULES)}")
    if who is None or rule == "off":
        return content
    short = len(content.split()) <= short_words
    has_prev = prev is not None and bool(prev[1].strip())
    if rule in ("ctx_plain", "short_plain"):
        if not has_prev or (rule == "short_plain" and not short):
            return content
        assert prev is not None
        return _line(None, prev[1], PREV_CHARS) + "\n" + content
    own = f"{who}: {content}"
    if rule == "author" or (rule == "prev_short" and not short):
        return own
    lines = []
    if has_prev:
        assert prev is not None
        lines.append(_line(prev[0], prev[1], 80 if rule == "prev_brief" else PREV_CHARS))
    lines.append(own)
    if rule == "prev_next" and nxt is not None and nxt[1].strip():
        lines.append(_line(nxt[0], nxt[1], PREV_CHARS))
    return "\n".join(lines)


def neighbours(rows: list[dict[str, Any]]) -> dict[tuple[str, int], Near]:
    """``(session_id, idx) -> (author, content)`` of turns read with ``meta`` and ``idx``."""
    return {(r["session_id"], int(r["idx"])): (author(r.get("meta")), str(r["content"])) for r in rows}
