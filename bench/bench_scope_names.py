"""What reading a scope's names costs the first recall on it: the authors alone (a ``DISTINCT``
over ``metadata.speaker``, as before aliases) against the one pass that also counts the names
the authors call each other (``memviewer.store.authors.read_after``), interleaved, per scope and
for the whole home.

    python -m bench bench_scope_names HOME [--rounds 7]

HOME is any kept home, e.g. ``eval realtalk --keep-home``'s. Medians of ``rounds`` reads.
"""

from __future__ import annotations

import statistics
import time

from bench import harness


def main() -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("home")
    ap.add_argument("--rounds", type=int, default=7)
    args = harness.parse(ap, needs="a kept evaluation home")
    harness.header("bench_scope_names")

    from pathlib import Path

    from sqlalchemy import func, select

    from memviewer.store.authors import S, T, read_after
    from memviewer.store.db import Store

    store = Store(f"sqlite:///{Path(args.home) / 'memviewer.db'}", readonly=True)

    def distinct(conn, scope, scope_id):  # type: ignore[no-untyped-def]
        speaker = func.json_extract(T.c.meta, "$.speaker")
        q = select(speaker).distinct().where(T.c.num > 0, T.c.meta.is_not(None), speaker.is_not(None))
        if scope_id:
            q = q.join(S, S.c.id == T.c.session_id).where(S.c.scope == scope, S.c.scope_id == scope_id)
        return {v for (v,) in conn.execute(q)}

    with store.read() as conn:
        scopes = [tuple(r) for r in conn.execute(select(S.c.scope, S.c.scope_id).distinct())]
        counts = {
            sid: n
            for sid, n in conn.execute(
                select(S.c.scope_id, func.count())
                .select_from(T.join(S, S.c.id == T.c.session_id))
                .group_by(S.c.scope_id)
            )
        }
    harness.footer()
    print(f"{'scope':32s} {'turns':>6s} {'authors ms':>10s} {'one pass ms':>11s} {'ratio':>6s}")
    for scope, scope_id in [*scopes[:10], (None, None)]:
        old, new = [], []
        for i in range(args.rounds):
            for arm in (0, 1) if i % 2 else (1, 0):
                with store.read() as conn:
                    t0 = time.perf_counter()
                    if arm:
                        read_after(conn, scope, scope_id, 0)
                    else:
                        distinct(conn, scope, scope_id)
                    (new if arm else old).append((time.perf_counter() - t0) * 1000)
        n = counts.get(scope_id, 0) if scope_id else sum(counts.values())
        a, b = statistics.median(old), statistics.median(new)
        print(f"{str(scope_id or 'whole home'):32s} {n:6d} {a:10.2f} {b:11.2f} {b / a:6.2f}")
    store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
