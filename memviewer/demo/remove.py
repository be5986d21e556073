"""Which sessions of a home the demo made (``memviewer demo --remove`` deletes exactly those).

The scenario's sessions have fixed ids (``scenario.session_ids``); ``demo --live`` mints
fresh ids, so its sessions are known by their agent name and ``meta`` mark
(``live.LIVE_AGENTS``, ``live.LIVE_MARK``). A session of the user's own agents matches
neither, even one whose meta happens to carry a ``demo`` key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memviewer.demo.live import LIVE_AGENTS, LIVE_MARK
from memviewer.demo.scenario import session_ids
from memviewer.store import repos

if TYPE_CHECKING:
    from memviewer.store.db import Connection


def is_demo_session(row: dict[str, Any], scenario_ids: set[str]) -> bool:
    """A scenario session (by id), or one the live agent opened (agent name and mark)."""
    if row["id"] in scenario_ids:
        return True
    meta = row.get("meta") or {}
    return row.get("agent") in LIVE_AGENTS and all(meta.get(k) == v for k, v in LIVE_MARK.items())


def demo_sessions(conn: Connection) -> list[dict[str, Any]]:
    """The demo's sessions stored in this home (``id``, ``agent``, ``title``, ``meta``), oldest
    first."""
    ids = set(session_ids())
    (key,) = LIVE_MARK
    rows = repos.sessions_by_id_or_meta_key(conn, sorted(ids), key)
    return [r for r in rows if is_demo_session(r, ids)]
