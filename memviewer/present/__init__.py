"""Front-end-neutral presentation helpers: what the CLI, the viewer and the MCP server show
the same way (snippets, highlighting, the why-not's wording, the index's lag and damage in
words, whose words a query asks about). Standard library and layer 0 only, so every front end
may import them; ``tests/test_front_end_imports.py`` keeps front ends off recall/store/index."""
