"""The Textual viewer (``memviewer`` with no sub-command).

Only this package imports Textual; the rest of memviewer stays usable without it.
"""
