"""A query none of whose words is in the index answers with nothing, without the ranked
statement (``KeywordSearch._discovery`` skips it when the unit counts are all zero); the
counts are read in the search's own snapshot, so a word stored a moment later is found."""

from __future__ import annotations

from dated import ASKED, add_dated_session, cooking_sessions


def test_absent_words_give_the_empty_discovery_answer(service) -> None:  # noqa: ANN001
    cooking_sessions(service)
    out = service.search("zzqx flurbish", limit=5, window=5)
    assert out == {
        "success": True,
        "mode": "discovery",
        "query": "zzqx flurbish",
        "total_found": 0,
        "results": [],
    }
    assert list(out) == ["success", "mode", "query", "total_found", "results"]


def test_a_word_absent_then_stored_is_found(service) -> None:  # noqa: ANN001
    cooking_sessions(service)
    search = service.keyword()
    assert search.search("flurbish")["total_found"] == 0
    assert search.search("flurbish paella")["total_found"] == 1  # one word present is enough
    add_dated_session(service, "s-new", [(ASKED, "user", "the flurbish gadget broke again")])
    out = search.search("flurbish")
    assert out["total_found"] == 1 and out["results"][0]["session_id"] == "s-new"
    assert search.search("zzqx flurbish")["results"][0]["anchor_index"] == 0
