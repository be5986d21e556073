"""The audit's redaction classes (issue 32, row 17) stay closed: leaks counted per class, in
every export format, at both levels, and separately in tool-call arguments.

Everything is a generated fake (tests/redaction_corpus.py): passwords in sentences, keys named
only by the words around them, Azure AD client secrets, GCP service-account key ids, and
``name=secret`` pairs inside a longer ``key: value`` line. Placed in turn content, message
metadata, tool-call arguments and titles of a real store, exported through the real CLI."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pytest
from redaction_corpus import (
    AUDIT_CLASSES,
    FORMATS,
    audit_corpus,
    azure_tool_calls,
    export_session,
    export_turn,
    run_export,
)

import memviewer.store.fts  # noqa: F401 - registers migration 3
from memviewer.session.manager import SessionManager
from memviewer.store.db import Store

ITEMS = audit_corpus()
AZURE_CALLS = azure_tool_calls()
LEVELS = ("standard", "strict")
TOOL_SESSIONS = ("s-audit-tools", "s-audit-azure-tools")


def _calls(sid: str, arguments: list[str]) -> list[dict[str, Any]]:
    turns = []
    for i, args in enumerate(arguments):
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "shell", "arguments": args}}
        turns.append(export_turn(sid, 2 * i, "assistant", "", tool_calls=[call]))
        turns.append(export_turn(sid, 2 * i + 1, "tool", "done", tool_call_id=f"call_{i}"))
    return turns


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    h = tmp_path_factory.mktemp("audit") / "home"
    h.mkdir()
    store = Store.open(h / "memviewer.db")
    mgr = SessionManager(store)
    contexts = {name: context for name, (_, _, context) in ITEMS.items()}
    mgr.import_session(
        export_session("s-audit-content", "content"),
        [export_turn("s-audit-content", i, "user", c) for i, c in enumerate(contexts.values())],
    )
    meta = [
        export_turn("s-audit-meta", i, "assistant", "noted", meta={"note": c, "source": "crm"})
        for i, c in enumerate(contexts.values())
    ]
    mgr.import_session(export_session("s-audit-meta", "metadata"), meta)
    args = [json.dumps({"command": c, "cwd": "/srv/app"}) for c in contexts.values()]
    mgr.import_session(export_session("s-audit-tools", "tools"), _calls("s-audit-tools", args))
    azure = _calls("s-audit-azure-tools", [a for _, a in AZURE_CALLS])
    mgr.import_session(export_session("s-audit-azure-tools", "azure tools"), azure)
    for name, context in contexts.items():
        if "\n" not in context:
            sid = f"s-audit-title-{name}"
            mgr.import_session(export_session(sid, context), [export_turn(sid, 0, "user", "see title")])
    store.close()
    return h


def _forms(value: str) -> set[str]:
    """The value as an export could carry it: verbatim, JSON-escaped (once or twice, as inside
    an arguments string) and HTML-escaped (Markdown)."""
    once = json.dumps(value)[1:-1]
    return {value, once, json.dumps(once)[1:-1], html.escape(value, quote=False)}


def _leaks(text: str, items: list[tuple[str, str]]) -> dict[str, int]:
    """Leaked values per audit class (each class present, so 0 is an answer)."""
    counts = dict.fromkeys(AUDIT_CLASSES, 0)
    for cls, value in items:
        counts[cls] += any(form in text for form in _forms(value))
    return counts


ALL = [(cls, value) for cls, value, _ in ITEMS.values()] + [
    ("azure_client_secret", s) for s, _ in AZURE_CALLS
]
NONE_LEAKED = dict.fromkeys(AUDIT_CLASSES, 0)


def test_the_corpus_covers_every_class_in_several_phrasings() -> None:
    per_class = {cls: sum(1 for c, _ in ALL if c == cls) for cls in AUDIT_CLASSES}
    assert min(per_class.values()) >= 3, per_class


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_item_is_in_the_plain_export(home: Path, tmp_path: Path, fmt: str) -> None:
    # the leak count below could fail: unredacted, every value is there
    expected = {cls: sum(1 for c, _ in ALL if c == cls) for cls in AUDIT_CLASSES}
    assert _leaks(run_export(home, tmp_path, fmt, None), ALL) == expected


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("level", LEVELS)
def test_no_class_leaks_in_any_format(home: Path, tmp_path: Path, fmt: str, level: str) -> None:
    text = run_export(home, tmp_path, fmt, level)
    assert _leaks(text, ALL) == NONE_LEAKED
    # the prose and the names around the secrets stay readable
    for kept in ("my password is", "here is my Stripe key", "private_key_id", "DB_PASSWORD=", "az login"):
        assert kept in text, kept


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("level", LEVELS)
def test_no_class_leaks_in_tool_call_arguments(home: Path, tmp_path: Path, fmt: str, level: str) -> None:
    plain = run_export(home, tmp_path, fmt, None, TOOL_SESSIONS)
    assert _leaks(plain, ALL) != NONE_LEAKED  # the arguments really carry the values
    text = run_export(home, tmp_path, fmt, level, TOOL_SESSIONS)
    assert _leaks(text, ALL) == NONE_LEAKED


def test_tool_call_arguments_stay_valid_json(home: Path, tmp_path: Path) -> None:
    doc = json.loads(run_export(home, tmp_path, "json", "standard", ("s-audit-azure-tools",)))
    args = [
        json.loads(call["function"]["arguments"])
        for session in doc["sessions"]
        for turn in session["turns"]
        for call in turn.get("tool_calls") or []
    ]
    assert len(args) == len(AZURE_CALLS)
    assert args[1]["env"]["ARM_CLIENT_SECRET"].startswith("[REDACTED:")
    assert args[0]["command"].startswith("az login --service-principal -u ")
