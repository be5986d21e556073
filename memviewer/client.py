"""The publisher an agent embeds: standard library only, never blocks the agent.

```python
from memviewer.client import Publisher

with Publisher() as pub:
    sid = pub.open_session(agent="my-agent", scope="user", scope_id="u42")
    eid = pub.start_episode(sid, "fix the flaky test")
    pub.add_turn(eid, "assistant", "Reading the log…")
    pub.finalize_episode(eid)
    pub.close_session(sid)
    pub.flush(timeout=10.0)
```

Every call mints its ids (UUIDv7), stamps the time, validates the obvious
(``ValueError`` at call time), appends the encoded command to a bounded
in-memory queue and returns: no call does file or socket I/O on the caller's
thread. Two background threads do it all:

* the **sender** owns the socket: it sends the oldest unacknowledged commands
  in ``publish`` batches and counts a command as done only when the hub
  acknowledged it (committed to SQLite);
* the **spooler** owns the spool (``<home>/spool``, segment files of one JSON
  line per command, see :mod:`memviewer.wire.spool_segments`): every command
  not acknowledged ``sync_interval`` seconds (default 0.05) after it was
  queued is appended and fsync'd in one group write, whether or not a hub
  answers; while no hub answers, or when the queue is half full, at once.

**The guarantee** (``sync_interval=0.05``): a command is on disk, fsync'd in
the spool or committed by the hub, at most ``sync_interval`` plus one group
write after the call that queued it returned (``stats()["durable_lag_max_s"]``
is the worst this publisher saw); a process kill after that loses nothing.
``flush()`` returning True means every command queued before it was stored
by the hub. ``sync_interval=None`` spools only while no hub answers or the
queue fills: faster, but a SIGKILL loses what the hub had not acknowledged.

A segment is deleted once every command in it was acknowledged (the one being
appended to is truncated), so the spool shrinks as it drains. The queue holds
at most ``max_queue`` commands / ``max_queue_bytes``; a call finding it full
waits for the spooler (a few ms, ``max_block`` at most) and, only when neither
the disk nor the hub takes anything, drops the command and reports it like a
refusal (never silently). ``close()`` has the spooler leave what is still unsent
in the spool (no I/O on the caller's thread there either; it waits for the
spooler, ``spool_timeout``), where a hub picks it up when it starts, or the
next Publisher on that spool folder replays it when it connects; the ids make
replays idempotent.

A hub stopping or restarting never closes the agent's episodes; the agent's own
end does: ``close()`` (also run at exit) sends one ``shutdown`` command naming
the episodes this publisher started and did not finalize, and the hub abandons
those. A command the hub refuses (say ``conflict``) is never retried and never
silent: it is logged, kept in ``refusals`` (``take_refusals()`` empties it),
passed to ``on_refusal``, and ``flush()`` returns False until it was taken. An
answer meaning "not now" (``RETRY_LATER_CODES``, or ``retry: true``) is not a
refusal: the command is resent after a back-off.

The publisher talks only to the hub that serves its home: ``hello`` names the
home, and a hub that serves another one (or a socket of another user) is
refused with one error line; commands wait in the spool meanwhile.

This module is the publisher's public face; the code lives in :mod:`memviewer.publisher`,
one job a module (the command builders, the queue, the spooler, the sender, the replay
of dead publishers' spools).
"""

from __future__ import annotations

from memviewer.publisher.answers import RETRY_LATER_CODES, retry_later
from memviewer.publisher.commands import ROLES
from memviewer.publisher.facade import Publisher

__all__ = ["Publisher", "RETRY_LATER_CODES", "ROLES", "retry_later"]
