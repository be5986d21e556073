"""The live bus: JSON-RPC 2.0 over NDJSON on a Unix socket (see docs/protocol.md).

Kept empty on purpose: ``memviewer.client`` imports ``memviewer.wire.protocol``
and must stay standard-library only, so this package may not import anything.
"""
