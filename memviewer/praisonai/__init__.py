"""Everything memviewer does with PraisonAI, in one place, one module per job.

* ``format``: PraisonAI's session JSON files read into memviewer sessions (turn ids derived
  from each message, so a re-import is a no-op); the file walk and the import report.
* ``stream``: one huge file read incrementally (``ijson``) with progress; ``chunked``: one
  huge file checked and imported a chunk at a time, in bounded memory.
* ``importer``: ``memviewer import praisonai`` (files and folders, each checked whole first).
* ``export``: ``memviewer export --format praisonai`` (files PraisonAI itself writes alike).
* ``watch``: the hub's folder watcher (a ``sources.source.Source``); ``bigfile``: its steps
  for a huge file.

Nothing is re-exported here: import the module by its job. Nothing imports
``praisonaiagents`` (the tests use it to write real files).
"""
