"""`memviewer import` merges the keyword index's segments before it returns (no hub serves
the home): one segment left, and the same answers as before the merge."""

from __future__ import annotations

import json
from pathlib import Path

from cli_runs import invoke_on

from memviewer.recall.keyword import KeywordSearch
from memviewer.service import MemoryService
from memviewer.store import fts

QUERIES = ["pelican rollback", "kiwi script", "release 7", "nothing like this"]


def _folder(tmp_path: Path, n: int) -> Path:
    """``n`` PraisonAI files: one session (one transaction, its own segments) each."""
    folder = tmp_path / "pa"
    folder.mkdir()
    for i in range(n):
        msgs = [
            {
                "role": "user",
                "content": f"what is the rollback plan for release {i}?",
                "timestamp": 1781100000 + i,
            },
            {
                "role": "assistant",
                "content": f"the pelican rollback {i}: run the kiwi script",
                "timestamp": 1781100001 + i,
            },
        ]
        (folder / f"s-{i}.json").write_text(json.dumps({"session_id": f"s-{i}", "messages": msgs}))
    return folder


def _no_automerge(settings) -> None:  # noqa: ANN001
    """FTS5's automerge off, as for a large import whose batches pile up segments faster than
    it merges them (it is a setting stored in the index, not private state of memviewer)."""
    svc = MemoryService(settings)
    try:
        with svc.store.write() as tx:
            for table in (fts.WORD_TABLE, fts.CJK_TABLE):
                tx.conn.exec_driver_sql(f"INSERT INTO {table}({table}, rank) VALUES ('automerge', 0)")
    finally:
        svc.close()


def _answers(settings) -> tuple[int, list[dict]]:  # noqa: ANN001
    svc = MemoryService(settings)
    try:
        ks = KeywordSearch(svc.store)
        try:
            return svc.keyword_segments(), [ks.search(q, limit=5, window=1) for q in QUERIES]
        finally:
            ks.close()
    finally:
        svc.close()


def test_an_import_ends_with_one_segment_and_the_same_answers(settings, tmp_path: Path) -> None:  # noqa: ANN001
    folder = _folder(tmp_path, 12)
    _no_automerge(settings)
    # The same files through the library call, which leaves the segments as written...
    svc = MemoryService(settings)
    try:
        assert len(svc.import_praisonai([folder], index=False).imported) == 12
    finally:
        svc.close()
    segments, before = _answers(settings)
    assert segments > 1
    assert before[0]["results"] and before[0]["results"][0]["session_id"].startswith("s-")
    # ...then `memviewer import` of them (a re-import: nothing changes but the merge).
    res = invoke_on(settings, "import", "praisonai", "--no-index", "--json", str(folder))
    assert res.exit_code == 0, res.output
    merged = json.loads(res.stdout)["keyword_index"]
    assert merged["by"] == "import"
    assert (merged["segments_before"], merged["segments_after"]) == (segments, 1)
    assert _answers(settings) == (1, before)
    doctor = json.loads(invoke_on(settings, "doctor", "--json").stdout)
    (check,) = [c for c in doctor["checks"] if c["name"] == "keyword index"]
    assert "; 1 segment (" in check["detail"]


def test_a_fresh_import_and_a_json_import_leave_one_segment(settings, tmp_path: Path) -> None:  # noqa: ANN001
    _no_automerge(settings)
    res = invoke_on(settings, "import", "praisonai", "--no-index", "--json", str(_folder(tmp_path, 10)))
    assert res.exit_code == 0, res.output
    merged = json.loads(res.stdout)["keyword_index"]
    assert merged["segments_before"] > 1 and merged["segments_after"] == 1
    # export → a new home (automerge off) → `import json` merges too
    out = tmp_path / "export.json"
    assert invoke_on(settings, "export", "--all", "--format", "json", "-o", str(out)).exit_code == 0
    other = settings.with_overrides(home=str(tmp_path / "home2"))
    _no_automerge(other)
    res = invoke_on(other, "import", "json", "--no-index", "--json", str(out))
    assert res.exit_code == 0, res.output
    merged = json.loads(res.stdout)["keyword_index"]
    assert merged["by"] == "import" and merged["segments_after"] == 1
    assert _answers(other) == _answers(settings)


def test_with_a_hub_serving_the_home_the_import_leaves_the_merge_to_it(
    service, settings, tmp_path: Path
) -> None:  # noqa: ANN001
    import asyncio

    from memviewer.wire.hub import Hub

    folder = _folder(tmp_path, 3)

    async def main() -> dict:
        hub = Hub(service, settings.socket_path, start_indexer=False)
        await hub.start()
        try:
            res = await asyncio.to_thread(
                invoke_on, settings, "import", "praisonai", "--no-index", "--json", str(folder)
            )
            assert res.exit_code == 0, res.output
            return json.loads(res.stdout)["keyword_index"]
        finally:
            await hub.close()

    merged = asyncio.run(main())
    assert merged["by"] == "hub" and merged["segments_after"] == merged["segments_before"]
