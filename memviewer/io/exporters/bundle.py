"""A session bundle: the rows one exporter needs, loaded one session at a time.

Exports iterate sessions page by page and load a single session's episodes and
turns at a time, so memory stays flat however many sessions are exported.
Redaction is applied to a copy of the bundle, never to the store: content,
metadata values, titles and tool-call arguments are masked; ids that carry
personal data (an e-mail as ``scope_id``/``user_id``, or inside a session,
episode or turn id or a lineage key) become stable pseudonyms, the same
wherever the id appears (``memviewer.io.redact``). Plain ids, tool-call ids
(provider-made, never personal) and timestamps stay as they are.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from memviewer.store import repos
from memviewer.store.db import Connection

PAGE = 200


@dataclass
class Bundle:
    session: dict[str, Any]  # the sessions row
    episodes: list[dict[str, Any]]  # episode rows, by start time
    turns: list[dict[str, Any]]  # turn rows in projection order (archived first)
    # The user's tags and notes: {session or turn id: {"tags": [...], "note": str | None}}.
    annotations: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The session's LLM calls, messages expanded (``store.llm_calls.expand``), in call order.
    llm_calls: list[dict[str, Any]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return str(self.session["id"])


def load_bundle(conn: Connection, session_id: str) -> Bundle | None:
    row = repos.get_session(conn, session_id)
    if row is None:
        return None
    from memviewer.session import annotations

    marks = annotations.safe_read(conn, annotations.of_session, session_id, default={}) or {}
    return Bundle(
        row,
        repos.session_episodes(conn, session_id),
        repos.session_turns(conn, session_id),
        marks,
        _llm_calls(conn, session_id),
    )


def _llm_calls(conn: Connection, session_id: str) -> list[dict[str, Any]]:
    from memviewer.store import llm_calls

    try:
        return [llm_calls.expand(conn, r) for r in llm_calls.session_calls(conn, session_id)]
    except Exception as exc:  # a read-only store of an older schema has no calls
        if "llm_calls" not in str(exc):
            raise
        return []


def missing_ids(conn: Connection, ids: Sequence[str]) -> list[str]:
    found = repos.existing_session_ids(conn, ids)
    return [i for i in ids if i not in found]


def all_session_ids(store: Any) -> Iterator[str]:
    """Every session id, oldest first, by keyset pages (no OFFSET, no full list in memory)."""
    last: tuple[float, str] | None = None
    while True:
        with store.read() as conn:
            page = repos.session_keys_after(conn, last, PAGE)
        if not page:
            return
        yield from (sid for _, sid in page)
        last = page[-1]


def _redact_tool_calls(calls: Any, redactor: Any) -> Any:
    """Mask tool-call arguments; call ids, types and function names stay readable."""
    if not isinstance(calls, list):
        return redactor.redact_obj(calls)
    out = []
    for call in calls:
        if isinstance(call, dict):
            call = dict(call)
            fn = call.get("function")
            if isinstance(fn, dict):
                fn = dict(fn)
                if "arguments" in fn:
                    fn["arguments"] = redactor.redact_obj(fn["arguments"])
                call["function"] = fn
            for key in ("arguments", "args", "input"):
                if key in call:
                    call[key] = redactor.redact_obj(call[key])
        out.append(call)
    return out


_KEEP_PRAISONAI = ("created_at", "updated_at")  # timestamps stay verbatim
# Session columns holding ids, and the pseudonym prefix for each. Session references share
# "session" so that root/parent ids keep pointing at the (pseudonymised) session id.
_ID_COLUMNS = (
    ("id", "session"),
    ("lineage_id", "lineage"),
    ("root_session_id", "session"),
    ("thread_id", "thread"),
    ("parent_session_id", "session"),
)


def _redact_praisonai(kept: dict[str, Any], redactor: Any) -> dict[str, Any]:
    """The imported file's own fields: its ``user_id`` is the session's user scope id."""
    return {
        k: v
        if k in _KEEP_PRAISONAI
        else redactor.redact_id(v, "user")
        if k == "user_id"
        else redactor.redact_obj(v)
        for k, v in kept.items()
    }


def redact_bundle(bundle: Bundle, redactor: Any) -> Bundle:
    session = dict(bundle.session)
    for column, prefix in _ID_COLUMNS:
        session[column] = redactor.redact_id(session.get(column), prefix)
    # The pseudonym names the scope ("user-…"), so a user id pseudonymised here and as the
    # PraisonAI user_id above come out the same.
    session["scope_id"] = redactor.redact_id(session.get("scope_id"), str(session.get("scope") or "id"))
    session["title"] = redactor.redact(session["title"] or "")
    session["agent"] = redactor.redact(session.get("agent") or "")  # a label, but free text
    meta = session.get("meta")
    if isinstance(meta, dict):
        session["meta"] = {
            k: _redact_praisonai(v, redactor)
            if k == "praisonai" and isinstance(v, dict)
            else redactor.redact_obj(v)
            for k, v in meta.items()
        }
    sid = session["id"]
    episodes = [
        {
            **e,
            "id": redactor.redact_id(e["id"], "episode"),
            "session_id": sid,
            "meta": redactor.redact_obj(e["meta"]),
        }
        for e in bundle.episodes
    ]
    turns = [
        {
            **t,
            "id": redactor.redact_id(t["id"], "turn"),
            "session_id": sid,
            "episode_id": redactor.redact_id(t["episode_id"], "episode"),
            "content": redactor.redact(t["content"] or ""),
            "meta": redactor.redact_obj(t["meta"]),
            "tool_calls": _redact_tool_calls(t["tool_calls"], redactor),
        }
        for t in bundle.turns
    ]
    kinds = {bundle.id: "session"}
    marks = {
        redactor.redact_id(tid, kinds.get(tid, "turn")): {
            "tags": [redactor.redact(t) for t in mark.get("tags") or []],
            "note": None if mark.get("note") is None else redactor.redact(mark["note"]),
        }
        for tid, mark in bundle.annotations.items()
    }
    calls = [
        {
            **c,
            "session_id": sid,
            "episode_id": redactor.redact_id(c["episode_id"], "episode"),
            "input": redactor.redact_obj(c["input"]),
            "output": redactor.redact_obj(c["output"]),
            "raw_input": None if c["raw_input"] is None else redactor.redact(c["raw_input"]),
            "raw_output": None if c["raw_output"] is None else redactor.redact(c["raw_output"]),
            "in_prompt": None
            if c["in_prompt"] is None
            else [redactor.redact_id(i, "turn") for i in c["in_prompt"]],
            "meta": redactor.redact_obj(c["meta"]),
        }
        for c in bundle.llm_calls
    ]
    return Bundle(session, episodes, turns, marks, calls)
