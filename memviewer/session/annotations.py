"""Tags and notes on sessions and turns: checks, writes and the search hook.

A tag is a short lower-case label (``bug``, ``needs-review``: letters, digits and
``- _ . / :``, at most ``MAX_TAG`` characters); a target has any number of tags and at
most one note (free text, at most ``MAX_NOTE`` characters). A target is a session id or
a turn id; an unknown id is ``not_found``.

Annotations are the user's, not memory: writing one appends no event and never
touches the indexes. Like golden sets, a read-only service (a viewer or CLI beside a
running hub) opens the store writable for just that write; SQLite serialises writers.

Search: ``tag:NAME`` words in a keyword query (``split_query``) restrict the hits to
sessions that carry the tag or hold a turn carrying it; a query of only ``tag:`` words
lists the tagged sessions and turns. The rest of a query also matches note text and
tag names (``matches``), reported beside the keyword hits as ``annotations``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, cast

from memviewer.errors import INVALID_ARGUMENT, NOT_FOUND, MemviewerError
from memviewer.store import annotations as rows

MAX_TAG = 64
MAX_NOTE = 4000
MAX_TAGS_PER_TARGET = 50
TAG_RE = re.compile(r"[a-z0-9][a-z0-9_.:/-]*")
_NOTE_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_TAG_WORD = re.compile(r"(?<!\S)tag:(\S*)", re.IGNORECASE)


def check_tag(raw: Any) -> str:
    """The tag as stored (stripped, lower case), or ``invalid_argument`` saying why."""
    if not isinstance(raw, str):
        raise MemviewerError(INVALID_ARGUMENT, f"a tag must be text, not {type(raw).__name__}")
    tag = raw.strip().lower()
    if not tag:
        raise MemviewerError(INVALID_ARGUMENT, "a tag cannot be empty")
    if len(tag) > MAX_TAG:
        raise MemviewerError(INVALID_ARGUMENT, f"a tag has at most {MAX_TAG} characters ({len(tag)} given)")
    if not TAG_RE.fullmatch(tag):
        raise MemviewerError(
            INVALID_ARGUMENT,
            f"tag {raw!r}: use letters, digits and - _ . / : (no spaces), starting with a letter or digit",
        )
    return tag


def check_note(raw: Any) -> str:
    if not isinstance(raw, str):
        raise MemviewerError(INVALID_ARGUMENT, f"a note must be text, not {type(raw).__name__}")
    text = _NOTE_CONTROL.sub("", raw).strip()
    if not text:
        raise MemviewerError(INVALID_ARGUMENT, "a note cannot be empty (remove it instead)")
    if len(text) > MAX_NOTE:
        raise MemviewerError(
            INVALID_ARGUMENT, f"a note has at most {MAX_NOTE} characters ({len(text)} given)"
        )
    return text


def _unknown(target_id: str) -> MemviewerError:
    return MemviewerError(
        NOT_FOUND,
        f"unknown session or turn {target_id!r}",
        hint="`memviewer sessions` lists session ids; `memviewer search` shows turns",
    )


Writer = Callable[[], AbstractContextManager[Any]]
"""Opens one write transaction and yields its connection (``MemoryService.annotation_write``)."""


def _target(conn: Any, target_id: Any) -> tuple[str, str, int | None]:
    if not isinstance(target_id, str) or not target_id.strip():
        raise MemviewerError(INVALID_ARGUMENT, "a session or turn id is required")
    found = rows.find_target(conn, target_id)
    if found is None:
        raise _unknown(target_id)
    return found


def _public(target_id: str, found: tuple[str, str, int | None], have: dict[str, Any]) -> dict[str, Any]:
    kind, sid, idx = found
    out: dict[str, Any] = {"target_id": target_id, "target_kind": kind, "session_id": sid}
    if idx is not None:
        out["index"] = idx
    out["tags"] = list(have.get("tags") or [])
    out["note"] = have.get("note")
    return out


def tag(write: Writer, target_id: str, tags: Sequence[str], *, remove: bool = False) -> dict[str, Any]:
    """Add (or with ``remove`` take away) tags; returns the target's annotations after it
    with ``changed``: the tags that were added or removed."""
    checked = list(dict.fromkeys(check_tag(t) for t in tags))
    if not checked:
        raise MemviewerError(INVALID_ARGUMENT, "give at least one tag")
    with write() as conn:
        found = _target(conn, target_id)
        if remove:
            changed = rows.remove_tags(conn, target_id, checked)
        else:
            have = rows.of_targets(conn, [target_id]).get(target_id, {}).get("tags", [])
            if len(set(have) | set(checked)) > MAX_TAGS_PER_TARGET:
                raise MemviewerError(
                    INVALID_ARGUMENT, f"a session or turn has at most {MAX_TAGS_PER_TARGET} tags"
                )
            changed = rows.add_tags(conn, found[0], target_id, found[1], checked, time.time())
        after = rows.of_targets(conn, [target_id]).get(target_id, {})
    return {**_public(target_id, found, after), "changed": changed}


def note(write: Writer, target_id: str, text: str | None) -> dict[str, Any]:
    """Set a target's note (``None`` removes it); returns its annotations after it with
    ``changed`` (False when there was no note to remove)."""
    checked = None if text is None else check_note(text)
    with write() as conn:
        found = _target(conn, target_id)
        if checked is None:
            changed = rows.remove_note(conn, target_id)
        else:
            rows.set_note(conn, found[0], target_id, found[1], checked, time.time())
            changed = True
        after = rows.of_targets(conn, [target_id]).get(target_id, {})
    return {**_public(target_id, found, after), "changed": changed}


def drop_orphans(conn: Any, session_id: str) -> int:
    return rows.delete_orphans(conn, session_id)


def merge(conn: Any, session_id: str, marks: dict[str, dict[str, Any]]) -> None:
    """Imported annotations of one session (checked already) into the store."""
    now = time.time()
    for target_id, mark in marks.items():
        found = rows.find_target(conn, target_id)
        if found is None or found[1] != session_id:
            continue
        if mark.get("tags"):
            rows.add_tags(conn, found[0], target_id, session_id, mark["tags"], now)
        if mark.get("note") is not None:
            rows.set_note(conn, found[0], target_id, session_id, mark["note"], now)


def _missing_table(exc: Exception) -> bool:
    """A read-only store of an older schema (before migration 7) has no annotations yet."""
    return "annotation_" in str(exc) and "no such table" in str(exc).lower()


def listing(
    store: Any, *, target_id: str | None = None, tag: str | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """Annotated sessions and turns (``target_id``: that one; it must exist)."""
    wanted = None if tag is None else check_tag(tag)
    with store.read() as conn:
        if target_id is not None:
            found = _target(conn, target_id)
            try:
                have = rows.of_targets(conn, [target_id]).get(target_id, {})
            except Exception as exc:
                if not _missing_table(exc):
                    raise
                have = {}
            if wanted is not None and wanted not in (have.get("tags") or []):
                return []
            return [_public(target_id, found, have)]
        listed: list[dict[str, Any]] = (
            safe_read(conn, rows.listing, default=[], tag=wanted, limit=limit) or []
        )
        from memviewer.store import repos

        turns = repos.get_turns(conn, [a["target_id"] for a in listed if a["target_kind"] == "turn"])
        for a in listed:
            if a["target_id"] in turns:
                a["index"] = int(turns[a["target_id"]]["idx"])
        return listed


def safe_read(conn: Any, fn: Any, *args: Any, default: Any = None, **kwargs: Any) -> Any:
    """``fn(conn, *args)``, or ``default`` on a store that has no annotation tables yet."""
    try:
        return fn(conn, *args, **kwargs)
    except Exception as exc:
        if not _missing_table(exc):
            raise
        return default


def session_marks(conn: Any, session_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The keys a sessions-list entry gains when annotated: ``tags`` (the session's own),
    ``note`` (the session's note) and ``annotated_turns`` (its turns with a tag or note);
    each only when non-empty, so an unannotated entry keeps its old shape."""
    out: dict[str, dict[str, Any]] = {}
    summary = rows.session_summary(conn, session_ids)
    notes = rows.of_targets(conn, [sid for sid, v in summary.items() if v["note"]])
    for sid, v in summary.items():
        entry: dict[str, Any] = {}
        if v["tags"]:
            entry["tags"] = v["tags"]
        if sid in notes and notes[sid]["note"]:
            entry["note"] = notes[sid]["note"]
        if v["annotated_turns"]:
            entry["annotated_turns"] = v["annotated_turns"]
        if entry:
            out[sid] = entry
    return out


def of_session(conn: Any, session_id: str) -> dict[str, dict[str, Any]]:
    """``{target id: {"tags", "note"}}`` for a session and its turns."""
    return rows.of_session(conn, session_id)


# -- the search hook -----------------------------------------------------------------------
def split_query(query: str | None) -> tuple[str | None, list[str]]:
    """``("the rest", [tags])`` of a query's ``tag:NAME`` words (the rest None when empty)."""
    if not isinstance(query, str) or "tag:" not in query.lower():
        return query, []
    tags = [m.group(1).strip().lower() for m in _TAG_WORD.finditer(query)]
    rest = _TAG_WORD.sub(" ", query).strip()
    return (rest or None), [t for t in tags if t]


def search(
    keyword: Any,
    store: Any,
    query: str | None,
    params: dict[str, Any],
    annotated: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Keyword search with the annotation hook: ``keyword(query, **params)`` is the plain
    search (``KeywordSearch.search``). Only discovery queries are touched. ``annotated()``
    says whether any tag or note exists (``KeywordSearch.annotated``): when none does,
    no annotation can match and the matching is skipped."""
    text, tags = split_query(query)
    if not tags:
        out = keyword(query=query, **params)
        if (
            out.get("success")
            and out.get("mode") == "discovery"
            and isinstance(query, str)
            and query.strip()
            and (annotated is None or annotated())
        ):
            found = _matches(store, query, int(params.get("limit") or 5))
            if found:
                out["annotations"] = found
        return cast("dict[str, Any]", out)
    for t in tags:
        try:
            check_tag(t)
        except MemviewerError as exc:
            return {
                "success": False,
                "mode": "discovery",
                "error": exc.message,
                "code": exc.code,
                "hint": "search for a tag as tag:NAME, e.g. tag:bug",
            }
    with store.read() as conn:
        targets = safe_read(conn, rows.targets_with_tags, tags, default=[]) or []
    if params.get("session_id"):
        targets = [t for t in targets if t["session_id"] == params["session_id"]]
    limit = int(params.get("limit") or 5)
    window = int(params.get("window") or 0)
    by_session: dict[str, list[dict[str, Any]]] = {}
    for t in targets:
        by_session.setdefault(t["session_id"], []).append(t)
    hits: list[dict[str, Any]] = []
    if text is not None:  # words too: the keyword search inside each tagged session
        for sid in by_session:
            found = keyword(
                query=text,
                session_id=sid,
                limit=1,
                window=window,
                scope=params.get("scope"),
                scope_id=params.get("scope_id"),
            )
            if not found.get("success"):
                return cast("dict[str, Any]", found)
            hits += found.get("results") or []
        hits.sort(key=lambda h: -float(h.get("score") or 0.0))
        total = len(hits)
    else:  # tags only: every tagged turn (and each tagged session at its latest turn)
        hits = _tagged_hits(keyword, store, by_session, window, params)
        total = len(hits)
    return {
        "success": True,
        "mode": "discovery",
        "query": query.strip() if isinstance(query, str) else query,
        "tags": tags,
        "total_found": total,
        "results": hits[:limit],
    }


def _tagged_hits(
    keyword: Any, store: Any, by_session: dict[str, list[dict[str, Any]]], window: int, params: dict[str, Any]
) -> list[dict[str, Any]]:
    from memviewer.store import repos

    hits: list[dict[str, Any]] = []
    with store.read() as conn:
        for sid, targets in by_session.items():
            session = repos.get_session(conn, sid)
            if session is None:
                continue
            if params.get("scope") and session["scope"] != params["scope"]:
                continue
            if params.get("scope_id") and session["scope_id"] != params["scope_id"]:
                continue
            for t in targets:
                idx = None
                content = ""
                ts = session["last_seen_at"]
                if t["target_kind"] == "turn":
                    turn = repos.get_turn(conn, t["target_id"])
                    if turn is None:
                        continue
                    idx, content, ts = int(turn["idx"]), turn["content"] or "", turn["timestamp"]
                hits.append(
                    {
                        "session_id": sid,
                        "title": session["title"],
                        "when": ts,
                        "snippet": content[:200],
                        "score": 1.0,
                        "anchor_index": idx,
                        "target_kind": t["target_kind"],
                        "target_id": t["target_id"],
                    }
                )
    hits.sort(key=lambda h: -float(h["when"] or 0.0))
    from memviewer.timeutil import iso

    for h in hits:
        scroll = keyword(session_id=h["session_id"], around=h["anchor_index"], window=window)
        h["messages"] = scroll.get("messages") or [] if scroll.get("success") else []
        if h["anchor_index"] is None and h["messages"]:
            h["anchor_index"] = h["messages"][-1].get("index")
        h["when"] = iso(h["when"])
    return hits


def _matches(store: Any, query: str, limit: int) -> list[dict[str, Any]]:
    """Notes holding every word of the query, and targets tagged with one of its words."""
    words = [w.strip("\"'") for w in query.split()]
    words = [w for w in words if w and w.upper() not in ("AND", "OR", "NOT")]
    if not words:
        return []
    with store.read() as conn:
        notes = safe_read(conn, rows.notes_matching, words, limit, default=[]) or []
        tagged = safe_read(conn, rows.tags_matching, words, limit, default=[]) or []
        out: dict[str, dict[str, Any]] = {}
        for n in notes:
            out[n["target_id"]] = {
                "target_id": n["target_id"],
                "target_kind": n["target_kind"],
                "session_id": n["session_id"],
                "matched": "note",
            }
        for t in tagged:
            out.setdefault(
                t["target_id"],
                {
                    "target_id": t["target_id"],
                    "target_kind": t["target_kind"],
                    "session_id": t["session_id"],
                    "matched": f"tag:{t['tag']}",
                },
            )
        if not out:
            return []
        have = rows.of_targets(conn, list(out))
        from memviewer.store import repos

        for tid, entry in out.items():
            entry["tags"] = have.get(tid, {}).get("tags", [])
            entry["note"] = have.get(tid, {}).get("note")
            if entry["target_kind"] == "turn":
                turn = repos.get_turn(conn, tid)
                entry["index"] = None if turn is None else int(turn["idx"])
    return list(out.values())[:limit]
