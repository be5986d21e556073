"""Log records carry session and episode ids from contextvars."""

from __future__ import annotations

import logging

from memviewer.logctx import install_context_filter
from memviewer.session.manager import SessionManager
from memviewer.store.db import Store


def test_episode_logs_carry_correlation_ids(tmp_path, caplog):
    install_context_filter()
    store = Store.open(tmp_path / "m.db")
    mgr = SessionManager(store)
    with caplog.at_level(logging.DEBUG, logger="memviewer"):
        mgr.open_session(session_id="s1")
        mgr.start_episode("s1", "go", episode_id="e1")
        mgr.add_turn("e1", "assistant", "x")
    begun = [r for r in caplog.records if r.name == "memviewer.episode" and "begun" in r.message]
    assert begun and begun[0].session_id == "s1" and begun[0].episode_id == "e1"
    added = [r for r in caplog.records if "turn_added" in r.getMessage()]
    assert added and added[-1].session_id == "s1" and added[-1].episode_id == "e1"
    store.close()
