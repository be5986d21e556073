"""Sessions, episodes and turns: the manager, its event bus, intent and compaction."""
