"""A whole-session import (``SessionManager.import_session``): what it writes is worked out
first (``ImportPlan``), then written in one transaction.

The plan compares the file's session, episodes and turns with the stored ones, so a refused
import (a turn of another session, an unknown episode) writes nothing, and an unchanged file
is seen as such (``changes``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memviewer.errors import CONFLICT, INVALID_ARGUMENT, MemviewerError
from memviewer.logctx import log_context
from memviewer.session.importcheck import (
    EPISODE_DEFAULTS,
    check_import,
    is_foreign,
    live_turns_since_import,
    live_turns_would_go,
    prior_origin,
    session_exists,
    stored_turn,
)
from memviewer.store import import_pages, repos
from memviewer.store.db import Store, WriteTx
from memviewer.timeutil import now


@dataclass
class ImportPlan:
    """What ``import_session`` writes: computed first, so a refused import writes nothing."""

    session_changes: dict[str, Any]
    new_episodes: list[dict[str, Any]]
    episode_updates: dict[str, dict[str, Any]]
    removed_episodes: list[str]
    new_turns: list[dict[str, Any]]
    turn_updates: dict[str, dict[str, Any]]
    removed_turns: list[str]
    kept_turns: int = 0  # stored turns the file no longer holds, kept (``keep_missing``)

    @property
    def changes(self) -> bool:
        return any(
            (
                self.session_changes,
                self.new_episodes,
                self.episode_updates,
                self.removed_episodes,
                self.new_turns,
                self.turn_updates,
                self.removed_turns,
            )
        )

    @classmethod
    def build(
        cls,
        tx: WriteTx,
        sid: str,
        existing: dict[str, Any] | None,
        row: dict[str, Any],
        turns: list[dict[str, Any]],
        episodes: list[dict[str, Any]],
        *,
        keep_missing: bool = False,
    ) -> ImportPlan:
        conn = tx.conn
        session_changes = {k: v for k, v in row.items() if k != "id" and existing[k] != v} if existing else {}
        have_eps = {e["id"]: e for e in repos.session_episodes(conn, sid)} if existing else {}
        new_episodes: list[dict[str, Any]] = []
        episode_updates: dict[str, dict[str, Any]] = {}
        for ep in episodes:
            values = {
                k: EPISODE_DEFAULTS[k] if v is None and k in EPISODE_DEFAULTS else v for k, v in ep.items()
            }
            values = {**EPISODE_DEFAULTS, **values, "session_id": sid}  # NOT NULL columns filled
            old = have_eps.get(ep["id"])
            if old is None:
                other = repos.get_episode(conn, ep["id"])
                if other is not None:
                    raise MemviewerError(
                        CONFLICT, f"episode {ep['id']} belongs to session {other['session_id']}"
                    )
                new_episodes.append(values)
            elif any(old.get(k) != v for k, v in values.items()):
                episode_updates[ep["id"]] = {k: v for k, v in values.items() if k != "id"}
        known_eps = {e["id"] for e in episodes} | set(have_eps)
        have = {r["id"]: r for r in repos.session_turns(conn, sid)} if existing else {}
        fresh = [x["id"] for x in turns if x["id"] not in have]
        for tid, other in repos.get_turns(conn, fresh).items():
            raise MemviewerError(CONFLICT, f"turn {tid} belongs to session {other['session_id']}")
        new_turns: list[dict[str, Any]] = []
        turn_updates: dict[str, dict[str, Any]] = {}
        kept = {x["id"] for x in turns}
        missing = [r for r in have.values() if r["id"] not in kept] if keep_missing else []
        order = merged_order(list(have.values()), turns, kept) if missing else None
        for pos, turn in enumerate(turns):
            if turn.get("episode_id") is not None and turn["episode_id"] not in known_eps:
                raise MemviewerError(
                    INVALID_ARGUMENT,
                    f"turn {turn['id']}: episode {turn['episode_id']} is not in session {sid}",
                )
            values = stored_turn(
                turn, sid, turn.get("episode_id"), pos if order is None else order[turn["id"]]
            )
            old = have.get(turn["id"])
            if old is None:
                new_turns.append({"id": turn["id"], **values})
            elif any(old[k] != v for k, v in values.items()):
                turn_updates[turn["id"]] = values
        for old in missing:  # out of PraisonAI's window: kept, as archived turns
            assert order is not None
            values = {"idx": order[old["id"]], "archived": True, "is_compaction_summary": False}
            if any(old[k] != v for k, v in values.items()):
                turn_updates[old["id"]] = values
        if keep_missing:
            kept |= set(have)
        used_eps = {e["id"] for e in episodes} | {x.get("episode_id") for x in turns}
        used_eps |= {r.get("episode_id") for r in missing}
        return cls(
            session_changes=session_changes,
            new_episodes=new_episodes,
            episode_updates=episode_updates,
            removed_episodes=[e for e in have_eps if e not in used_eps],
            new_turns=new_turns,
            turn_updates=turn_updates,
            removed_turns=[tid for tid in have if tid not in kept],
            kept_turns=len(missing),
        )

    def apply(self, tx: WriteTx) -> None:
        conn = tx.conn
        import_pages.delete_turns(conn, self.removed_turns)
        import_pages.delete_episodes(conn, self.removed_episodes)
        for values in self.new_episodes:
            repos.insert_episode(conn, values)
        for eid, values in self.episode_updates.items():
            repos.update_episode(conn, eid, **values)
        for tid, values in self.turn_updates.items():
            repos.update_turn(conn, tid, **values)
        repos.insert_turns(conn, self.new_turns)


def merged_order(
    stored: list[dict[str, Any]], turns: list[dict[str, Any]], in_file: set[str]
) -> dict[str, int]:
    """Positions when stored turns the file no longer holds are kept (``keep_missing``):
    the file's turns in the file's order, each kept turn right after the nearest turn
    before it (in the stored order) that the file still holds, or first when there is none
    (the turns PraisonAI's window dropped from its head stay at the head)."""
    after: dict[str | None, list[str]] = {}
    anchor: str | None = None
    for row in sorted(stored, key=lambda r: (r["idx"], r["num"])):
        if row["id"] in in_file:
            anchor = row["id"]
        else:
            after.setdefault(anchor, []).append(row["id"])
    ids = list(after.get(None, []))
    for turn in turns:
        ids.append(turn["id"])
        ids.extend(after.get(turn["id"], []))
    return {tid: i for i, tid in enumerate(ids)}


def write_session_row(
    tx: WriteTx, row: dict[str, Any], existing: dict[str, Any] | None, changes: dict[str, Any], ts: float
) -> None:
    """An imported session's row: inserted with its ``session.started`` event (marked
    ``imported``), or the changed columns updated (the whole-session and the chunked import)."""
    if existing is None:
        repos.insert_session(tx.conn, row)
        started = {k: row[k] for k in ("agent", "scope", "scope_id", "title", "source")}
        tx.append_event("session.started", row["id"], None, {**started, "imported": True}, ts=ts)
    elif changes:
        repos.update_session(tx.conn, row["id"], **changes)


def import_session(
    store: Store,
    import_row: Callable[[dict[str, Any], float], dict[str, Any]],
    session: dict[str, Any],
    turns: list[dict[str, Any]],
    episodes: list[dict[str, Any]] | None = None,
    *,
    origin: str | None = None,
    replace: bool = False,
    keep_missing: bool = False,
) -> dict[str, Any]:
    """``SessionManager.import_session`` (whose docstring states the rules): check, plan, write."""

    check_import(session, turns, episodes)
    sid: str = session["id"]
    t = now()
    with log_context(session_id=sid), store.write() as tx:
        existing = repos.get_session(tx.conn, sid)
        row = import_row(session, t)
        plan = ImportPlan.build(tx, sid, existing, row, turns, episodes or [], keep_missing=keep_missing)
        prior = prior_origin(tx.conn, sid) if existing is not None else None
        foreign = is_foreign(prior, origin)
        result = {
            "session_id": sid,
            "created": existing is None,
            "turns": len(turns),
            "new_turns": len(plan.new_turns),
            "updated_turns": len(plan.turn_updates),
            "removed_turns": len(plan.removed_turns),
            "kept_turns": plan.kept_turns,
            "archived_turns": sum(1 for x in turns if x.get("archived")),
        }
        if foreign and not plan.changes:
            return result  # an identical copy from elsewhere: nothing to do, origin kept
        if foreign and not replace:
            raise session_exists(sid, prior)
        if existing is not None and not replace and plan.removed_turns:
            live = live_turns_since_import(tx.conn, sid)
            if live:  # the file is the record, but these turns were never in it
                raise live_turns_would_go(sid, live)
        write_session_row(tx, row, existing, plan.session_changes, t)
        plan.apply(tx)
        tx.append_event(
            "session.imported",
            sid,
            None,
            {
                "turns": len(turns),
                "new_turns": len(plan.new_turns),
                "updated_turns": len(plan.turn_updates),
                "removed_turns": len(plan.removed_turns),
                "kept_turns": plan.kept_turns,
                "archived_turns": result["archived_turns"],
                "source": row["source"],
                "origin": origin,
                "replaced": prior if foreign else None,
            },
            ts=t,
        )
        return result
