"""The publisher an agent embeds, one job a module (standard library only).

The public face is :mod:`memviewer.client` (``Publisher``, ``RETRY_LATER_CODES``,
``retry_later``, ``ROLES``); this package is what it is made of:

* ``commands``: the typed command builders and their argument checks (``ValueError``);
* ``queue``: the caller's side, encoding and queueing a command with no I/O;
* ``spooler``: the thread that owns the spool files;
* ``sender``: the thread that owns the socket (connect, batches, the one back-off);
* ``orphans``: replaying the spools that dead publishers left;
* ``answers``: which answers mean "not now" and what a refusal holds;
* ``state``: the options and the state the threads share under one lock;
* ``facade``: ``Publisher``, which builds them and answers ``flush``, ``close``, ``stats``.

Kept free of imports here so that importing one module loads only what it needs.
"""
