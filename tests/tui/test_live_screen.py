"""Live screen fed by a real hub on a temporary socket: tail, pause/resume,
scroll-up holds events back, filters, no duplicate seqs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tui_helpers import wait_until

from memviewer.events import EventRecord
from memviewer.tui.live_feed import EventFilter, LiveFeed, event_text
from memviewer.tui.screens.live import LiveScreen
from memviewer.tui.widgets.event_log import EventLog

pytestmark = pytest.mark.integration


def _publisher(socket: Path, spool: Path):
    from memviewer.client import Publisher

    return Publisher(socket, spool_dir=spool, max_backoff=0.2)


def test_live_tail_pause_resume_filters_and_scrollback(make_app, filled, tmp_path) -> None:
    async def scenario() -> None:
        app = make_app(hub="auto", hub_indexer=False)
        pub = None
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until(
                pilot,
                lambda: app.hosted is not None and app.feed.state == "connected",
                what="hosted hub and subscriber connected",
            )
            assert "hosting hub on" in app.sub_title
            await pilot.press("2")
            screen = app.screen
            assert isinstance(screen, LiveScreen)
            log = screen.query_one("#events", EventLog)
            backlog = filled.last_seq
            await wait_until(pilot, lambda: len(log.rows) == backlog, what="stored events replayed")

            pub = _publisher(app.settings.socket_path, tmp_path / "spool")
            sid = pub.open_session(agent="live-agent", title="live test")
            eid = pub.start_episode(sid, "stream some turns")
            for n in range(3):
                pub.add_turn(eid, "assistant", f"turn {n}")
            assert await asyncio.to_thread(pub.flush, 10.0)
            await wait_until(
                pilot,
                lambda: (
                    sum(1 for e in log.rows if e.session_id == sid and e.kind == "episode.turn_added") == 4
                ),
                what="published turns in the log",
            )  # the user turn + 3

            # pause: new events wait in `pending`, the log does not move
            await pilot.press("space")
            shown = len(log.rows)
            for n in range(5):
                pub.add_turn(eid, "assistant", f"while paused {n}")
            assert await asyncio.to_thread(pub.flush, 10.0)
            await wait_until(pilot, lambda: len(screen.pending) == 5, what="5 pending events")
            assert len(log.rows) == shown
            assert "5 new events waiting" in str(screen.query_one("#live-pending").render())
            await pilot.press("space")  # resume
            assert not screen.pending and len(log.rows) == shown + 5
            seqs = [e.seq for e in log.rows]
            assert seqs == sorted(set(seqs)), "no duplicate or out-of-order seq"

            # scrolled up: following stops, events are held back, End follows again
            log.focus()
            await pilot.press("home")
            await pilot.pause()
            assert not log.following
            pub.add_turn(eid, "assistant", "while scrolled up")
            assert await asyncio.to_thread(pub.flush, 10.0)
            await wait_until(pilot, lambda: len(screen.pending) == 1, what="held back while scrolled up")
            assert "SCROLLED UP" in str(screen.query_one("#live-pending").render())
            await pilot.press("end")
            await wait_until(pilot, lambda: log.following and not screen.pending, what="following again")
            assert log.rows[-1].payload["turn"]["content"] == "while scrolled up"

            # filters re-apply to what is kept
            await pilot.press("k")
            await pilot.press(*"session.s")
            await wait_until(pilot, lambda: screen.event_filter.kinds == ("session.s",), what="kind filter")
            assert log.rows and all(e.kind == "session.started" for e in log.rows)
            assert any(e.session_id == sid for e in log.rows)
            await pilot.press("escape", "slash", *sid[-4:])
            await wait_until(pilot, lambda: screen.event_filter.session == sid[-4:], what="session filter")
            assert [e.session_id for e in log.rows] == [sid]

            await pilot.press("escape", "c")  # clear
            assert not log.rows and not screen.history
        if pub is not None:
            pub.close(timeout=2)
        assert not app.settings.socket_path.exists(), "the hosted hub removed its socket"

    asyncio.run(scenario())


def _ev(seq: int, kind: str = "episode.turn_added", sid: str = "s1") -> EventRecord:
    return EventRecord(
        seq,
        kind,
        1740819600.0 + seq,
        sid,
        "e1",
        {"turn": {"role": "user", "index": seq, "content": f"hello {seq}"}},
    )


def test_feed_drops_replayed_seqs_and_bounds_memory() -> None:
    now = [100.0]
    feed = LiveFeed(cap=3, window_s=5, clock=lambda: now[0])
    assert [feed.add(_ev(s)) for s in (1, 2, 2, 1, 3)] == [True, True, False, False, True]
    assert feed.duplicates == 2 and feed.last_seq == 3
    for s in range(4, 8):
        feed.add(_ev(s))
    assert [e.seq for e in feed.drain()] == [5, 6, 7] and feed.overflowed == 4
    assert feed.drain() == []
    now[0] = 101.0
    feed.add(_ev(8))
    assert feed.rate_series()[-2:] == [7.0, 1.0] and len(feed.rate_series()) == 5


def test_event_filter_and_line() -> None:
    f = EventFilter.parse("episode., session.closed", "abc")
    assert f.matches(_ev(1, sid="x-abc-y")) and not f.matches(_ev(1, sid="zzz"))
    assert not f.matches(_ev(1, kind="session.started", sid="abc"))
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
    tool_turn = EventRecord(
        7,
        "episode.turn_added",
        0.0,
        "s1",
        "e1",
        {"turn": {"role": "assistant", "index": 3, "content": "", "tool_calls": [call]}},
    )
    assert event_text(tool_turn).plain.endswith("#3 assistant: → read_file()")
    line = event_text(_ev(42, sid="s-123")).plain
    assert (
        line.split()[:4] == ["42", "03-01", "09:00:42.000", "episode.turn_added"]
        and "#42 user: hello 42" in line
    )


def test_a_deleted_session_reads_as_a_count_and_its_first_turn_ids(make_app, filled) -> None:
    """The ``session.deleted`` event carries a list of turn ids: the Live line names how many
    and the first ones (the summary ``memviewer tail`` prints), never ``turn_ids=['t-…']``."""
    from tui_helpers import screen_text

    filled.delete_session("s-research")
    deleted = [e for e in filled.events(0, 10_000) if e.kind == "session.deleted"]
    assert len(deleted) == 1 and len(deleted[0].payload["turn_ids"]) > 2

    async def scenario() -> None:
        app = make_app()
        for event in deleted:
            app.feed.add(event)
        async with app.run_test(size=(140, 30)) as pilot:
            await pilot.press("2")
            log = app.screen.query_one("#events", EventLog)
            await wait_until(pilot, lambda: len(log.rows) == 1, what="the deleted event in the log")
            text = screen_text(app)
            n = len(deleted[0].payload["turn_ids"])
            first = deleted[0].payload["turn_ids"][0]
            assert f"{n} turns: {first}, " in text and f" +{n - 2} more" in text, text
            assert "turn_ids" not in text and "['" not in text

    asyncio.run(scenario())
