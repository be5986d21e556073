"""CLI command groups, one module per area; ``memviewer.cli`` registers them."""
