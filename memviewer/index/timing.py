"""How quickly a background indexer follows the store, and so how long a lag is normal.

Its own module so that ``index.runner`` (which runs on these numbers) and
``index.progress`` (which judges a lag by them, without LanceDB) share them without
importing each other.
"""

from __future__ import annotations

BATCH_TURNS = 64  # a woken indexer gathers this many turns ...
BATCH_WAIT_S = 0.2  # ... or waits this long, then runs a pass
POLL_S = 1.0  # an idle indexer checks this often for rows other processes committed
#: One live pass: the publisher's send and the hub's commit, reading the new rows,
#: embedding up to ``BATCH_TURNS`` turns and the touched sessions' summaries.
LIVE_PASS_S = 3.0
#: How long a stored turn may wait for its embedding before that is worth saying: an
#: indexer sees new rows within ``POLL_S`` (at once for its own hub's writes), gathers a
#: batch for ``BATCH_WAIT_S``, then runs one pass: 4.2 s. Docs: cli.md, "Index lag".
CATCH_UP_GRACE_S = POLL_S + BATCH_WAIT_S + LIVE_PASS_S
#: A session's first summary is written by the pass that embeds its first turns, so a
#: session last active less than this ago may lack one without anything being wrong.
SUMMARY_GRACE_S = CATCH_UP_GRACE_S
