"""Whatever a user types, search answers with results or a clean error dict, never a traceback."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_backends import BACKENDS, store_on

from memviewer.recall import fts_query
from memviewer.recall.keyword import KeywordSearch
from memviewer.session.manager import SessionManager

T0 = 1_781_000_000.0
NASTY = [
    '"unbalanced',
    'bare "quote" "',
    "AND",
    "OR OR",
    "NOT x",
    "NEAR(a b",
    "NEAR(a b, 2)",
    "*",
    "a*",
    "-",
    "-foo",
    "+bar",
    "(",
    ")",
    "((x))",
    "^start",
    "col:value",
    "content:secret",
    "{a b}",
    "a:b:c",
    '""',
    '"""',
    "“curly”",
    "「括弧",
    "'single'",
    "\\",
    "%",
    "_",
    "% _ \\",
    "\x00",
    "\x00abc",
    "\t\n",
    "🙂",
    "e\u0301",
    "ǅ",
    "a" * 3000,
    "数据" * 50,
    "x " * 200,
    "SELECT * FROM turns;",
    "'; DROP TABLE turns; --",
    "bm25(turns_fts)",
    "rank MATCH 'x'",
    "\u202e",
    "\ud7ff",
    "NEAR",
    "AND OR NOT",
    "a AND",
    "OR b",
]


@pytest.fixture(scope="module", params=BACKENDS)
def ks(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """One store per backend (SQLite; PostgreSQL when the test server is set)."""
    with store_on(request.param, tmp_path_factory.mktemp("syntax")) as store:
        mgr = SessionManager(store)
        texts = ["col:value pairs and a NEAR miss", "数据数据 in 查询", "50% off_sale \\ path"]
        for s, text in enumerate(texts):
            mgr.import_session(
                {"id": f"s{s}", "title": f"s{s}", "started_at": T0},
                [{"id": f"s{s}-0", "role": "user", "content": text, "timestamp": T0}],
            )
        yield KeywordSearch(store)


def _check(result: dict) -> None:
    assert isinstance(result, dict)
    if result["success"]:
        assert result["mode"] in ("discovery", "browse")
        assert isinstance(result["results"], list)
    else:
        assert set(result) == {"success", "mode", "error", "code", "hint"}
        assert result["code"] == "invalid_argument"
        assert result["error"] and result["hint"] and "internal" not in result["error"]


@pytest.mark.parametrize("query", NASTY)
def test_known_troublemakers(ks: KeywordSearch, query: str) -> None:
    _check(ks.search(query))


def test_operators_are_plain_text(ks: KeywordSearch) -> None:
    r = ks.search("col:value")
    assert r["results"][0]["session_id"] == "s0"
    assert ks.search("50%")["results"][0]["session_id"] == "s2"
    bad = ks.search("***")
    assert bad["success"] is False and "quoted phrase" in bad["hint"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=80))
def test_arbitrary_queries_never_raise(ks: KeywordSearch, query: str) -> None:
    _check(ks.search(query))


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('ab "*-()^:+.NEAROTD数据\\%_')), max_size=30))
def test_operator_soup_never_raises(query: str) -> None:
    try:
        pq = fts_query.parse(query)
    except Exception as exc:  # only the documented error
        assert getattr(exc, "code", None) == "invalid_argument"
        return
    match = fts_query.word_match(pq)
    if match:
        import sqlite3

        conn = sqlite3.connect(":memory:")
        conn.execute("CREATE VIRTUAL TABLE f USING fts5(content, tokenize='porter unicode61')")
        conn.execute("SELECT rowid FROM f WHERE f MATCH ?", (match,)).fetchall()
