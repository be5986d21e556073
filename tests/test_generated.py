"""Both generated files are written, or checked with ``--check``, the one way
``memviewer.generated.write_or_check`` does it."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from memviewer import cli_reference, cli_tables


@pytest.mark.parametrize(("module", "attr"), [(cli_reference, "REFERENCE"), (cli_tables, "TABLE")])
def test_check_mode_names_the_fix_and_writes_nothing(
    module: ModuleType,
    attr: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stale = tmp_path / "generated"
    stale.write_text("old\n", encoding="utf-8")
    monkeypatch.setattr(module, attr, stale)
    assert module.main(["--check"]) == 1
    assert module.REGENERATE in capsys.readouterr().err
    assert stale.read_text(encoding="utf-8") == "old\n"  # --check writes nothing
    assert module.main([]) == 0 and stale.read_text(encoding="utf-8") == module.render()
    assert "wrote" in capsys.readouterr().out
    assert module.main(["--check"]) == 0 and module.main([]) == 0  # current: nothing to do
    assert capsys.readouterr().out == ""
