"""memviewer/contract/cli_table.py is what ``python -m memviewer.cli_tables`` makes of the
request models and ``Settings`` today: a changed bound, default, description or setting key
fails here until the table is regenerated (the click app reads the table, not the models)."""

from __future__ import annotations

from memviewer import cli_tables
from memviewer.config import Settings
from memviewer.contract import cli_table
from memviewer.contract.requests import RecallParams, SearchParams, int_fields


def test_the_table_is_current() -> None:
    current = cli_tables.TABLE.read_text(encoding="utf-8")
    assert current == cli_tables.render(), (
        f"contract/cli_table.py is out of date with the models: run `.venv/bin/{cli_tables.REGENERATE}`"
    )


def test_the_imported_table_holds_the_models_facts() -> None:
    for table, model in ((cli_table.SEARCH_PARAMS, SearchParams), (cli_table.RECALL_PARAMS, RecallParams)):
        assert list(table) == list(model.model_fields)
        assert {n: f["bounds"] for n, f in table.items() if f["bounds"]} == int_fields(model)
        for name, field in model.model_fields.items():
            assert table[name]["help"] == field.description
            assert table[name]["default"] == (None if field.is_required() else field.default)
    assert cli_table.SETTING_KEYS == tuple(Settings.model_fields)
