"""A process that migrates one PostgreSQL database when told to (tests/test_postgres.py).

Run as ``python pg_migrate_worker.py URL``: connects, prints ``ready``, waits for a line on
stdin (the start line: every process is connected before any migrates), runs ``migrate`` in
one transaction and prints the versions it applied as JSON (or ``error: …``).
"""

from __future__ import annotations

import json
import sys

from sqlalchemy import create_engine

from memviewer.store import migrations


def main(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
            conn.commit()  # end the autobegun transaction: migrate runs in one of its own
            print("ready", flush=True)
            sys.stdin.readline()
            with conn.begin():
                applied = migrations.migrate(conn)
        print(json.dumps(applied), flush=True)
        return 0
    except Exception as exc:
        print(f"error: {type(exc).__name__}: {exc}", flush=True)
        return 1
    finally:
        engine.dispose()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
