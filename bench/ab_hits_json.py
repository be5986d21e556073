"""Would building a search answer's messages as JSON in SQLite beat Python's dicts? (No.)

Issue 17's eighth round asked whether the hits' windows and bookends could come out of SQLite
as JSON text (one array per part, spliced into the answer with ``orjson.Fragment``) instead of
one Python dict and one ``timeutil.iso`` call per message. This script measures exactly that on
a benchmark home, for the hits the planted phrases' searches return (5 hits, ~75 messages):

* ``python``: ``keyword_candidates.hit_rows`` (one compound statement), the rows sorted, one
  dict per message with ``iso(timestamp)``, ``orjson.dumps`` of the parts;
* ``sqlite``: one statement per hit whose scalar subqueries return each part as JSON text
  (``'[' || group_concat(message, ',') || ']'`` over ``ORDER BY idx`` subqueries; a message
  is ``'{"index":' || idx || ',"role":' || json_quote(role) || …``, its timestamp made by the
  SQL below, which gives ``iso``'s text for every turn of the home: checked), then
  ``orjson.dumps`` of the fragments.

Both give the same decoded value (checked). Timed per pick set, the two interleaved, warm and
after touching 16 MB (a cold cache, as a hub's thread meets it after a wake-up), and then the
per-row cost of the pieces on the window rows alone. Not in the package: ``memviewer`` keeps
the Python path (docs/benchmarks.md, "Keyword search, eighth round").

    cd /tmp && PYTHONPATH=/path/to/tree python -m bench ab_hits_json \\
        --home DIR/home-2000 --planted DIR/sessions-2000.planted.json
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench import harness
from memviewer.recall.keyword import KeywordSearch
from memviewer.store import keyword_candidates as kc
from memviewer.store.db import Store
from memviewer.timeutil import LATEST, iso

# ``iso``'s text in SQL: microseconds as ``fromtimestamp`` rounds them (half to even, from the
# same double operations: the fraction times 1e6), the carry into the next second, the
# date and time from ``datetime()``.
_X = "((timestamp - cast(timestamp AS integer)) * 1e6)"
_D = f"({_X} - cast({_X} AS integer))"
_U = f"(cast({_X} AS integer) + ({_D} > 0.5) + ({_D} = 0.5 AND cast({_X} AS integer) % 2 = 1))"
ISO_SQL = (
    f"CASE WHEN typeof(timestamp) IN ('real', 'integer') AND timestamp >= 0 AND timestamp < {LATEST!r} "
    f"THEN replace(datetime(cast(timestamp AS integer) + ({_U} = 1000000), 'unixepoch'), ' ', 'T') || "
    f"CASE WHEN {_U} % 1000000 THEN '.' || substr(1000000 + {_U} % 1000000, 2) ELSE '' END || 'Z' END"
)
MSG_SQL = (
    "'{\"index\":' || idx || ',\"role\":' || json_quote(role) || ',\"content\":' || json_quote(content) || "
    f"',\"timestamp\":' || json_quote({ISO_SQL}) || ',\"archived\":' || "
    "CASE WHEN archived THEN 'true' ELSE 'false' END || '}'"
)
CONV = "role IN ('user', 'assistant')"


def _array(inner: str) -> str:
    return f"(SELECT '[' || coalesce(group_concat(m, ','), '') || ']' FROM ({inner}))"


def hit_sql(bookend: int) -> str:
    window = _array(
        f"SELECT {MSG_SQL} AS m FROM turns WHERE session_id = ?1 AND idx BETWEEN ?2 AND ?3 ORDER BY idx"
    )
    opening = _array(
        f"SELECT {MSG_SQL} AS m FROM turns WHERE session_id = ?1 AND {CONV} ORDER BY idx LIMIT {bookend}"
    )
    closing = _array(
        f"SELECT m FROM (SELECT idx, {MSG_SQL} AS m FROM turns WHERE session_id = ?1 AND {CONV} "
        f"ORDER BY idx DESC LIMIT {bookend}) ORDER BY idx"
    )
    return f"SELECT {window}, {opening}, {closing}"


Picks = list[tuple[str, int, bool]]


def python_path(db: kc.KeywordDb, picks: Picks, window: int, bookend: int) -> bytes:
    rows = kc.hit_rows(db, picks, window, bookend)
    rows.sort()
    parts: list[list[list[dict[str, Any]]]] = [[[], [], []] for _ in picks]
    for k, part, idx, role, content, ts, archived in rows:
        if part < 3:
            parts[k][part].append(
                {
                    "index": idx,
                    "role": role,
                    "content": content,
                    "timestamp": iso(ts),
                    "archived": bool(archived),
                }
            )
    return orjson.dumps(parts)


def sqlite_path(db: kc.KeywordDb, picks: Picks, window: int, bookend: int) -> bytes:
    assert db.raw is not None
    sql = hit_sql(bookend)
    out = []
    for sid, anchor, _ in picks:
        w, o, c = db.raw.execute(sql, (sid, anchor - window, anchor + window)).fetchone()
        out.append([orjson.Fragment(w), orjson.Fragment(o), orjson.Fragment(c)])
    return orjson.dumps(out)


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--planted", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=10)
    args = harness.parse(
        ap,
        {"home": lambda: harness.search_home()[0], "planted": lambda: harness.search_home()[1], "rounds": 1},
    )
    harness.header("ab_hits_json")
    logging.disable(logging.WARNING)
    store = Store.open(args.home / "memviewer.db", readonly=True)
    ks = KeywordSearch(store)
    planted = [p["query"] for p in json.loads(args.planted.read_text())]
    sets: list[Picks] = []
    for q in planted:
        hits = ks.search(q, limit=5, window=5)["results"]
        sets.append([(h["session_id"], h["anchor_index"], False) for h in hits])
    print(f"# {args.home}")
    with ks._reader() as db:  # noqa: SLF001 - a bench reads through the search's own connection
        stamps = db.all(f"SELECT timestamp, {ISO_SQL} FROM turns")
        wrong = sum(1 for ts, text in stamps if iso(ts) != text)
        print(f"ISO_SQL = iso() on {len(stamps) - wrong} of {len(stamps)} turns")
        for picks in sets:
            a = json.loads(python_path(db, picks, 5, 2))
            b = json.loads(sqlite_path(db, picks, 5, 2))
            assert a == b, "the two paths disagree"
        print(f"same decoded parts for {len(sets)} pick sets")
    junk = bytearray(16 << 20)
    paths: dict[str, Callable[[kc.KeywordDb, Picks, int, int], bytes]] = {
        "python": python_path,
        "sqlite": sqlite_path,
    }
    for cold in (False, True):
        got: dict[str, list[int]] = {k: [] for k in paths}
        for rnd in range(args.rounds):
            for i, picks in enumerate(sets):
                order = list(paths.items())
                if (rnd + i) % 2:
                    order.reverse()
                for name, fn in order:
                    with ks._reader() as db:  # noqa: SLF001
                        if cold:
                            junk[::64] = bytes(len(junk) // 64)
                        t = time.perf_counter_ns()
                        fn(db, picks, 5, 2)
                        got[name].append(time.perf_counter_ns() - t)
        p50 = {k: statistics.median(v) / 1e3 for k, v in got.items()}
        print(
            f"{'cold' if cold else 'warm'}: python {p50['python']:.0f} µs, sqlite {p50['sqlite']:.0f} µs "
            f"(sqlite / python {p50['sqlite'] / p50['python']:.2f}), {len(got['python'])} pick sets each"
        )
    pieces = {
        "raw columns": "idx, role, content, timestamp, archived",
        "ISO_SQL alone": ISO_SQL,
        "message JSON without the timestamp": "'{\"index\":' || idx || ',\"role\":' || json_quote(role) || "
        "',\"content\":' || json_quote(content) || ',\"archived\":' || "
        "CASE WHEN archived THEN 'true' ELSE 'false' END || '}'",
        "MSG_SQL (with ISO_SQL)": MSG_SQL,
    }
    print("window rows only (5 hits × 11 rows), p50 µs per pick set:")
    with ks._reader() as db:  # noqa: SLF001
        assert db.raw is not None
        times: dict[str, list[int]] = {k: [] for k in [*pieces, "raw columns + dicts and iso() in Python"]}
        for _ in range(args.rounds):
            for picks in sets:
                for name in times:
                    expr = pieces.get(name, pieces["raw columns"])
                    sql = f"SELECT {expr} FROM turns WHERE session_id = ? AND idx BETWEEN ? AND ?"
                    t = time.perf_counter_ns()
                    for sid, anchor, _ in picks:
                        rows = db.raw.execute(sql, (sid, anchor - 5, anchor + 5)).fetchall()
                        if name.endswith("Python"):
                            [
                                {
                                    "index": r[0],
                                    "role": r[1],
                                    "content": r[2],
                                    "timestamp": iso(r[3]),
                                    "archived": bool(r[4]),
                                }
                                for r in rows
                            ]
                    times[name].append(time.perf_counter_ns() - t)
        for name, v in times.items():
            print(f"  {name}: {statistics.median(v) / 1e3:.0f}")
    ks.close()
    store.close()


if __name__ == "__main__":
    main()
