"""``keyword_candidates.session_dict`` is ``dict(zip(SESSION_COLS, row[at:]))``: same keys, same
order, same values, whatever columns ``SESSION_COLS`` names."""

from __future__ import annotations

from memviewer.store import keyword_candidates as kc


def test_session_dict_is_the_session_columns_zipped() -> None:
    row = tuple(f"v{i}" for i in range(len(kc.SESSION_COLS)))
    got = kc.session_dict(row)
    assert list(got.items()) == list(zip(kc.SESSION_COLS, row, strict=True))


def test_session_dict_reads_from_an_offset() -> None:
    head = (1, -2.5, 3, None, "text")
    row = head + tuple(range(100, 100 + len(kc.SESSION_COLS)))
    assert list(kc.session_dict(row, len(head)).items()) == list(
        zip(kc.SESSION_COLS, row[len(head) :], strict=True)
    )
