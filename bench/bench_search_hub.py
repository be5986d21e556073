"""Benchmark: keyword search through a real hub's JSON-RPC ``search`` vs PraisonAI's
``SqliteSessionStore.search`` in-process, same PraisonAI folder, one run, interleaved.

Per query the engines run back to back (order alternating), ``--rounds`` times, so the
shared machine's load hits both alike. Also timed, in the same loop: memviewer's
``KeywordSearch.search`` in-process (no socket), the same with ``broad_bm25=True`` (the
ranking before the windowed common-word scorer: FTS5 BM25 over every match, or the newest
1,000 when every word is common), and two bare FTS5 statements on the same database in
SQLite alone: ``MATCH … ORDER BY rank LIMIT 400`` (BM25 over every match) and
``MATCH … ORDER BY rowid DESC LIMIT 100`` (the unranked walk the common-word path uses):
the physical floor of a keyword query. For common-word queries it also prints how often
the new top-1 equals the old one and the overlap of the top 5.

``--baseline DIR`` also starts a second hub from another source tree (``DIR`` holding a
``memviewer`` package, e.g. ``git archive MERGE_BASE memviewer | tar -x -C DIR``) on a copy
of the same home (one home, one hub), read with that tree's frame check
(``protocol.decode``, or with ``--base-client same`` the standard library's
``protocol.decode_answer``, or with ``--base-client fastjson`` this tree's
``wire/fastjson.py``, as a base that has it reads its answers; this tree's hub is read as its
CLI reads it, through ``wire/fastjson.py``), and times it in the same loop: the branch against its base, side
by side. Every hub search is also written to the recall log, as a CLI search is.

Setup: ``pip install -e '.[dev,bench]'`` (``praisonaiagents`` 1.7.17, no torch).

    python -m bench bench_search_hub --sizes 2000 10000

Corpora and databases go under ``--work`` (reused between runs). Results:
``docs/benchmarks.md``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from bench import (
    harness,
    search_corpus,
)
from memviewer.praisonai.format import iter_session_files, load_file
from memviewer.recall import fts_query
from memviewer.recall.keyword import KeywordSearch
from memviewer.session.manager import SessionManager
from memviewer.store.db import Store
from memviewer.wire import protocol
from memviewer.wire.syncclient import HubUnavailable, RpcConnection
from memviewer.wire.testing import HubProcess

try:  # this tree's CLI reads answers through orjson (wire/fastjson.py); a base tree's did not
    from memviewer.wire.fastjson import decode_answer as _decode_answer
except ImportError:  # pragma: no cover - an older tree
    _decode_answer = protocol.decode_answer


def _corpus(work: Path, n: int, planted: int) -> tuple[Path, list[dict]]:
    folder = work / f"sessions-{n}"
    meta = work / f"sessions-{n}.planted.json"
    if not meta.exists():
        search_corpus.generate(folder, n, planted)
    return folder, json.loads(meta.read_text())


def _home(work: Path, folder: Path, n: int) -> Path:
    """A memviewer home holding the imported folder (keyword index only, like --no-index)."""
    home = work / f"home-{n}"
    db = home / "memviewer.db"
    if (home / "imported").exists():
        return home
    home.mkdir(parents=True, exist_ok=True)
    for p in home.glob("memviewer.db*"):
        p.unlink()
    store = Store.open(db)
    mgr = SessionManager(store)
    files = sorted(iter_session_files([folder]))
    t = time.perf_counter()
    for i in range(0, len(files), 500):
        with store.write():
            for path in files[i : i + 500]:
                mgr.import_session(*load_file(path))
    print(f"  imported {len(files)} sessions in {time.perf_counter() - t:.1f}s", flush=True)
    store.close()
    (home / "imported").touch()
    return home


class _BaseConnection(RpcConnection):
    """The client as the base tree had it: every answer through ``protocol.decode``."""

    def read_message(self) -> dict:
        line = self._rfile.readline()
        if not line:
            raise HubUnavailable(None, "hub closed the connection")
        return protocol.decode(line)


def _base_home(home: Path) -> Path:
    """A copy of the home for the baseline hub (one home, one hub); recopied when older."""
    copy = home.with_name(home.name + "-base")
    src = home / "memviewer.db"
    if not (copy / "copied").exists() or (copy / "copied").stat().st_mtime < src.stat().st_mtime - 3600:
        shutil.rmtree(copy, ignore_errors=True)
        copy.mkdir(parents=True)
        ro = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
        dst = sqlite3.connect(copy / "memviewer.db")
        ro.backup(dst)
        dst.close()
        ro.close()
        (copy / "copied").touch()
    return copy


def _top5(ks: KeywordSearch, q: str) -> list[str]:
    return [h["session_id"] for h in ks.search(q, limit=5, window=5).get("results", [])]


def _load() -> str:
    return harness.load()


def _p50(xs: list[float]) -> float:
    return statistics.median(xs)


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000])
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/mvbench-hub"))
    ap.add_argument("--baseline", type=Path, help="a source tree holding the base's memviewer package")
    ap.add_argument(
        "--base-client",
        choices=("same", "decode", "fastjson"),
        default="same",
        help="read the base hub's answers with the standard library's decode_answer (same), through "
        "the full frame check protocol.decode (decode: a base older than decode_answer) or through "
        "wire/fastjson.py like this tree's hub (fastjson: a base that has it)",
    )
    args = harness.parse(ap, {"sizes": [60], "queries": 3, "rounds": 1, "work": harness.scratch})
    harness.header("bench_search_hub")
    logging.disable(logging.WARNING)
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.baseline:
        args.baseline = args.baseline.resolve()
    # A hub process runs ``python -c``, whose sys.path starts with the working directory: run
    # from this tree's root, the "base" hub would import this tree's memviewer, not --baseline's.
    os.chdir(args.work)
    from praisonaiagents.session import SqliteSessionStore

    print(
        f"# SQLite {sqlite3.sqlite_version}",
        flush=True,
    )
    rows = [
        "| sessions | queries | hub search p50 ms | base hub p50 ms | PraisonAI / base hub "
        "| in-process p50 ms | in-process, old ranking p50 ms "
        "| bare MATCH ORDER BY rank p50 ms | bare MATCH unranked LIMIT 100 p50 ms "
        "| PraisonAI p50 ms | ratio (PraisonAI / hub) | top-1 (hub = planted / PraisonAI = planted; "
        "common: new = old) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for n in args.sizes:
        folder, planted = _corpus(args.work, n, min(args.queries, n))
        home = _home(args.work, folder, n)
        sq = SqliteSessionStore(session_dir=str(folder), db_path=str(args.work / f"praisonai-{n}.db"))
        t = time.perf_counter()
        sq.search("warm up the index")
        print(f"  {n}: SqliteSessionStore first search {time.perf_counter() - t:.1f}s", flush=True)
        store = Store.open(home / "memviewer.db", readonly=True)
        ks = KeywordSearch(store)
        ks_old = KeywordSearch(store, broad_bm25=True)
        raw = sqlite3.connect(f"file:{home / 'memviewer.db'}?mode=ro", uri=True)
        sock = args.work / f"hub-{n}.sock"
        base_hub: HubProcess | None = None
        if args.baseline:
            base_hub = HubProcess(
                _base_home(home),
                args.work / f"hub-base-{n}.sock",
                args=("--no-index",),
                extra_env={"PYTHONPATH": str(args.baseline.resolve())},
            ).start()
        with HubProcess(home, sock, args=("--no-index",)) as _hub:
            conn = RpcConnection(sock, decode=_decode_answer)
            conn.call(protocol.HELLO, {"protocol": protocol.PROTOCOL_VERSION, "role": "reader"})

            def hub(q: str, conn: RpcConnection = conn) -> str | None:
                r = conn.call(protocol.SEARCH, {"query": q, "limit": 5, "window": 5})
                return r["results"][0]["session_id"] if r.get("results") else None

            base_conn: RpcConnection | None = None
            if base_hub is not None:
                if args.base_client == "fastjson":
                    base_conn = RpcConnection(base_hub.socket_path, decode=_decode_answer)
                else:
                    client = _BaseConnection if args.base_client == "decode" else RpcConnection
                    base_conn = client(base_hub.socket_path)
                base_conn.call(protocol.HELLO, {"protocol": protocol.PROTOCOL_VERSION, "role": "reader"})

            def hub_base(q: str, bc: RpcConnection | None = base_conn) -> str | None:
                assert bc is not None
                r = bc.call(protocol.SEARCH, {"query": q, "limit": 5, "window": 5})
                return r["results"][0]["session_id"] if r.get("results") else None

            def inproc(q: str, ks: KeywordSearch = ks) -> str | None:
                r = ks.search(q, limit=5, window=5)
                return r["results"][0]["session_id"] if r.get("results") else None

            def inproc_old(q: str, ks: KeywordSearch = ks_old) -> str | None:
                r = ks.search(q, limit=5, window=5)
                return r["results"][0]["session_id"] if r.get("results") else None

            def walk(q: str, raw: sqlite3.Connection = raw) -> str | None:
                match = fts_query.word_match(fts_query.parse(q)) or '""'
                sql = "SELECT rowid FROM turns_fts WHERE turns_fts MATCH ? ORDER BY rowid DESC LIMIT 100"
                got = raw.execute(sql, (match,)).fetchall()
                return str(got[0][0]) if got else None

            def bare(q: str, raw: sqlite3.Connection = raw) -> str | None:
                match = fts_query.word_match(fts_query.parse(q)) or '""'
                sql = "SELECT rowid FROM turns_fts WHERE turns_fts MATCH ? ORDER BY rank LIMIT 400"
                got = raw.execute(sql, (match,)).fetchall()
                return str(got[0][0]) if got else None

            def pa(q: str, sq: SqliteSessionStore = sq) -> str | None:
                hits = sq.search(q, limit=5, window=5)
                return hits[0].session_id if hits else None

            engines: dict[str, Callable[[str], str | None]] = {
                "hub": hub,
                "inproc": inproc,
                "old": inproc_old,
                "bare": bare,
                "walk": walk,
                "pa": pa,
            }
            if base_conn is not None:
                engines["base"] = hub_base
            phrases = [p["query"] for p in planted]
            truth = [p["session_id"] for p in planted]
            common = [q for q in search_corpus.COMMON_QUERIES if q.isascii()]
            for name, qs in (("rare phrase", phrases), ("common words", common)):
                times: dict[str, list[float]] = {k: [] for k in engines}
                tops: dict[str, list[str | None]] = {k: [] for k in engines}
                for fn in engines.values():
                    fn(qs[0])
                    fn(qs[-1])
                for rnd in range(args.rounds):
                    for i, q in enumerate(qs):
                        order = list(engines.items())
                        if (rnd + i) % 2:
                            order.reverse()
                        for key, fn in order:
                            t0 = time.perf_counter()
                            top = fn(q)
                            times[key].append((time.perf_counter() - t0) * 1000)
                            if rnd == 0:
                                tops[key].append(top)
                agree = ""
                if name == "common words":
                    same = sum(a == b for a, b in zip(tops["inproc"], tops["old"], strict=True))
                    five = [len(set(_top5(ks, q)) & set(_top5(ks_old, q))) for q in qs]
                    agree = f"same top-1 {same}/{len(qs)}, top-5 overlap {sum(five)}/{5 * len(qs)}"
                if name == "rare phrase":
                    h = sum(a == b for a, b in zip(tops["hub"], truth, strict=True))
                    p = sum(a == b for a, b in zip(tops["pa"], truth, strict=True))
                    same = sum(a == b for a, b in zip(tops["hub"], tops["pa"], strict=True))
                    agree = f"{h}/{len(qs)} / {p}/{len(qs)} (same top-1 {same}/{len(qs)})"
                if base_conn is not None:
                    same = sum(a == b for a, b in zip(tops["hub"], tops["base"], strict=True))
                    agree += f"; hub top-1 = base hub {same}/{len(qs)}"
                med = {k: _p50(v) for k, v in times.items()}
                base = (
                    f"{med['base']:.2f} | {med['pa'] / med['base']:.1f}x | "
                    if base_conn is not None
                    else "– | – | "
                )
                row = (
                    f"| {n} | {name} | {med['hub']:.2f} | {base}{med['inproc']:.2f} | {med['old']:.2f} | "
                    f"{med['bare']:.3f} | {med['walk']:.3f} | "
                    f"{med['pa']:.2f} | {med['pa'] / med['hub']:.1f}x | {agree or '–'} |"
                )
                rows.append(row)
                print(row, f"(load {_load()})", flush=True)
            conn.close()
            if base_conn is not None:
                base_conn.close()
        if base_hub is not None:
            base_hub.stop()
        ks.close()
        ks_old.close()
        store.close()
        raw.close()
    print("\n" + "\n".join(rows))


if __name__ == "__main__":
    main()
