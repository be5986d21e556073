"""The request contract: what a caller may ask of search and recall, declared once.

``requests`` holds the pydantic models (``SearchParams``, ``RecallParams``): every field's
type, default, bounds and description. The front ends derive from them: the CLI's click
options (``commands.contract_options``), the hub's parameter check (``wire.hub_params``),
the MCP tools' input schemas (``mcp.tools``) and the viewer's recall fields.
``checks`` holds the plain checks they share (no pydantic: the recall layers' hot paths).
``reader`` holds the protocols front ends are written against (``memviewer.api`` is their
face), ``compare`` the A/B parameter sets (``recall --vs``, the Recall screen's B) and
``timeref`` the parser of ``as_of`` and of a query's time references.
The lowest layer: it imports nothing of memviewer but ``errors``, ``params`` and ``timeutil``
(and, for type checking only, the types its protocols name).
"""
