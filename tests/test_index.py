"""The indexer keeps LanceDB in step with SQLite (HashEmbedder, real LanceDB)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from memviewer.index.embedder import HashEmbedder
from memviewer.index.indexer import index_status
from memviewer.index.lance import SUMMARIES, TURNS, in_filter
from memviewer.service import MemoryService


def add_session(svc: Any, sid: str, texts: list[str], scope_id: str = "u1") -> str:
    svc.open_session(session_id=sid, agent="a", scope="user", scope_id=scope_id)
    ep = svc.start_episode(sid, texts[0])
    for text in texts[1:]:
        svc.add_turn(ep["episode_id"], "assistant", text)
    return ep["episode_id"]


def lance_flags(svc: Any) -> dict[str, bool]:
    rows = svc.parts.lance.rows(TURNS, None, ["turn_id", "archived"])
    return {r["turn_id"]: r["archived"] for r in rows}


def sql_flags(svc: Any, sid: str) -> dict[str, bool]:
    return {t["turn_id"]: t["archived"] for t in svc.session(sid)["turns"]}


@pytest.fixture
def small_window(settings: Any) -> Any:
    svc = MemoryService(settings.with_overrides(active_window=4), embedder=HashEmbedder())
    yield svc
    svc.close()


def test_sync_embeds_everything_once(service: Any) -> None:
    add_session(service, "s1", ["hello there", "general kenobi", "you are a bold one"])
    add_session(service, "s2", ["second session text"])
    first = service.sync_index()
    assert first["added_turns"] == 4 and first["summaries"] == 2
    index = service.parts.lance
    versions = index.versions()
    again = service.sync_index()
    assert again["added_turns"] == 0 and again["updated_turns"] == 0 and again["summaries"] == 0
    assert index.versions() == versions  # nothing was rewritten
    status = service.indexer().status()
    assert status["indexed_turns"] == status["sql_turns"] == 4 and status["lag"] == 0
    assert status["summaries"] == 2 and status["model"] == "hash-64"


def test_compaction_keeps_archived_in_step(small_window: Any) -> None:
    svc = small_window
    ep = add_session(svc, "c1", ["turn zero"])
    svc.sync_index()
    for i in range(1, 10):
        svc.add_turn(ep, "assistant", f"turn {i}")
        if i % 3 == 0:
            svc.sync_index()
    svc.sync_index()
    sql = sql_flags(svc, "c1")
    assert any(sql.values()), "compaction should have archived turns"
    assert lance_flags(svc) == sql
    summary = next(t for t in svc.session("c1")["turns"] if t["is_compaction_summary"])
    row = svc.parts.lance.rows(TURNS, in_filter("turn_id", [summary["turn_id"]]), ["text"])
    assert row == [{"text": summary["content"]}]  # the rewritten summary was re-embedded


def test_reimport_updates_changed_turns_and_drops_stale(service: Any) -> None:
    turns = [
        {"id": f"t{i}", "role": "user", "content": f"original {i}", "timestamp": 1.0 + i} for i in range(3)
    ]
    service.import_session({"id": "imp", "scope": "user", "scope_id": "u1"}, turns)
    service.sync_index(["imp"])
    turns[1] = {**turns[1], "content": "rewritten text about zebras", "archived": True}
    service.import_session({"id": "imp", "scope": "user", "scope_id": "u2"}, turns)
    report = service.sync_index(["imp"])
    assert report["updated_turns"] >= 3  # one re-embedded, scope moved on all
    rows = {
        r["turn_id"]: r
        for r in service.parts.lance.rows(
            TURNS, "session_id = 'imp'", ["turn_id", "text", "archived", "scope_id"]
        )
    }
    assert rows["t1"]["text"] == "rewritten text about zebras" and rows["t1"]["archived"] is True
    assert {r["scope_id"] for r in rows.values()} == {"u2"}
    out = service.recall("zebras", scope="user", scope_id="u2", top_k=1)
    assert out["results"][0]["turn_id"] == "t1"
    summary = service.parts.lance.rows(SUMMARIES, "session_id = 'imp'", ["scope_id", "summary"])
    assert summary[0]["scope_id"] == "u2" and "zebras" in summary[0]["summary"]


def test_summary_reindex_is_idempotent_and_refreshes_on_growth(service: Any) -> None:
    ep = add_session(service, "g1", ["I am planning a trip to Kyoto in April"])
    service.sync_index()
    index = service.parts.lance
    version = index.versions()[SUMMARIES]
    assert service.sync_index(["g1"])["summaries"] == 0  # forced, but the input is unchanged
    assert index.versions()[SUMMARIES] == version
    service.add_turn(ep, "assistant", "Kyoto is lovely in spring")
    assert service.sync_index()["summaries"] == 0  # below the refresh threshold
    for i in range(8):
        service.add_turn(ep, "user", f"also visiting Osaka castle day {i}")
    assert service.sync_index()["summaries"] == 1
    row = index.rows(SUMMARIES, "session_id = 'g1'", ["summary", "turn_count"])[0]
    assert row["turn_count"] == 10 and "Osaka" in row["summary"]


def test_closing_a_session_refreshes_its_summary(service: Any) -> None:
    ep = add_session(service, "cl", ["first words about llamas"])
    service.sync_index()
    service.add_turn(ep, "assistant", "llamas and alpacas differ in size")
    service.sync_index()
    service.close_session("cl")
    assert service.sync_index()["summaries"] == 1


def test_rebuild_matches_incremental(service: Any) -> None:
    add_session(service, "r1", ["alpha beta", "gamma delta"])
    add_session(service, "r2", ["epsilon"])
    service.sync_index()
    index = service.parts.lance
    before = sorted(r["turn_id"] for r in index.rows(TURNS, None, ["turn_id"]))
    report = service.indexer().rebuild()
    assert report["added_turns"] == 3 and report["summaries"] == 2
    assert sorted(r["turn_id"] for r in index.rows(TURNS, None, ["turn_id"])) == before


def test_model_change_rebuilds_the_index(settings: Any) -> None:
    with MemoryService(settings, embedder=HashEmbedder(dim=64)) as svc:
        add_session(svc, "m1", ["some text"])
        svc.sync_index()
    with MemoryService(settings, embedder=HashEmbedder(dim=32)) as svc:
        with pytest.raises(Exception, match="reindex"):
            svc.recall("some text")
        report = svc.sync_index()
        assert report["added_turns"] == 1
        assert svc.recall("some text")["results"][0]["content"] == "some text"
        assert svc.indexer().status()["model"] == "hash-32"


def test_index_status_reports_lag(settings: Any) -> None:
    assert index_status(settings)["ok"] is True  # nothing stored, nothing to index
    with MemoryService(settings, embedder=HashEmbedder()) as svc:
        add_session(svc, "l1", ["one", "two"])
        status = index_status(settings)
        assert status["ok"] is False and "reindex" in status["detail"]
        svc.sync_index()
        # stored a minute ago: past the indexer's grace (a turn of the last seconds is the
        # indexer catching up, not a lag: tests/test_index_lag_grace.py)
        svc.open_session(session_id="l2", agent="a", scope="user", scope_id="u1", ts=time.time() - 60)
        svc.start_episode("l2", "three", ts=time.time() - 60)
    status = index_status(settings)
    assert (
        status["ok"] is False and "lag 1 turn" in status["detail"] and "lag 1 turns" not in status["detail"]
    )
    with MemoryService(settings, embedder=HashEmbedder()) as svc:
        svc.sync_index()
    status = index_status(settings)
    assert status["ok"] is True and "3 turns" in status["detail"] and "hash-64" in status["detail"]


def test_background_indexer_catches_up(small_window: Any) -> None:
    svc = small_window
    ep = add_session(svc, "bg0", ["written before the indexer started"])
    indexer = svc.indexer()
    indexer.start_background()
    try:
        for i in range(12):
            svc.add_turn(ep, "user" if i % 2 else "assistant", f"live turn {i} about quokkas")
        svc.open_session(session_id="bg1", agent="a", scope="user", scope_id="u1")
        svc.start_episode("bg1", "a brand new session on platypus care")
        assert indexer.wait_idle(30)
        status = indexer.status()
        assert status["background"] and status["lag"] == 0
        assert status["indexed_turns"] == status["sql_turns"]
        assert lance_flags(svc) == {**sql_flags(svc, "bg0"), **sql_flags(svc, "bg1")}
        out = svc.recall("platypus care", scope="user", scope_id="u1", top_k=1)
        assert out["results"][0]["session_id"] == "bg1"
    finally:
        indexer.close()
    assert not indexer.status()["background"]


def test_ann_index_builds_past_threshold(settings: Any) -> None:
    texts = [f"note {i} on topic {i % 17} with word w{i}" for i in range(300)]
    with MemoryService(settings.with_overrides(ann_threshold=200), embedder=HashEmbedder()) as svc:
        add_session(svc, "big", texts)
        svc.sync_index()
        index = svc.parts.lance
        assert not index.build_ann(threshold=1000)
        out = svc.recall("note 17 on topic 0 with word w17", scope_id="u1", mode="flat")
        assert out["diagnostics"]["index"]["vector_search"] == "exact"
        assert index.build_ann(threshold=200) and index.has_vector_index()
        out = svc.recall("note 17 on topic 0 with word w17", scope_id="u1", mode="flat")
        assert out["diagnostics"]["index"]["vector_search"] == "ivf_pq"
        assert out["results"][0]["content"] == texts[17]
        small = svc.recall("note 17", scope_id="nobody-else", mode="flat")
        assert small["diagnostics"]["index"]["vector_search"] == "exact"  # small scope: brute force


def test_readonly_service_does_not_write_the_index(settings: Any) -> None:
    with MemoryService(settings, embedder=HashEmbedder()) as svc:
        add_session(svc, "ro", ["read only please"])
        svc.sync_index()
        index = svc.parts.lance
        versions = index.versions()
        add_session(svc, "ro2", ["more text"])
    with MemoryService(settings, readonly=True, embedder=HashEmbedder()) as ro:
        assert ro.sync_index()["skipped"] == "read-only service"
        assert ro.recall("read only please")["results"][0]["content"] == "read only please"
        assert ro.parts.lance.versions() == versions


def test_contextual_embeddings_prepend_the_session_summary(settings: Any) -> None:
    texts = ["I want to book a kayak rental on the lake", "sounds good, go ahead"]
    other = ["my tax return was filed", "the accountant will call"]
    for contextual in (False, True):
        s = settings.with_overrides(
            contextual_embeddings=contextual, home=str(settings.home_path / str(contextual))
        )
        with MemoryService(s, embedder=HashEmbedder()) as svc:
            add_session(svc, "k", texts)
            add_session(svc, "t", other)
            svc.sync_index()
            rows = svc.parts.lance.rows(TURNS, "session_id = 'k'", ["text", "vector"])
            vec = next(r["vector"] for r in rows if r["text"] == texts[1])  # text stays verbatim
            plain = HashEmbedder().embed([texts[1]])[0]
            assert bool((abs(plain - vec) < 1e-6).all()) is (not contextual)
            out = svc.recall(
                "kayak rental", scope_id="u1", mode="flat", top_k=4, weights={"dense": 1.0, "keyword": 0.0}
            )
            ranked = [r["content"] for r in out["results"]]
            assert ranked[0] == texts[0]
            if contextual:  # the reply inherits its session's topic
                assert ranked.index(texts[1]) < min(ranked.index(t) for t in other)


def test_rows_written_before_a_crash_are_not_duplicated(settings: Any) -> None:
    with MemoryService(settings, embedder=HashEmbedder()) as svc:
        add_session(svc, "cr", ["one", "two", "three"])
        svc.sync_index()
        index = svc.parts.lance
        state = index.load_state()
        index.save_state({**state, "turn_num": 1})  # as if the process died before saving
    with MemoryService(settings, embedder=HashEmbedder()) as svc:
        report = svc.sync_index()
        assert report["added_turns"] == 2
        ids = [r["turn_id"] for r in svc.parts.lance.rows(TURNS, None, ["turn_id"])]
        assert len(ids) == len(set(ids)) == 3


def test_summaries_from_an_older_summarizer_are_rewritten_once(service: Any) -> None:
    add_session(service, "s1", ["Great, thanks! My sister Ana adopted a beagle.", "Congratulations!"])
    add_session(service, "s2", ["second session text"])
    assert service.sync_index()["summaries"] == 2
    index = service.parts.lance
    # What a v1 index looked like: another summary, another source hash, no version recorded.
    rows = index.rows(
        SUMMARIES,
        None,
        [
            "session_id",
            "scope",
            "scope_id",
            "summary",
            "search_text",
            "turn_count",
            "source_hash",
            "method",
            "updated",
            "vector",
        ],
    )
    for r in rows:
        r.update(summary="User: Great, thanks!", source_hash="v1-" + r["session_id"])
    index.upsert_summaries(rows)
    state = index.load_state()
    state.pop("summary_version")
    index.save_state(state)

    assert service.sync_index()["summaries"] == 2
    fresh = {
        r["session_id"]: r for r in index.rows(SUMMARIES, None, ["session_id", "summary", "source_hash"])
    }
    assert fresh["s1"]["summary"].startswith("User: My sister Ana adopted a beagle.")
    assert not any(r["source_hash"].startswith("v1-") for r in fresh.values())
    assert service.sync_index()["summaries"] == 0  # once only


def test_a_full_disk_stalls_the_indexer_then_it_resumes_alone_without_duplicates(
    small_window: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state file is refused after the rows went in (the worst moment): once the disk has
    room the idle indexer retries by itself, and the retried rows are not added twice."""
    import errno

    from memviewer.index import runner

    monkeypatch.setattr(runner, "IDLE_TICK_S", 0.1)
    svc = small_window
    indexer = svc.indexer()
    full = {"on": True}
    real_save = indexer.index.save_state

    def save_state(state: dict[str, Any]) -> None:
        if full["on"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_save(state)

    monkeypatch.setattr(indexer.index, "save_state", save_state)
    ep = add_session(svc, "full0", ["the first note on wombats", "a second one on echidnas"])
    for i in range(5):
        svc.add_turn(ep, "user", f"turn {i} about numbats")
    indexer.start_background()  # its first pass fails; after that, no event wakes it
    try:
        deadline = time.monotonic() + 20
        while indexer.status()["last_error"] is None and time.monotonic() < deadline:
            time.sleep(0.05)
        status = indexer.status()
        assert "No space left on device" in status["last_error"]
        assert status["lag"] == status["sql_turns"]  # nothing counted as indexed
        full["on"] = False  # space freed; no new event arrives
        assert indexer.wait_idle(20)
        status = indexer.status()
        assert status["last_error"] is None and status["lag"] == 0
        ids = [r["turn_id"] for r in svc.parts.lance.rows(TURNS, None, ["turn_id"])]
        assert len(ids) == len(set(ids)) == status["indexed_turns"] == status["sql_turns"]
        assert lance_flags(svc) == sql_flags(svc, "full0")
    finally:
        indexer.close()


def test_a_table_another_thread_is_still_creating_reads_as_absent(tmp_path: Any) -> None:
    """``create_table`` makes the folder before it writes the first version; a reader that
    looks in between (the viewer's status line while the indexer starts) sees no table
    rather than an error."""
    from memviewer.index.lance import LanceIndex

    index = LanceIndex(tmp_path / "lance")
    (tmp_path / "lance" / f"{TURNS}.lance").mkdir(parents=True)
    assert index.exists
    assert index.table(TURNS) is None
    assert index.has_vector_index() is False
    assert index.count(TURNS) == 0
    index.ensure_tables(8)  # once created for real, the same handle opens it
    assert index.table(TURNS) is not None


def test_a_stopping_background_indexer_gives_up_its_batch_between_model_calls(settings: Any) -> None:
    """Stopping a hub must not wait for a whole read batch of embeddings (2,048 turns: 5–20 s
    with the real model on 2 cores): the indexer stops after the model call it is in, leaves
    nothing half-written, and the next pass embeds the batch whole, once."""
    import threading

    from memviewer.index import turn_rows

    in_call = threading.Event()
    go_on = threading.Event()

    class SlowEmbedder(HashEmbedder):
        calls = 0

        def embed(self, texts: list[str]) -> Any:
            SlowEmbedder.calls += 1
            in_call.set()
            go_on.wait(10)  # the test holds the first call until it has asked the indexer to stop
            return super().embed(texts)

    n = turn_rows.EMBED_CHUNK * 4
    with MemoryService(settings, embedder=SlowEmbedder()) as svc:
        svc.open_session(session_id="big", agent="a", scope="user", scope_id="u1")
        ep = svc.start_episode("big", "first")["episode_id"]
        svc.apply_batch(
            [
                {"op": "add_turn", "episode_id": ep, "role": "assistant", "content": f"turn {i}"}
                for i in range(n)
            ]
        )
        indexer = svc.indexer()
        indexer.start_background()
        assert in_call.wait(10)
        stopper = threading.Thread(target=indexer.close)
        stopper.start()
        while not indexer.runner.stop.is_set():  # close() has asked
            time.sleep(0.001)
        go_on.set()
        stopper.join(10)
        assert not stopper.is_alive() and SlowEmbedder.calls == 1  # the other 3 calls never ran
        assert svc.parts.lance.count("turns") == 0  # the batch was given up whole
    with MemoryService(settings, embedder=HashEmbedder()) as svc:
        svc.sync_index()
        stored = int(svc.stats()["counts"]["turns"])
        assert stored > n and svc.parts.lance.count("turns") == stored  # each turn once


def test_a_finished_process_exits_past_an_indexer_still_in_a_call(tmp_path: Any) -> None:
    """``serve`` and the viewer end with ``exit_past_busy_indexer``: with the indexer thread
    still in a call the process ends at once (0, a note), otherwise it returns normally."""
    import subprocess
    import sys

    script = (
        "import sys, threading, time\n"
        "from memviewer.index.indexer import exit_past_busy_indexer\n"
        "if sys.argv[1] == 'busy':\n"
        "    threading.Thread(target=time.sleep, args=(60,), name='memviewer-indexer', daemon=True).start()\n"
        "exit_past_busy_indexer(lambda note: print('note:', note, flush=True))\n"
        "print('returned', flush=True)\n"
    )
    busy = subprocess.run([sys.executable, "-c", script, "busy"], capture_output=True, text=True, timeout=60)
    idle = subprocess.run([sys.executable, "-c", script, "idle"], capture_output=True, text=True, timeout=60)
    assert busy.returncode == 0 and "mid-call" in busy.stdout and "returned" not in busy.stdout
    assert idle.returncode == 0 and idle.stdout.strip() == "returned"


def test_turns_stored_after_the_newest_session_was_deleted_are_embedded(settings: Any) -> None:
    """SQLite numbers a new turn max(num) + 1, so after deleting the highest-numbered turns
    (the viewer's D, `demo --remove`) new turns reuse numbers the watermark covered: they were
    never embedded ("lost below the watermark"). The deletion lowers the watermark."""
    with MemoryService(settings, embedder=HashEmbedder()) as svc:
        add_session(svc, "old", ["kept one", "kept two"])
        add_session(svc, "new", ["to be deleted", "also deleted", "and this"])
        svc.sync_index()
        svc.delete_session("new")
        svc.sync_index()
        add_session(svc, "after", ["the quokka deadline is friday"])
        svc.sync_index()
        assert svc.parts.lance.count("turns") == int(svc.stats()["counts"]["turns"]) == 3
        found = svc.recall("quokka deadline", scope="user", scope_id="u1")
        assert found["results"][0]["session_id"] == "after"
        assert not found["diagnostics"].get("index_integrity")  # nothing lost below the watermark
    status = index_status(settings)
    assert status["ok"] is True, status["detail"]
