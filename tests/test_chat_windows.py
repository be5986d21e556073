"""A chat's windows of consecutive turns: built with its summary, kept in step with the
session (replaced, never doubled; gone with it), and read by Stage 1 of hierarchical recall
for chats only. Real store and LanceDB, ``HashEmbedder``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_summarizer_chat import chat

from memviewer.index.lance import WINDOWS, LanceIndex, in_filter
from memviewer.index.summarizer import WINDOW_STEP, WINDOW_TURNS, Summarizer, chat_windows
from memviewer.paths import lance_dir


def test_windows_overlap_name_their_authors_and_exist_only_for_chats() -> None:
    turns = chat(with_names=True)
    wins = chat_windows(turns)
    starts = list(range(0, len(turns) - WINDOW_TURNS + WINDOW_STEP, WINDOW_STEP))
    assert len(wins) == len(starts) >= 2
    for a, text in zip(starts, wins, strict=True):
        lines = text.split("\n")
        assert lines == [f"{t['meta']['speaker']}: {t['content']}" for t in turns[a : a + WINDOW_TURNS]]
    # consecutive windows share turns, so no exchange is cut in two
    assert set(wins[0].split("\n")) & set(wins[1].split("\n"))
    assert chat_windows(chat(with_names=False)) == []  # an agent session has none
    assert Summarizer().summarize(turns).windows == tuple(wins)
    assert Summarizer().summarize(chat(with_names=False)).windows == ()


def _chat(svc: Any, sid: str, lines: list[tuple[str, str]], scope_id: str = "c1") -> None:
    svc.import_session(
        {"id": sid, "agent": "chat", "scope": "conv", "scope_id": scope_id, "started_at": 1_700_000_000.0},
        [
            {
                "id": f"{sid}-{i}",
                "role": "user" if who == "Ann" else "assistant",
                "content": text,
                "timestamp": 1_700_000_000.0 + i,
                "meta": {"speaker": who},
            }
            for i, (who, text) in enumerate(lines)
        ],
    )


def _windows(settings: Any, sid: str) -> int:
    index = LanceIndex(lance_dir(Path(settings.home)))
    try:
        return index.count(WINDOWS, in_filter("session_id", [sid]))
    finally:
        index.close()


def _talk(n: int, topic: str) -> list[tuple[str, str]]:
    return [("Ann" if i % 2 == 0 else "Bob", f"line {i} about {topic}") for i in range(n)]


def test_windows_follow_the_session_replaced_on_reimport_and_deleted_with_it(
    service: Any, settings: Any
) -> None:
    _chat(service, "w1", _talk(11, "gardening"))
    service.import_session(
        {"id": "agent1", "agent": "a", "scope": "conv", "scope_id": "c1", "started_at": 1_700_000_000.0},
        [
            {"id": f"agent1-{i}", "role": r, "content": f"gardening {r}", "timestamp": 1_700_000_000.0 + i}
            for i, r in enumerate(("user", "assistant"))
        ],
    )
    service.sync_index()
    assert _windows(settings, "w1") == 3  # 11 turns: windows at 0, 3, 6
    assert _windows(settings, "agent1") == 0
    _chat(service, "w1", _talk(20, "gardening"))  # re-imported, longer: rewritten, not added to
    service.sync_index()
    assert _windows(settings, "w1") == len(range(0, 20 - WINDOW_TURNS + WINDOW_STEP, WINDOW_STEP)) == 6
    from memviewer.index.indexer import index_status

    assert ", 6 chat windows," in index_status(settings)["detail"]  # `memviewer doctor` counts them
    service.delete_session("w1")
    service.sync_index()
    assert _windows(settings, "w1") == 0
    assert ", 0 chat windows," in index_status(settings)["detail"]


def _stage1(svc: Any, query: str, scope_id: str, **tuning: float) -> dict[str, dict[str, Any]]:
    out = svc.recall(query, scope="conv", scope_id=scope_id, tuning=tuning or None)
    return {s["session_id"]: s for s in out["diagnostics"]["stage1"]}


def test_stage1_scores_a_chat_session_by_its_best_window_and_an_agent_session_not(service: Any) -> None:
    # the answer is spread over three consecutive messages of w-a; w-b mentions one word of it
    spread = [("Ann", "we planted tomatoes"), ("Bob", "beside the basil"), ("Ann", "in raised beds")]
    _chat(service, "w-a", [*_talk(4, "weather"), *spread, *_talk(4, "weather")])
    _chat(service, "w-b", [*_talk(6, "tomatoes"), ("Bob", "films tonight?")])
    for sid in ("g-a", "g-b"):
        service.import_session(
            {"id": sid, "agent": "a", "scope": "conv", "scope_id": "agent", "started_at": 1_700_000_000.0},
            [
                {
                    "id": f"{sid}-{i}",
                    "role": r,
                    "content": f"tomatoes basil {r}",
                    "timestamp": 1_700_000_000.0 + i,
                }
                for i, r in enumerate(("user", "assistant"))
            ],
        )
    service.sync_index()
    q = "Where did they plant tomatoes beside the basil in raised beds?"
    on, off = _stage1(service, q, "c1"), _stage1(service, q, "c1", chat_window_share=0)
    assert on["w-a"]["score_breakdown"]["window"] > on["w-b"]["score_breakdown"]["window"] > 0
    assert all("window" not in s["score_breakdown"] for s in off.values())
    assert on["w-a"]["score"] != off["w-a"]["score"]
    agent = _stage1(service, q, "agent")
    assert all("window" not in s["score_breakdown"] for s in agent.values())
    assert {k: v["score"] for k, v in agent.items()} == {
        k: v["score"] for k, v in _stage1(service, q, "agent", chat_window_share=0).items()
    }


def test_stage1_sees_windows_written_after_its_first_recall(service: Any) -> None:
    spread = [("Ann", "we planted tomatoes"), ("Bob", "beside the basil"), ("Ann", "in raised beds")]
    _chat(service, "w-a", [*_talk(4, "weather"), *spread])
    _chat(service, "w-b", _talk(5, "films"))
    service.sync_index()
    q = "Where did they plant tomatoes beside the basil in raised beds?"
    before = _stage1(service, q, "c1")["w-b"]["score_breakdown"]["window"]
    _chat(service, "w-b", [*_talk(5, "films"), *spread])  # re-imported: new windows
    service.sync_index()
    after = _stage1(service, q, "c1")["w-b"]["score_breakdown"]["window"]
    assert after > before


def test_a_growing_chat_embeds_only_its_new_windows(settings: Any) -> None:
    from memviewer.index.embedder import HashEmbedder
    from memviewer.service import MemoryService

    class Counting(HashEmbedder):
        windows = 0

        def embed(self, texts: Any) -> Any:
            Counting.windows += sum(1 for t in texts if "\n" in t)  # a window joins lines
            return super().embed(texts)

    svc = MemoryService(settings, embedder=Counting())
    try:
        _chat(svc, "g1", _talk(11, "gardening"))
        svc.sync_index()
        assert Counting.windows == 3
        _chat(svc, "g1", _talk(20, "gardening"))  # the first 11 turns unchanged
        svc.sync_index()
        assert _windows(settings, "g1") == 6
        assert Counting.windows == 3 + 3  # windows at 0, 3, 6 kept their vectors
        _chat(svc, "g1", [("Ann", "a different opening"), *_talk(20, "gardening")[1:]])
        svc.sync_index()
        assert Counting.windows == 6 + 1  # only the window holding the changed turn
    finally:
        svc.close()


def test_no_window_share_while_a_candidate_sessions_windows_are_not_written(
    service: Any, settings: Any
) -> None:
    spread = [("Ann", "we planted tomatoes"), ("Bob", "beside the basil"), ("Ann", "in raised beds")]
    _chat(service, "w-a", [*_talk(4, "weather"), *spread])
    _chat(service, "w-b", [*_talk(4, "films"), ("Bob", "tomatoes and basil again")])
    service.sync_index()
    q = "Where did they plant tomatoes beside the basil in raised beds?"
    assert "window" in _stage1(service, q, "c1")["w-a"]["score_breakdown"]
    # as between a session's turns and its windows, written through the service's own index
    service.parts.lance.replace_windows(["w-b"], [])
    waiting = _stage1(service, q, "c1")
    assert all("window" not in s["score_breakdown"] for s in waiting.values())
