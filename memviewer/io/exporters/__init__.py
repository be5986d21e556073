"""One module per export format; each turns a session bundle into text or files."""
