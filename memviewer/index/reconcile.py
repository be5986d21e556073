"""Bring the index rows of turns that were already embedded in step with SQLite.

A compaction archives turns, a re-import may change a session's text, flags or scope,
a deletion removes it: the turns are re-read from SQLite, so the index follows the
current state whatever order the events arrived in. Only what differs is written: a
changed text is embedded again, changed flags keep the vector, and an archive flip alone
is one update.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memviewer.index.lance import TURNS, in_filter, sql_str
from memviewer.index.turn_rows import lance_flags, lance_row, text_hash
from memviewer.store import indexing

if TYPE_CHECKING:
    from memviewer.index.pass_context import PassContext

#: Turns of one session compared with the index (text read, re-embedded when changed) at a
#: time when a session is reconciled (a re-import, a deletion), so a huge changed session
#: costs one page of memory; ids are looked up in the index ``LOOKUP_CHUNK`` at a time.
RECONCILE_PAGE = 2048
LOOKUP_CHUNK = 500

_COMPARED = [
    "turn_id",
    "scope",
    "scope_id",
    "role",
    "archived",
    "is_summary",
    "text_hash",
    "episode_id",
    "timestamp",
]


def reconcile(p: PassContext, session_id: str, turn_ids: list[str] | None, watermark: int) -> int:
    """Make LanceDB's rows for these turns (or, with None, the whole session) match SQLite.

    At most ``RECONCILE_PAGE`` turns are read (with their text) and re-embedded at a
    time, so a re-import that changed a session of a million turns costs the memory
    of one page, not of the session. Returns how many index rows changed.
    """
    if turn_ids is None:
        return _reconcile_session(p, session_id, watermark)
    changed = 0
    for i in range(0, len(turn_ids), RECONCILE_PAGE):
        with p.store.read() as conn:
            rows = indexing.session_turns_by_id(conn, session_id, turn_ids[i : i + RECONCILE_PAGE], watermark)
        changed += _reconcile_rows(p, session_id, rows)
    return changed


def _reconcile_session(p: PassContext, session_id: str, watermark: int) -> int:
    """The whole session, in pages: first the index rows SQLite no longer has, then SQLite's turns.

    SQLite's turns are read ``RECONCILE_PAGE`` at a time by ``num`` (the session index
    keeps them in that order).
    """
    changed = _drop_stale(p, session_id, watermark)
    after = 0
    while True:
        with p.store.read() as conn:
            rows = indexing.session_turns_page(conn, session_id, after, watermark, RECONCILE_PAGE)
        if not rows:
            return changed
        after = int(rows[-1]["num"])
        changed += _reconcile_rows(p, session_id, rows)


def _drop_stale(p: PassContext, session_id: str, watermark: int) -> int:
    """Delete the session's index rows whose turn SQLite no longer has (up to the watermark).

    The index's ids of the session are streamed (``LanceIndex.id_batches``) and looked up
    in SQLite a chunk at a time.
    """
    stale: list[str] = []
    for chunk in p.index.id_batches(TURNS, "turn_id", f"session_id = {sql_str(session_id)}"):
        with p.store.read() as conn:
            known = indexing.known_session_turn_ids(conn, session_id, watermark, chunk)
        stale.extend(tid for tid in chunk if tid not in known)
    if stale:
        p.index.delete_turns(stale)
    return len(stale)


def _indexed(p: PassContext, session_id: str, ids: list[str]) -> dict[str, dict[str, Any]]:
    """The index's compared columns of these turns, by id, ``LOOKUP_CHUNK`` ids per query."""
    found: dict[str, dict[str, Any]] = {}
    for i in range(0, len(ids), LOOKUP_CHUNK):
        where = f"session_id = {sql_str(session_id)} AND " + in_filter("turn_id", ids[i : i + LOOKUP_CHUNK])
        found.update((r["turn_id"], r) for r in p.index.rows(TURNS, where, _COMPARED))
    return found


def _reconcile_rows(p: PassContext, session_id: str, rows: list[dict[str, Any]]) -> int:
    """Bring the index rows of these SQLite turns (one page of one session) in step."""
    if not rows:
        return 0
    lance = _indexed(p, session_id, [r["id"] for r in rows])
    re_embed: list[dict[str, Any]] = []
    re_flag: list[dict[str, Any]] = []
    archive_on: list[str] = []
    archive_off: list[str] = []
    for row in rows:
        tid = row["id"]
        have = lance.get(tid)
        if have is None or have["text_hash"] != text_hash(str(row["content"])):
            re_embed.append(row)
            continue
        target = lance_flags(row)
        diff = {k for k, v in target.items() if have.get(k) != v}
        if diff == {"archived"}:
            (archive_on if target["archived"] else archive_off).append(tid)
        elif diff:
            re_flag.append(row)
    if archive_on:
        p.index.set_archived(archive_on, True)
    if archive_off:
        p.index.set_archived(archive_off, False)
    if re_flag:
        vectors = p.index.vectors(TURNS, "turn_id", [r["id"] for r in re_flag])
        p.index.upsert_turns([lance_row(r, vectors[r["id"]]) for r in re_flag])
    if re_embed:
        p.index.upsert_turns(p.embed(re_embed))
    return len(re_embed) + len(re_flag) + len(archive_on) + len(archive_off)
