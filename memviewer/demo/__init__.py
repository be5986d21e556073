"""Demo traffic: a deterministic two-week history (``scenario``) and a live simulated agent (``live``)."""
