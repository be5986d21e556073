"""One module per screen: sessions, session, live, recall, export, help."""
