"""memviewer's benchmarks: run them with ``python -m bench NAME [--quick] [args…]`` (``--list``)."""
