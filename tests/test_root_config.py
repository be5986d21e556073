"""The CLI root's home and socket (``memviewer.root_config``, standard library only) are
those ``load_settings`` resolves, with the same sources and warnings, in every layer
combination; what only ``Settings`` can word is left to it (``resolve`` returns None)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from memviewer.config import load_settings
from memviewer.root_config import resolve

LAYERS = ("flag", "env", "file", None)


def _case(tmp_path: Path, home_from: str | None, socket_from: str | None) -> dict[str, Any]:
    env: dict[str, str] = {"MEMVIEWER_W_DENSE": "0.3", "MEMVIEWER_HOME_X": "not a key"}
    file_lines = ["w_keyword = 0.2", 'hme = "typo"']
    flags: dict[str, str] = {}
    for key, where in (("home", home_from), ("socket", socket_from)):
        value = str(tmp_path / f"{key}-from-{where}")
        if where == "flag":
            flags[key] = value
            env[f"MEMVIEWER_{key.upper()}"] = value + "-env-loses"
        elif where == "env":
            env[f"memviewer_{key}"] = value  # the env layer is case-insensitive
            file_lines.append(f'{key} = "{value}-file-loses"')
        elif where == "file":
            file_lines.append(f'{key} = "{value}"')
            env[f"MEMVIEWER_{key.upper()}"] = ""  # empty means unset
    config = tmp_path / f"config-{home_from}-{socket_from}.toml"
    config.write_text("\n".join(file_lines) + "\n", encoding="utf-8")
    return {"config_file": config, "env": env, **flags}


@pytest.mark.parametrize(("home_from", "socket_from"), list(itertools.product(LAYERS, LAYERS)))
def test_home_and_socket_match_settings(
    tmp_path: Path, home_from: str | None, socket_from: str | None
) -> None:
    case = _case(tmp_path, home_from, socket_from)
    full = load_settings(**case)
    place = resolve(**case)
    assert place is not None
    assert (place.home, place.socket) == (full.home, full.socket)
    assert (place.home_path, place.socket_path) == (full.home_path, full.socket_path)
    assert place.sources == {k: full.sources[k] for k in ("home", "socket")}
    assert place.warnings == full.warnings and place.warnings  # the file's 'hme'


@pytest.mark.parametrize(
    "text",
    ['home = ""', "home = 5", 'socket = "  "', "not toml [", b"home = '\xff'"],
)
def test_what_settings_must_word_is_left_to_it(tmp_path: Path, text: str | bytes) -> None:
    config = tmp_path / "config.toml"
    config.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert resolve(config, env={}) is None
    with pytest.raises(ValueError):
        load_settings(config, env={})


def test_a_named_file_that_is_missing_or_a_folder_is_left_to_settings(tmp_path: Path) -> None:
    assert resolve(tmp_path / "nope.toml", env={}, config_required=True) is None
    assert resolve(tmp_path, env={}) is None
    assert resolve(tmp_path / "nope.toml", env={}) is not None  # the default file may be absent


def test_a_socket_found_elsewhere_becomes_a_flag(tmp_path: Path) -> None:
    place = resolve(tmp_path / "nope.toml", env={}, home=str(tmp_path / "h"))
    assert place is not None and place.sources == {"home": "flag", "socket": "default"}
    moved = place.with_socket("/tmp/other.sock")
    assert moved.socket_path == Path("/tmp/other.sock") and moved.sources["socket"] == "flag"


class _Conn:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_the_viewer_gets_full_settings_with_the_socket_the_root_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``memviewer`` alone opens the viewer with ``Settings`` (not the root's ``RootConfig``),
    on the socket of the hub the root group's probe found (a hub named in the home)."""
    from click.testing import CliRunner

    from memviewer import cli as cli_module
    from memviewer.config import Settings
    from memviewer.tui import app
    from memviewer.wire import probe

    elsewhere = tmp_path / "elsewhere.sock"
    conn = _Conn()
    monkeypatch.setattr(probe, "serving_connection", lambda place, **_: (elsewhere, {"pid": 1}, conn))
    seen: list[Any] = []
    monkeypatch.setattr(app, "run_app", seen.append)
    result = CliRunner().invoke(cli_module.cli, ["--home", str(tmp_path / "h")])
    assert result.exit_code == 0, result.output
    (settings,) = seen
    assert isinstance(settings, Settings)
    assert settings.home == str(tmp_path / "h") and settings.socket_path == elsewhere
    assert settings.sources["socket"] == "flag" and conn.closed  # the probe's connection closes
