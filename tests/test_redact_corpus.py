"""Nothing leaks: a corpus of realistic fake secrets and personal data, placed in turn content,
message metadata (strings and numbers), tool-call arguments (JSON strings) and titles,
exported through the real CLI in all four formats at both levels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from redaction_corpus import FORMATS, corpus, export_session, export_turn, leak_forms, placed, run_export

import memviewer.store.fts  # noqa: F401 - registers migration 3
from memviewer.session.manager import SessionManager
from memviewer.store.db import Store

VALUES = corpus()
PLACED = placed(VALUES)


def _populate(mgr: SessionManager) -> None:
    names = list(PLACED)
    content = [export_turn("s-content", i, "user", PLACED[n]) for i, n in enumerate(names)]
    mgr.import_session(export_session("s-content", "content"), content)
    meta = [
        export_turn("s-meta", i, "assistant", "noted", meta={"note": PLACED[n], "source": "crm"})
        for i, n in enumerate(names)
    ]
    # A number in metadata is looked at too.
    meta.append(
        export_turn(
            "s-meta", len(names), "tool", "ok", meta={"card_number": int(VALUES["card_in_meta_int"][1])}
        )
    )
    mgr.import_session(export_session("s-meta", "metadata"), meta)
    tools = []
    for i, n in enumerate(names):
        args = json.dumps({"command": PLACED[n], "cwd": "/srv/app"})
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "shell", "arguments": args}}
        tools.append(export_turn("s-tools", 2 * i, "assistant", "", tool_calls=[call]))
        tools.append(export_turn("s-tools", 2 * i + 1, "tool", "done", tool_call_id=f"call_{i}"))
    mgr.import_session(export_session("s-tools", "tools"), tools)
    for n in names:
        if "\n" not in PLACED[n]:
            sid = f"s-title-{n}"
            mgr.import_session(export_session(sid, PLACED[n]), [export_turn(sid, 0, "user", "see title")])


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    h = tmp_path_factory.mktemp("corpus") / "home"
    h.mkdir()
    store = Store.open(h / "memviewer.db")
    _populate(SessionManager(store))
    store.close()
    return h


def _leaks(text: str, classes: tuple[str, ...]) -> list[str]:
    return [
        f"{name}: {form[:40]}"
        for name, (cls, value) in VALUES.items()
        if cls in classes
        for form in leak_forms(value)
        if form in text
    ]


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_corpus_is_in_the_plain_export(home: Path, tmp_path: Path, fmt: str) -> None:
    text = run_export(home, tmp_path, fmt, None)
    missing = [n for n, (_, v) in VALUES.items() if v not in text and json.dumps(v)[1:-1] not in text]
    assert not missing  # the check below could fail: every value is really there unredacted


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("level", ["standard", "strict"])
def test_nothing_leaks(home: Path, tmp_path: Path, fmt: str, level: str) -> None:
    text = run_export(home, tmp_path, fmt, level)
    assert _leaks(text, ("secret", "pii")) == []
    # the prose around the secrets survives
    assert "wire it to IBAN" in text and "keep it safe" in text and "the db host is" in text


def _detect_secrets(path: Path) -> set[str]:
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    found = SecretsCollection()
    with default_settings():
        found.scan_file(str(path))
    return {secret.secret_hash for _, secret in found}


@pytest.mark.parametrize("fmt", ["json", "md"])
def test_detect_secrets_finds_nothing_it_found_before(home: Path, tmp_path: Path, fmt: str) -> None:
    plain, redacted = tmp_path / f"plain.{fmt}", tmp_path / f"redacted.{fmt}"
    plain.write_text(run_export(home, tmp_path, fmt, None), encoding="utf-8")
    redacted.write_text(run_export(home, tmp_path, fmt, "standard"), encoding="utf-8")
    before, after = _detect_secrets(plain), _detect_secrets(redacted)
    assert len(before) >= 15  # its scanner sees the corpus
    assert before & after == set()
