"""The typed reader API: both implementations satisfy it, bounds live once, and
``open_reader`` picks the hub serving the home or the store, never guessing."""

from __future__ import annotations

import inspect

import pytest

from memviewer.api import (
    MAX_SEARCH_LIMIT,
    MAX_TOP_K,
    Inspector,
    LocalService,
    Reader,
    RecallParams,
    SearchParams,
    open_reader,
)
from memviewer.config import Settings
from memviewer.errors import MemviewerError
from memviewer.service import MemoryService
from memviewer.wire.hub_service import HubService
from memviewer.wire.remote import RemoteService
from memviewer.wire.testing import HubProcess


def _members(protocol: type) -> set[str]:
    """A protocol's public members, its bases' included (Python 3.11 has no ``__protocol_attrs__``)."""
    out: set[str] = set()
    for base in protocol.__mro__:
        if getattr(base, "_is_protocol", False) and base.__module__ != "typing":
            names = (*vars(base), *getattr(base, "__annotations__", {}))
            out.update(m for m in names if not m.startswith("_"))
    return out


def _params(fn: object) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]  # type: ignore[arg-type]


def test_both_implementations_are_readers(service: MemoryService) -> None:
    """mypy checks the same in ``memviewer.api`` (``_conforms``); this is the run-time half:
    every member is there, and methods take the protocol's parameters."""
    assert isinstance(service, LocalService) and isinstance(service, Reader)
    assert {"sessions", "session", "search", "recall", "compare", "stats", "events", "last_seq", "close"} <= (
        _members(Reader)
    )
    assert {"why", "check_turn", "index_lag", "session_titles"} <= _members(Inspector)
    assert _members(Reader) <= _members(HubService)
    # Checked on the class: an instance check would read ``last_seq`` and dial the hub.
    for cls, protocol in ((RemoteService, Reader), (MemoryService, LocalService)):
        for name in _members(protocol):
            assert hasattr(cls, name) or name in ("readonly", "reranker"), (cls, name)
            want = getattr(protocol, name, None)
            if callable(want) and not isinstance(want, property):
                assert _params(getattr(cls, name)) == _params(want), (cls, name)


def test_compare_runs_a_and_b_through_the_reader(service: MemoryService) -> None:
    """``Reader.compare`` is the A/B of ``recall --vs``: both sides at one moment."""
    asked: list[dict[str, object]] = []

    def recall(query: str, **params: object) -> dict[str, object]:
        asked.append(params)
        return {"results": [], "diagnostics": {"params": {k: v for k, v in params.items() if k != "as_of"}}}

    remote = RemoteService("/nonexistent.sock")
    remote.recall = recall  # type: ignore[method-assign]
    ab = remote.compare("q", {"top_k": 5}, {"top_k": 9})
    assert [a["top_k"] for a in asked] == [5, 9] and asked[0]["as_of"] == asked[1]["as_of"]
    assert ab["query"] == "q" and ab["diff"] == []


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"query": ""}, "non-empty"),
        ({"query": "x", "top_k": 0}, "top_k"),
        ({"query": "x", "top_k": MAX_TOP_K + 1}, "top_k"),
        ({"query": "x", "top_sessions": True}, "top_sessions"),
        ({"query": "x", "mode": "sideways"}, "mode"),
        ({"query": "x", "weights": {"w_dense": 1.0}}, "unknown recall parameters"),
        ({"query": "x", "reranker": "mine"}, "unknown recall parameters"),
        ({"query": "x", "as_of": [1]}, "as_of"),
    ],
)
def test_recall_params_refuse(raw: dict, message: str) -> None:
    with pytest.raises(MemviewerError, match=message) as info:
        RecallParams.from_mapping(raw)
    assert info.value.code == "invalid_argument"


def test_recall_params_defaults_and_digits() -> None:
    params = RecallParams.from_mapping({"query": "q", "top_k": "7", "scope": ""})
    assert params.as_kwargs() == {
        "top_sessions": 5,
        "chunks_per_session": 3,
        "top_k": 7,
        "mode": "hierarchical",
    }


def test_search_params_bounds() -> None:
    assert SearchParams.from_mapping({"query": "x"}).limit == 5
    assert SearchParams.from_mapping({"window": 0}).window == 0
    with pytest.raises(MemviewerError, match="limit"):
        SearchParams.from_mapping({"limit": MAX_SEARCH_LIMIT + 1})
    with pytest.raises(MemviewerError, match="unknown search parameters"):
        SearchParams.from_mapping({"top_k": 3})


def test_open_reader_without_a_hub_reads_the_store(settings: Settings) -> None:
    with MemoryService(settings) as svc:
        svc.open_session(session_id="s-1", agent="a", scope="agent", scope_id="a")
    reader = open_reader(settings)
    try:
        assert isinstance(reader, MemoryService) and reader.readonly
        assert [s["session_id"] for s in reader.sessions()["sessions"]] == ["s-1"]
    finally:
        reader.close()


@pytest.mark.integration
def test_open_reader_talks_to_the_hub_serving_the_home(settings: Settings) -> None:
    hub = HubProcess(settings.home_path, settings.socket_path).start()
    try:
        reader = open_reader(settings)
        try:
            assert isinstance(reader, RemoteService)
            assert reader.sessions()["total"] == 0
            assert reader.hello()["pid"] == hub.pid
        finally:
            reader.close()
    finally:
        hub.stop()
