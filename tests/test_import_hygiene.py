"""Core modules import without Textual; the publisher imports with the standard library only."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CORE = (
    "memviewer.service",
    "memviewer.cli",
    "memviewer.session.manager",
    "memviewer.store.db",
    "memviewer.wire.hub",
    "memviewer.wire.subscriber",
    "memviewer.wire.remote",
    "memviewer.wire.probe",
    "memviewer.commands.hub",
    "memviewer.commands.demo",
    "memviewer.demo.scenario",
    "memviewer.demo.live",
)


def _run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_core_modules_do_not_import_textual() -> None:
    code = (
        "import importlib, json, sys\n"
        f"for name in {CORE!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('textual', 'lancedb', 'onnxruntime'))))\n"
    )
    assert _run(code) == []


def test_the_publisher_needs_only_the_standard_library() -> None:
    """``memviewer.client`` and every module of ``memviewer/publisher/`` (imported one by one,
    so a module the facade does not import yet is checked too)."""
    code = (
        "import importlib, json, pkgutil, sys\n"
        "before = set(sys.modules)\n"
        "import memviewer.client, memviewer.publisher\n"
        "for m in pkgutil.iter_modules(memviewer.publisher.__path__, 'memviewer.publisher.'):\n"
        "    importlib.import_module(m.name)\n"
        "new = sorted(set(sys.modules) - before)\n"
        "bad = [m for m in new if m.split('.')[0] not in sys.stdlib_module_names "
        "and m.split('.')[0] != 'memviewer']\n"
        "print(json.dumps({'bad': bad, 'memviewer': [m for m in new if m.startswith('memviewer')]}))\n"
    )
    result = _run(code)
    assert result["bad"] == []
    # The hub and the CLI encode and decode answers with orjson (wire/fastjson.py); the
    # publisher must not need it.
    assert "memviewer.wire.fastjson" not in result["memviewer"]
    publisher = {m for m in result["memviewer"] if m.startswith("memviewer.publisher")}
    assert {"memviewer.publisher.facade", "memviewer.publisher.sender"} <= publisher
    allowed = publisher | {
        "memviewer",
        "memviewer.client",
        "memviewer.ids",
        "memviewer.paths",
        "memviewer.jsonvalues",
        "memviewer.ops",
        "memviewer.wire",
        "memviewer.wire.protocol",
        "memviewer.wire.spool",
        "memviewer.wire.spool_segments",
        "memviewer.wire.syncclient",
        "memviewer.wire.tls",  # the TLS client context for a remote hub (ssl only)
        "memviewer.wire.trust",
    }
    assert set(result["memviewer"]) <= allowed


#: What a command that needs neither the settings' checks nor the store must not import:
#: pydantic-settings and the request models cost every command ~0.13 s at start (issue 30).
STARTUP_HEAVY = ("pydantic_settings", "pydantic", "sqlalchemy", "lancedb")


@pytest.mark.parametrize(
    "args", [["--version"], ["--help"], ["search", "--help"], ["eval", "golden", "--help"]]
)
def test_the_cli_starts_without_pydantic_or_the_store(args: list[str]) -> None:
    """``import memviewer.cli`` and resolving ``args`` (click's options, their bounds from the
    generated contract table) import none of ``STARTUP_HEAVY``."""
    code = (
        "import json, sys\n"
        "from memviewer.cli import cli\n"
        "try:\n"
        f"    cli.main(args={args!r}, prog_name='memviewer')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
        f"print(json.dumps([m for m in {STARTUP_HEAVY!r} if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
