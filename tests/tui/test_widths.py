"""Every width from 80 to 200 columns: the Recall parameter row and its side-by-side (A/B)
view, the header, the Sessions table, the Golden screen and the Live screen show their key
texts whole (issue 34.3)."""

from __future__ import annotations

import asyncio
import re

import pytest
from tui_helpers import screen_text, wait_for_workers, wait_until

from memviewer.eval import golden
from memviewer.eval.golden_view import METRICS, fmt
from memviewer.events import EventRecord
from memviewer.tui.hub_link import HubStatus, header_forms
from memviewer.tui.live_feed import short_id
from memviewer.tui.messages import HubChanged
from memviewer.tui.screens.golden import GoldenScreen

WIDTHS = (80, 100, 120, 160, 200)
SOURCES = [
    {"kind": "praisonai", "target": "/home/user/.praisonai/sessions", "connected": True},
    {"kind": "otlp", "target": "127.0.0.1:4318", "connected": True},
]


@pytest.mark.parametrize("width", WIDTHS)
def test_recall_parameters_and_header_fit(make_app, tmp_path, width: int) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(width, 30)) as pilot:
            status = HubStatus("hosting", tmp_path / "a-rather-long-runtime-folder" / "hub.sock")
            app.post_message(HubChanged(*header_forms(status, SOURCES)))
            await pilot.press("3")
            screen = app.screen
            screen.query_one("#mode").value = "compare"
            await wait_for_workers(pilot)
            await pilot.pause()
            text = screen_text(app)
            for word in ("scope", "top_k", "as of", "rerank", "compare flat | hier.", "B: key=value"):
                assert word in text, (width, word, text)
            header = text.splitlines()[0]
            assert header.count(" yet") == 2 and "…" not in header[-3:], header  # each state kept
            screen.query_one("#mode").value = "hierarchical"
            await pilot.pause()
            assert "hierarchical" in screen_text(app)

    asyncio.run(scenario())


@pytest.mark.parametrize("width", WIDTHS)
def test_sessions_columns(make_app, width: int) -> None:
    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(width, 30)) as pilot:
            await wait_for_workers(pilot)
            text = screen_text(app)
            for word in ("Title", "Last seen", "Ep", "Act", "Arch", "Status"):
                assert word in text, (width, word)
            if width >= 200:
                assert "Find the three most cited papers on retrieval augmented generation" in text

    asyncio.run(scenario())


def test_short_id_keeps_both_ends() -> None:
    assert short_id("praisonai-demo-1", 20) == "praisonai-demo-1"
    cut = short_id("s-demo-93869b9c027a83696a67", 12)
    assert len(cut) == 12 and cut.startswith("s-dem") and cut.endswith("96a67") and "…" in cut


QUERY = "product launch plan"
B_SPEC = "top_k=3,mode=flat,w_dense=0.3,w_keyword=0.7"


@pytest.mark.parametrize("width", WIDTHS)
def test_side_by_side_b_field_and_tables(filled, make_app, width: int) -> None:
    """Compare mode: the B field takes the rest of its row (a four-key B set reads whole, and
    typing goes into it), and both tables show their scores and content at every width."""
    filled.sync_index()

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(width, 40)) as pilot:
            await pilot.press("3")
            screen = app.screen
            screen.query_one("#mode").value = "compare"
            await pilot.pause()
            vs = screen.query_one("#vs")
            vs.focus()
            await pilot.press(*B_SPEC)
            assert vs.value == B_SPEC  # usable: typed into, not hidden behind another field
            assert vs.region.width >= 30 and vs.region.right <= width, (width, vs.region)
            screen.query_one("#query").value = QUERY
            assert screen.action_rerun()
            await wait_until(pilot, lambda: screen.flat is not None, what="A and B runs")
            await wait_for_workers(pilot)
            screen.query_one("#recall-tabs").active = "tab-compare"
            await pilot.pause()
            text = screen_text(app)
            if width < 170 or width >= 200:  # stacked: a row of its own; one row: the rest of it
                assert f"B {B_SPEC}" in text, (width, text)
            assert "HIERARCHICAL" in text and "B: top_k=3, mode=flat" in text, text
            assert text.count("Content") == 2 and text.count("Score") == 2, text
            for result in (screen.result, screen.flat):
                top = result["results"][0]
                assert f"{float(top['score']):.3f}" in text, (width, top)
            for line in text.splitlines():
                assert len(line) <= width

    asyncio.run(scenario())


@pytest.mark.parametrize("width", WIDTHS)
def test_golden_metrics_stay_on_screen(filled, make_app, width: int) -> None:
    """The runs table keeps recall@5/10, MRR and nDCG@10 on screen; the changed parameters
    are whole (in the table when there is room, else on the line under it), and a long
    query leaves the cases' scope and turn count on screen."""
    filled.sync_index()
    hits = filled.recall(QUERY, top_k=10)["results"]
    golden.add_case(
        filled, QUERY + " and what we said about the press release and the budget" * 3, [hits[0]["turn_id"]]
    )
    golden.add_case(filled, "cited papers retrieval", [hits[1]["turn_id"]], scope="agent", scope_id="planner")
    golden.evaluate(filled)
    golden.evaluate(filled, {"top_k": 20, "top_sessions": 8, "chunks_per_session": 5})
    runs = golden.history(filled)

    async def scenario() -> None:
        app = make_app()
        async with app.run_test(size=(width, 36)) as pilot:
            app.push_screen(GoldenScreen())
            await wait_until(pilot, lambda: isinstance(app.screen, GoldenScreen) and app.screen.runs)
            await wait_for_workers(pilot)
            lines = screen_text(app).splitlines()
            assert all(len(line) <= width for line in lines)
            at = next(i for i, line in enumerate(lines) if "recall@5" in line)
            header = lines[at]
            assert re.search(r"recall@5\s+recall@10\s+mrr\s+ndcg@10", header), header
            for run in runs:
                row = next(line for line in lines[at:] if line.startswith(f"  {run['run_id']}  "))
                assert " ".join(fmt(run[m]) for m in METRICS) in " ".join(row.split()), (width, row)
            text = "\n".join(lines)
            for param in ("top_sessions=8", "chunks_per_session=5", "top_k=20"):
                assert param in text, (width, param, text)  # never broken inside a key
            cases = next(line for line in lines if "query" in line and "scope" in line)
            assert cases.rstrip().endswith("turns"), cases
            assert "agent:planner" in text

    asyncio.run(scenario())


LIVE_IDS = ("praisonai-demo-1", "s-demo-93869b9c027a83696a67", "0192f3a4-7b1c-7d2e-9f00-aabbccddeeff")


@pytest.mark.parametrize("width", WIDTHS)
def test_live_ids_keep_their_start(make_app, width: int) -> None:
    """A session id is shown whole, or its start and end around an ellipsis: never cut from
    the left (``aison-demo-1``); from 100 columns ``praisonai-demo-1`` is whole."""
    app = make_app()
    for seq, sid in enumerate(LIVE_IDS, start=9_000):
        turn = {"role": "assistant", "index": 3, "content": "the backoff is exponential, capped at 60 s"}
        app.feed.add(EventRecord(seq, "episode.turn_added", 1_750_000_000.0, sid, "e-1", {"turn": turn}))

    async def scenario() -> None:
        async with app.run_test(size=(width, 30)) as pilot:
            await pilot.press("2")
            await wait_until(pilot, lambda: len(app.screen.query_one("#events").rows) >= len(LIVE_IDS))
            await pilot.pause()
            lines = screen_text(app).splitlines()
            for seq, sid in enumerate(LIVE_IDS, start=9_000):
                row = next(line for line in lines if line.lstrip().startswith(str(seq)))
                shown = row.split()[4]  # seq, date, time, kind, session id
                whole = shown == sid
                ends = shown.startswith(sid[:5]) and shown.endswith(sid[-5:]) and "…" in shown
                assert whole or ends, (width, sid, row)
                assert "#3 assistant: the" in row, row  # what happened, however short
            if width >= 100:
                assert any(" praisonai-demo-1 #3 assistant: the backoff" in line for line in lines)
            if width >= 120:
                said = "#3 assistant: the backoff is exponential"
                assert all(said in line for line in lines if "#3" in line)

    asyncio.run(scenario())
