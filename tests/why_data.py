"""Hand-built memory for the why-not, A/B and golden-set tests: a dentist session whose
turns all match the query, a garden session with one dentist turn after six off-topic
ones, a Lisbon session, and one session in another scope."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

QUERY = "dentist appointment"
SCOPE = {"scope": "user", "scope_id": "u1"}


def add(svc: Any, sid: str, texts: Sequence[str], scope_id: str = "u1") -> list[str]:
    """One session of one episode (user, then alternating roles); its turn ids in order."""
    svc.open_session(session_id=sid, agent="agent", scope="user", scope_id=scope_id)
    ep = svc.start_episode(sid, texts[0])
    for i, text in enumerate(texts[1:]):
        svc.add_turn(ep["episode_id"], "assistant" if i % 2 else "user", text)
    svc.finalize_episode(ep["episode_id"])
    return [t["turn_id"] for t in svc.session(sid)["turns"]]


def build(service: Any) -> dict[str, Any]:
    turns = {
        "dentist": add(
            service,
            "s-dentist",
            [
                "My dentist appointment with Dr Alvarez is on Friday",
                "The dentist appointment said my molar needs a crown",
                "I moved the dentist appointment to Monday",
                "dentist appointment bill paid",
                "dentist appointment parking is free",
            ],
        ),
        "garden": add(
            service,
            "s-garden",
            [
                "I planted tomatoes and basil in the garden",
                "Slugs are eating my garden lettuce",
                "The garden hose leaks",
                "garden fence painted",
                "compost heap is warm",
                "new rake for the garden",
                "The dentist reminder card is pinned in the garden shed",
            ],
        ),
        "lisbon": add(
            service,
            "s-lisbon",
            [
                "We booked a flight to Lisbon",
                "The Lisbon hotel is near the river",
                "Travel insurance covers the Lisbon trip",
            ],
        ),
        "elsewhere": add(service, "s-bob", ["bob's dentist appointment is in May"], scope_id="bob"),
    }
    service.sync_index()
    return {"svc": service, "turns": turns}


def ids(out: dict[str, Any]) -> list[str]:
    return [r["turn_id"] for r in out["results"]]
