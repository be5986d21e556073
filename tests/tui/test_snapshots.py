"""SVG snapshots of the main screens at 120x36 over the fixed fixture memory.

Dates are absolute, ids fixed, the event-rate clock frozen, cursors do not
blink: the pictures only change when the UI does. Update with
``pytest tests/tui/test_snapshots.py --snapshot-update`` after checking the diff.
"""

from __future__ import annotations

from textual.widgets import Input
from tui_helpers import wait_for_workers, wait_until

from memviewer.tui.live_feed import LiveFeed
from memviewer.tui.messages import Loaded
from memviewer.tui.screens.session import SessionScreen

SIZE = (120, 36)


async def _settle(pilot) -> None:
    # the header's lag line (nothing embeds the fixture's turns) comes from a long-lived worker
    await wait_until(pilot, lambda: pilot.app.index_lag is not None, what="the first lag reading")
    await wait_for_workers(pilot)
    for widget in pilot.app.screen.query(Input):
        widget.cursor_blink = False
    await pilot.pause()


def test_sessions_screen(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=_settle)


def test_session_screen_archived_and_active_side_by_side(snap_compare, make_app) -> None:
    async def before(pilot) -> None:
        pilot.app.push_screen(SessionScreen("s-research", view="both"))
        await wait_until(pilot, lambda: getattr(pilot.app.screen, "data", None), what="session loaded")
        await _settle(pilot)

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=before)


def test_session_screen_active_window_with_bookends(snap_compare, make_app) -> None:
    async def before(pilot) -> None:
        pilot.app.push_screen(SessionScreen("s-imported"))
        await wait_until(pilot, lambda: getattr(pilot.app.screen, "data", None), what="session loaded")
        await pilot.press("b")  # bookends
        await _settle(pilot)

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=before)


def test_live_screen(snap_compare, make_app) -> None:
    app = make_app()
    app.feed = LiveFeed(cap=2000, clock=lambda: 1_000.0)  # frozen rate window
    for event in app.service.events(0, 36):  # the import events carry the wall clock: left out
        app.feed.add(event)

    async def before(pilot) -> None:
        await pilot.press("2")
        await _settle(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


RECALL = {
    "query": "cited papers",
    "scope": None,
    "scope_id": None,
    "results": [
        {
            "turn_id": "t-r1",
            "session_id": "s-research",
            "episode_id": "e-r1",
            "index": 0,
            "role": "user",
            "content": "Find the three most cited papers on retrieval augmented generation",
            "archived": True,
            "timestamp": "2025-03-01T09:01:00Z",
            "score": 0.792,
            "score_breakdown": {
                "dense": 0.675,
                "keyword": 0.908,
                "recency": 0.991,
                "bm25": 1.527,
                "coverage": 1.0,
            },
            "metadata": {},
        },
        {
            "turn_id": "t-r8",
            "session_id": "s-research",
            "episode_id": "e-r3",
            "index": 8,
            "role": "assistant",
            "content": "The second paper proposes a retriever-reader pipeline:",
            "archived": False,
            "timestamp": "2025-03-01T09:05:30Z",
            "score": 0.61,
            "score_breakdown": {"dense": 0.55, "keyword": 0.7, "recency": 1.0},
            "metadata": {"model": "fixture-1"},
        },
        {
            "turn_id": "t-n2",
            "session_id": "s-nightly",
            "episode_id": "e-n1",
            "index": 1,
            "role": "assistant",
            "content": "Digest: 3 deploys, 0 incidents, p95 latency 180 ms.",
            "archived": False,
            "timestamp": "2025-03-01T10:07:30Z",
            "score": 0.112,
            "score_breakdown": {"dense": 0.2, "keyword": 0.0, "recency": 0.9},
            "metadata": {},
        },
    ],
    "diagnostics": {
        "mode": "hierarchical",
        "escalations": [],
        "reranked": False,
        "stage1": [
            {"session_id": "s-research", "score": 0.88, "summary": "User asks for cited RAG papers."},
            {"session_id": "s-nightly", "score": 0.18, "summary": "Nightly metrics digest."},
        ],
        "stage2_candidates": 22,
        "post_filter": 17,
        "dropped": [{"turn_id": "t-i4", "session_id": "s-imported", "score": 0.11}],
        "capped": [{"turn_id": "t-r4", "session_id": "s-research", "score": 0.21}],
        "timings_ms": {"embed": 0.3, "stage2": 13.5, "stage1": 7.8, "total": 23.6},
    },
}


def test_recall_screen(snap_compare, make_app) -> None:
    """A recorded recall result (the live path is covered in test_recall_screen.py)."""

    async def before(pilot) -> None:
        await pilot.press("3")
        screen = pilot.app.screen
        await pilot.press(*"cited papers")
        titles = {
            "s-research": "Find the three most cited papers on retrieval augmented generation",
            "s-nightly": "Nightly metrics digest",
            "s-imported": "Refund policy questions",
        }
        screen.post_message(Loaded("recall", (RECALL, None, titles, 25.0, False), token=screen.run_token))
        await wait_until(pilot, lambda: screen.result is not None, what="result shown")
        await pilot.press("escape")  # focus the results
        await _settle(pilot)

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=before)


def test_help_screen(snap_compare, make_app) -> None:
    async def before(pilot) -> None:
        await _settle(pilot)
        await pilot.pause(0.1)  # the footer below the dialog is drawn before it opens
        await pilot.press("question_mark")
        await _settle(pilot)

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=before)


# -- 80x24: the narrow layouts ---------------------------------------------------------
NARROW = (80, 24)


def test_narrow_sessions_screen(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=NARROW, run_before=_settle)


def test_narrow_session_screen_side_by_side(snap_compare, make_app) -> None:
    async def before(pilot) -> None:
        pilot.app.push_screen(SessionScreen("s-research", view="both"))
        await wait_until(pilot, lambda: getattr(pilot.app.screen, "data", None), what="session loaded")
        await _settle(pilot)

    assert snap_compare(make_app(), terminal_size=NARROW, run_before=before)


def test_narrow_live_screen(snap_compare, make_app) -> None:
    app = make_app()
    app.feed = LiveFeed(cap=2000, clock=lambda: 1_000.0)
    for event in app.service.events(0, 36):
        app.feed.add(event)

    async def before(pilot) -> None:
        await pilot.press("2")
        await _settle(pilot)

    assert snap_compare(app, terminal_size=NARROW, run_before=before)


def test_narrow_recall_screen(snap_compare, make_app) -> None:
    async def before(pilot) -> None:
        await pilot.press("3")
        screen = pilot.app.screen
        await pilot.press(*"cited papers")
        screen.post_message(Loaded("recall", (RECALL, None, {}, 25.0, False), token=screen.run_token))
        await wait_until(pilot, lambda: screen.result is not None, what="result shown")
        await pilot.press("escape")
        await _settle(pilot)

    assert snap_compare(make_app(), terminal_size=NARROW, run_before=before)


# -- every dialog ------------------------------------------------------------------------
def _dialog(keys: tuple[str, ...], session: str | None = None):
    async def before(pilot) -> None:
        await _settle(pilot)
        if session is not None:
            pilot.app.push_screen(SessionScreen(session))
            await wait_until(pilot, lambda: getattr(pilot.app.screen, "data", None), what="session loaded")
            await _settle(pilot)
        await pilot.pause(0.1)
        await pilot.press(*keys)
        for path in pilot.app.screen.query("#path"):  # the export path names cwd and the clock
            path.value = "/tmp/memviewer-export.json"
        await _settle(pilot)

    return before


def test_export_dialog(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=_dialog(("e",)))


def test_narrow_export_dialog(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=NARROW, run_before=_dialog(("e",)))


def test_narrow_help_dialog(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=NARROW, run_before=_dialog(("question_mark",)))


def test_jump_dialog(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=NARROW, run_before=_dialog(("g",), "s-research"))


def test_find_dialog(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=NARROW, run_before=_dialog(("slash",), "s-research"))


def test_delete_confirm_dialog(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=NARROW, run_before=_dialog(("D",)))


def test_import_dialog(snap_compare, make_app) -> None:
    assert snap_compare(make_app(), terminal_size=NARROW, run_before=_dialog(("i",)))


def test_annotate_dialog(snap_compare, make_app) -> None:
    """The tags-and-note dialog over a turn of the Session screen (``t``)."""
    assert snap_compare(make_app(), terminal_size=NARROW, run_before=_dialog(("t",), "s-research"))
