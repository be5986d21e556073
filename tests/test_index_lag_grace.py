"""Lag that is news and lag that is not (issue 34, items 1 and 5).

* A turn stored a moment ago waits for the indexer's next poll and batch: within
  ``timing.CATCH_UP_GRACE_S`` that is *catching up* (``within_grace``), never a warning,
  and doctor passes; a session that new may lack its first summary too.
* Past the grace, every surface says who embeds the waiting turns (``who_embeds``: the
  hub, a background ``reindex --catch-up``, or nothing, with the fix).
* An import whose background indexer dies at once says so, with its log's tail.

In process with the hash embedder and an in-process hub where one is needed.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cli_runs import invoke_on

from memviewer import doctor, paths
from memviewer.commands import background_index
from memviewer.commands.recall import lag_warning
from memviewer.index import timing
from memviewer.index.progress import CATCH_UP_PID, catch_up_pid, index_lag, within_grace
from memviewer.present.index_words import NO_INDEXER_FIX, Embedding, waiting_line
from memviewer.recall.lagging import INDEX_LAGGING
from memviewer.wire.embedding import who_embeds

OLD = 1_700_000_000.0  # long past any grace
FIXTURES = Path(__file__).parent / "fixtures" / "praisonai"


def _seed(service: Any, sid: str, texts: list[str], ts: float = OLD) -> None:
    service.import_session(
        {"id": sid, "title": sid, "started_at": ts},
        [
            {"id": f"{sid}-t{i}", "role": "user", "content": t, "timestamp": ts + i}
            for i, t in enumerate(texts)
        ],
    )


def _live_turn(service: Any, sid: str, text: str) -> None:
    """What a publishing agent does: a session and a turn stamped now."""
    service.manager.open_session(session_id=sid, agent="live")
    service.manager.start_episode(sid, text, episode_id=f"e-{sid}")


# -- the grace ----------------------------------------------------------------------------


def test_the_grace_is_the_indexers_poll_batch_and_pass() -> None:
    assert 2.0 <= timing.CATCH_UP_GRACE_S <= 10.0  # a few seconds
    now = 1_000_000.0
    assert within_grace(now - 1.0, now) and within_grace(now, now)
    assert not within_grace(now - timing.CATCH_UP_GRACE_S - 0.1, now)
    assert within_grace(now + 1.0, now)  # a publisher's clock a little ahead
    assert not within_grace(now + timing.CATCH_UP_GRACE_S + 1.0, now)  # a wrong clock hides nothing
    assert not within_grace(None, now)


def test_index_lag_judges_by_the_oldest_waiting_turn(service: Any) -> None:
    _seed(service, "s-a", ["the heron plan"])
    service.sync_index()
    with service.store.read() as conn:
        lag = index_lag(service.home, conn)
    assert lag["lag"] == 0 and lag["within_grace"] is False and lag["waiting_s"] is None
    _live_turn(service, "s-live", "a turn this second")
    with service.store.read() as conn:
        lag = index_lag(service.home, conn)
    assert lag["lag"] == 1 and lag["within_grace"] is True and lag["waiting_s"] < timing.CATCH_UP_GRACE_S
    service.sync_index()
    _seed(service, "s-old", ["an old message imported"])  # waiting first, stamped long ago
    _live_turn(service, "s-live2", "and a fresh one")
    with service.store.read() as conn:
        lag = index_lag(service.home, conn)
    assert lag["lag"] == 2 and lag["within_grace"] is False and lag["waiting_s"] > 1e6


# -- who embeds ---------------------------------------------------------------------------


def test_who_embeds_without_a_hub(settings: Any) -> None:
    home = settings.home_path
    assert who_embeds(settings) == Embedding(None)
    assert Embedding(None).fix == NO_INDEXER_FIX
    assert Embedding(None).public() == {"indexer": None, "fix": NO_INDEXER_FIX}
    lance = paths.lance_dir(home)
    lance.mkdir(parents=True)
    (lance / CATCH_UP_PID).write_text(str(os.getpid()), encoding="ascii")  # a live catch-up
    assert who_embeds(settings) == Embedding("background", pid=os.getpid())
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (lance / CATCH_UP_PID).write_text(str(dead.pid), encoding="ascii")  # one that died
    assert who_embeds(settings).indexer is None
    assert who_embeds(settings, in_process=True) == Embedding("hub")  # the hub's own recall
    assert (
        waiting_line({"lag": 3}, Embedding(None))
        == f"3 turns wait and nothing is embedding them: {NO_INDEXER_FIX}"
    )
    assert (
        waiting_line({"lag": 1}, Embedding("hub")) == "1 turn waits and the hub's indexer is embedding them"
    )


def test_who_embeds_asks_the_hub_whether_it_indexes(service: Any, settings: Any) -> None:
    from memviewer.wire.hub import Hub

    async def main() -> tuple[Embedding, Embedding]:
        idle = Hub(service, settings.socket_path, start_indexer=False)  # `serve --no-index`
        await idle.start()
        try:
            without = await asyncio.to_thread(who_embeds, settings)
        finally:
            await idle.close()
        hub = Hub(service, settings.socket_path)
        await hub.start()
        try:
            with_indexer = await asyncio.to_thread(who_embeds, settings)
        finally:
            await hub.close()
        return without, with_indexer

    without, with_indexer = asyncio.run(main())
    assert without.indexer is None and without.idle_hub == str(settings.socket_path)
    assert "--no-index" in str(without.fix)
    assert with_indexer == Embedding("hub")


# -- recall ---------------------------------------------------------------------------------


def test_recall_names_who_embeds_and_a_fresh_turn_does_not_escalate(service: Any) -> None:
    _seed(service, "s-a", ["the heron migration plan is ready"])
    service.sync_index()
    _seed(service, "s-b", ["zanzibar rollout checklist"])  # stored long ago, not embedded
    d = service.recall("zanzibar rollout")["diagnostics"]
    assert INDEX_LAGGING in d["escalations"]
    assert d["index_lag"]["indexer"] is None and d["index_lag"]["fix"] == NO_INDEXER_FIX
    assert d["index_lag"]["within_grace"] is False
    line = lag_warning(d)
    assert line is not None and "1 turn not embedded yet" in line
    assert line.endswith(f"no indexer runs: {NO_INDEXER_FIX}")
    service.sync_index()
    _live_turn(service, "s-live", "kumquat delivery schedule")  # published this second
    out = service.recall("kumquat delivery")
    d = out["diagnostics"]
    assert INDEX_LAGGING not in d["escalations"] and lag_warning(d) is None
    assert d["index_lag"]["lag"] == 1 and d["index_lag"]["within_grace"] is True
    assert d["index_lag"]["keyword_results"] == 1  # still found, by keyword
    assert lag_warning({"escalations": [INDEX_LAGGING], "index_lag": {"lag": 2, "indexer": "hub"}}) == (
        "index: 2 turns not embedded yet; the hub's indexer is embedding them"
    )


def test_recall_json_through_a_hub_that_does_not_index_says_no_indexer(service: Any, settings: Any) -> None:
    from memviewer.wire.hub import Hub

    _seed(service, "s-a", ["the heron migration plan is ready"])
    service.sync_index()
    _seed(service, "s-b", ["zanzibar rollout checklist"])

    async def main() -> Any:
        hub = Hub(service, settings.socket_path, start_indexer=False)
        await hub.start()
        try:
            return await asyncio.to_thread(invoke_on, settings, "recall", "zanzibar rollout", "--json")
        finally:
            await hub.close()

    res = asyncio.run(main())
    assert res.exit_code == 0, res.output
    lag = json.loads(res.stdout)["diagnostics"]["index_lag"]
    assert lag["lag"] == 1 and lag["indexer"] is None and "--no-index" in lag["fix"]


# -- doctor ---------------------------------------------------------------------------------


def test_doctor_fails_when_turns_wait_and_nothing_embeds_them(service: Any, settings: Any) -> None:
    _seed(service, "s-a", ["the heron plan"])
    service.sync_index()
    _seed(service, "s-b", ["stored, never embedded", "nobody runs an indexer"])
    res = invoke_on(settings, "doctor", "--json")
    assert res.exit_code == 1
    check = next(c for c in json.loads(res.stdout)["checks"] if c["name"] == "vector index")
    assert not check["ok"]
    assert f"2 turns wait and nothing is embedding them: {NO_INDEXER_FIX}" in check["detail"]
    assert check["indexer"] is None and check["lag"]["lag"] == 2 and check["lag"]["within_grace"] is False
    lance = paths.lance_dir(settings.home_path)
    (lance / CATCH_UP_PID).write_text(str(os.getpid()), encoding="ascii")  # a catch-up at work
    check = doctor._index(settings)
    assert (
        f"a background `memviewer reindex --catch-up` (pid {os.getpid()}) is embedding them"
        in check["detail"]
    )
    assert check["indexer"] == "background"


def test_a_turn_stored_just_now_does_not_make_doctor_fail(
    service: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timing, "CATCH_UP_GRACE_S", 3600.0)  # "just now" however slow the machine
    _seed(service, "s-a", ["the heron plan"])
    service.sync_index()
    _live_turn(service, "s-live", "a turn this second")
    check = doctor._index(settings)
    assert check["ok"], check
    assert "catching up" in check["detail"] and check["lag"]["within_grace"] is True
    assert "indexer" not in check  # nobody was asked: nothing to say


def test_a_session_opened_seconds_ago_may_lack_its_summary(
    service: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summaries table is read a moment behind the watermark (or the pass is still
    writing): a missing first summary of a session active within the summarizer's delay
    is pending, not a gap; one of a session quiet for long still fails doctor."""
    from memviewer.index.lance import SUMMARIES

    monkeypatch.setattr(timing, "SUMMARY_GRACE_S", 3600.0)
    _seed(service, "s-old", ["the heron plan"])
    _live_turn(service, "s-live", "a turn this second")
    service.sync_index()
    for sid in ("s-live", "s-old"):
        service.parts.lance.delete_where(f"session_id = '{sid}'", SUMMARIES)
        check = doctor._index(settings)
        summaries = check["integrity"]["summaries"]
        if sid == "s-live":  # only the live session's summary is missing: pending
            assert check["ok"], check
            assert summaries["missing"] == 0 and summaries["pending"] == 1
        else:
            assert not check["ok"] and "1 of 2 sessions have no summary (e.g. s-old)" in check["detail"]
            assert summaries["missing"] == 1 and summaries["pending"] == 1


# -- import -----------------------------------------------------------------------------------


def test_an_import_says_when_its_background_indexer_dies_at_once(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = "import sys; print('ModelNotFoundError: no model here'); sys.exit(3)"
    monkeypatch.setattr(background_index, "SELF_COMMAND", (sys.executable, "-c", script))
    res = invoke_on(settings, "import", "praisonai", str(FIXTURES), "--json")
    assert res.exit_code == 0, res.output  # the sessions are stored and keyword-searchable
    index = json.loads(res.stdout)["index"]
    assert index["lag"] > 0 and index["indexer"] is None and index["fix"] == NO_INDEXER_FIX
    assert index["catch_up"]["exit_code"] == 3
    assert index["catch_up"]["log_tail"] == ["ModelNotFoundError: no model here"]
    assert "exited at once with status 3" in res.stderr and "no model here" in res.stderr
    assert f"hint: {NO_INDEXER_FIX}" in res.stderr
    human = background_index.describe(index)
    assert "no indexer runs: run `memviewer reindex --catch-up`" in human


def test_the_import_trusts_a_catch_up_once_its_pid_file_is_written(settings: Any) -> None:
    lance = paths.lance_dir(settings.home_path)
    lance.mkdir(parents=True)
    pid_file = lance / CATCH_UP_PID
    code = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code, str(pid_file)])
    try:
        started = time.monotonic()
        assert background_index.watch_start(proc, settings.home_path, timeout=60) is None
        assert time.monotonic() - started < 30  # returned on the pid file, not the timeout
        assert catch_up_pid(settings.home_path) == proc.pid
    finally:
        proc.kill()
        proc.wait()
