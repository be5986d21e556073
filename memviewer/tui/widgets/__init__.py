"""Widgets shared by the screens (paged session table, turn list, event log, tick box)."""
