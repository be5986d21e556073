"""Redaction: every class masks what it should, leaves look-alikes alone, and is idempotent."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memviewer.io.redact import KEY_FILE, MASK_RE, Redactor, installation_key, pseudonym

MASK = r"\[REDACTED:{cls}:\d+\]"


def only_mask(text: str, cls: str, level: str = "standard") -> None:
    """The whole text becomes exactly one mask of the given class."""
    out = Redactor(level).redact(text)
    assert re.fullmatch(MASK.format(cls=cls), out), (text, out)


POSITIVE = {
    "email": [
        "alice@example.com",
        "bob.smith+tag@mail.co.uk",
        "x_y%z@sub-domain.example.io",
    ],
    "phone": [
        "+1 555 123 4567",
        "+1-555-123-4567",
        "+44 20 7946 0958",
        "+49 (0)30 1234567",
        "+4915112345678",
        "+86 138 1234 5678",
        "(555) 123-4567",
        "555-123-4567",
        "555.123.4567",
        "030 1234567",
        "0151-1234567",
        "020 7946 0958",
        "06 12 34 56 78",
        "(030) 1234 5678",
        "13812345678",
        "138-1234-5678",
        "1-800-555-1234",
        "+1 (555) 123-4567",
    ],
    "api_key": [
        "sk-abcdefghijklmnopqrstuvwxyz123456",
        "sk-proj-AbC123dEf456GhI789jKl012mNo345",
        "sk-ant-api03-AbCdEf123456GhIjKl789012-xyzXYZ_0987",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "gho_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        "ghs_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "xoxb-1234567890-0987654321-abcdefghijklmnop",
        "xoxp-1234567890-abcdefghij",
        "AKIAIOSFODNN7EXAMPLE",
        "AIzaSyA1234567890abcdefghijklmnopqrstuv",
        "glpat-abcdefghij1234567890",
        "hf_abcdefghijklmnopqrstuvwxyz12345678",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0TH",
    ],
    "secret": [
        "Zm9vYmFyYmF6cXV4UXV1eDEyMzQ1Njc4OTBhYmNkZWZnaGlqaw==",
        "q8Xz3LmN0pR7sT2vW9yB4cD6fG1hJ5kQ_-aZ8eU3iO7",  # base64url
    ],
    "card": [
        "4111 1111 1111 1111",
        "4111-1111-1111-1111",
        "4111111111111111",
        "5500 0000 0000 0004",
        "3782 822463 10005",  # Amex 4-6-5
        "378282246310005",
    ],
    "ip": [
        "192.168.1.10",
        "8.8.8.8",
        "255.255.255.255",
        "2001:db8::8a2e:370:7334",
        "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
        "fe80:0:0:0:200:f8ff:fe21:67cf",
    ],
}


@pytest.mark.parametrize(("cls", "text"), [(cls, text) for cls, texts in POSITIVE.items() for text in texts])
def test_standard_classes_mask(cls: str, text: str) -> None:
    only_mask(text, cls)
    only_mask(text, cls, "strict")  # strict is a superset


def test_masks_inside_prose_keep_the_prose() -> None:
    r = Redactor()
    out = r.redact("Mail alice@example.com or call 555-123-4567 (server 10.0.0.1).")
    assert out == ("Mail [REDACTED:email:1] or call [REDACTED:phone:1] (server [REDACTED:ip:1]).")


def test_bearer_keeps_the_scheme_word() -> None:
    out = Redactor().redact("Authorization: Bearer abc123def456ghi789jkl012")
    assert out == "Authorization: Bearer [REDACTED:api_key:1]"
    out = Redactor().redact("curl -H 'Authorization: bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIx.sig'")
    assert out == "curl -H 'Authorization: bearer [REDACTED:api_key:1]'"


def test_url_password_is_a_secret() -> None:
    out = Redactor().redact("DATABASE_URL=postgres://admin:hunter2@db.internal:5432/app")
    assert out == "DATABASE_URL=postgres://admin:[REDACTED:secret:1]@db.internal:5432/app"


@pytest.mark.parametrize(
    "text",
    [
        # versions
        "1.2.3",
        "v1.2.3.4",
        "10.0.19045",
        "Python 3.11.7",
        "1.2.3.4.5",
        "1.2.300.4",
        "256.1.1.1",
        # dates and times
        "2024-06-10",
        "2024/06/10",
        "10.06.2024",
        "06/10/2024",
        "2024-06-10T12:30:45Z",
        "12:30:45",
        "08:30",
        "10:00-12:00",
        # short or plain numbers
        "42",
        "1000",
        "123456",
        "port 8080",
        "+1",
        # cards that fail Luhn, ids that are not cards
        "1234567812345678",
        "1234 5678 1234 5678",
        "0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
        # words and code
        "the quick brown fox jumps over the lazy dog",
        "sk-learn is a nickname",
        "std::vector<int> a::b x[::2] fe80::1",
        "00:1a:2b:3c:4d:5e",
        "some-long-identifier-With-Mixed-Case-and-digits-123",
        "/Users/Alice/Projects/app2/src/Main3Thing/some_module.py",
        "test_redaction_handles_long_identifiers_like_ThisOne2",
        "Bearer authentication is described in RFC 6750",
        "user@localhost",
        "deadbeef",
        "550e8400-e29b-41d4-a716-446655440000",
        "https://example.com/path?q=1",
        "/home/bob/notes.txt",
        "C:\\Users\\bob\\Desktop",
        "~/notes/todo.md",
    ],
)
def test_standard_false_positives_untouched(text: str) -> None:
    assert Redactor().redact(text) == text


def test_non_luhn_number_is_digits_only_in_strict() -> None:
    assert Redactor().redact("1234567812345678") == "1234567812345678"
    assert Redactor("strict").redact("1234567812345678") == "[REDACTED:digits:1]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "see https://example.com/cb?code=abc&state=xyz#frag now",
            "see https://example.com/cb?[REDACTED:url_query:1] now",
        ),
        ("(https://x.org/a/b?token=t0k3n).", "(https://x.org/a/b?[REDACTED:url_query:1])."),
        ("cat /home/bob/.ssh/id_rsa", "cat [REDACTED:home_path:1]"),
        ("open /Users/alice/Projects/app/main.py:12", "open [REDACTED:home_path:1]:12"),
        ("C:\\Users\\bob\\Desktop\\x.txt", "[REDACTED:home_path:1]"),
        ("edit ~/notes/todo.md, then", "edit [REDACTED:home_path:1], then"),
        ("order 12345678 shipped", "order [REDACTED:digits:1] shipped"),
    ],
)
def test_strict_only_classes(text: str, expected: str) -> None:
    assert Redactor("strict").redact(text) == expected
    assert Redactor("standard").redact(text) == text


@pytest.mark.parametrize("text", ["1.2.3", "2024-06-10", "12:30:45", "12345", "http://x.org/a"])
def test_strict_false_positives_untouched(text: str) -> None:
    assert Redactor("strict").redact(text) == text


def test_same_secret_same_mask_within_one_redactor() -> None:
    r = Redactor()
    first = r.redact("a alice@example.com b bob@example.com")
    second = r.redact("c bob@example.com d alice@example.com")
    assert first == "a [REDACTED:email:1] b [REDACTED:email:2]"
    assert second == "c [REDACTED:email:2] d [REDACTED:email:1]"
    assert r.counts["email"] == 4
    # A new Redactor (a new export) starts numbering again.
    assert Redactor().redact("bob@example.com") == "[REDACTED:email:1]"


def test_counts_cover_every_enabled_class() -> None:
    r = Redactor()
    r.redact("alice@example.com 10.0.0.1 10.0.0.1")
    assert r.counts == {
        "private_key": 0,
        "api_key": 0,
        "secret": 0,
        "card": 0,
        "iban": 0,
        "ssn": 0,
        "email": 1,
        "ip": 2,
        "phone": 0,
    }
    assert set(Redactor("strict").counts) >= {"url_query", "home_path", "hex", "digits"}


def test_redact_obj_keeps_keys_and_structure() -> None:
    r = Redactor()
    obj = {
        "alice@example.com": ["mail alice@example.com", {"n": 5, "ok": True, "x": None}],
        "turns": ({"text": "key sk-abcdefghijklmnopqrstuvwxyz123456"},),
    }
    out = r.redact_obj(obj)
    assert out == {
        "alice@example.com": ["mail [REDACTED:email:1]", {"n": 5, "ok": True, "x": None}],
        "turns": ({"text": "key [REDACTED:api_key:1]"},),
    }
    assert obj["alice@example.com"][0] == "mail alice@example.com"  # input untouched
    assert out is not obj


def test_unknown_level_is_rejected() -> None:
    with pytest.raises(ValueError):
        Redactor("paranoid")


def test_masks_do_not_overlap() -> None:
    text = (
        "k=sk-abcdefghijklmnopqrstuvwxyz123456 mail=bob@example.com "
        "https://u:p4ss@example.com/x?email=bob@example.com&t=1 /home/bob/1234567"
    )
    out = Redactor("strict").redact(text)
    assert "bob@example.com" not in out and "p4ss" not in out and "sk-" not in out
    # every "[REDACTED" starts a complete, well-formed mask
    assert out.count("[REDACTED") == len(MASK_RE.findall(out))


@pytest.mark.timeout(20)  # a hang guard against catastrophic backtracking, not a benchmark
def test_large_input_is_linear_enough() -> None:
    text = ("a" * 5000 + " 1.2.3 " + "9" * 3000 + " x@y.zz ") * 20
    r = Redactor("strict")
    out = r.redact(text)
    assert "x@y.zz" not in out and "9" * 3000 not in out and " 1.2.3 " in out
    assert r.counts["email"] == 20


# ---- ids ------------------------------------------------------------------------------------

PSEUDONYM_RE = re.compile(r"[a-z]+-[bcdfghjklmnpqrst]{10}")


def test_pseudonym_is_stable_short_and_keyed() -> None:
    p = pseudonym("alice@example.com", "user")
    assert PSEUDONYM_RE.fullmatch(p) and p.startswith("user-")
    assert pseudonym("alice@example.com", "user") == p  # same input, same output
    assert pseudonym("bob@example.com", "user") != p
    assert pseudonym("alice@example.com", "session") == "session-" + p.split("-")[1]
    keyed = pseudonym("alice@example.com", "user", b"k" * 32)
    assert keyed != p and keyed == pseudonym("alice@example.com", "user", b"k" * 32)
    assert keyed != pseudonym("alice@example.com", "user", b"j" * 32)
    # A prefix that is not a short lowercase word (it could itself leak) becomes "id".
    assert pseudonym("alice@example.com", "x@y.zz").startswith("id-")
    assert pseudonym("alice@example.com", "team42").startswith("id-")


@pytest.mark.parametrize("level", ["standard", "strict"])
def test_redact_id_masks_email_ids_whole(level: str) -> None:
    r = Redactor(level, id_key=b"k" * 32)
    for value in ("alice@example.com", "tenant-7/alice@example.com", "alice@example.com#1"):
        out = r.redact_id(value, "user")
        assert out == pseudonym(value, "user", b"k" * 32)
    assert r.ids_masked == 3
    assert r.counts == dict.fromkeys(r.classes, 0)  # ids are counted apart from text masks


@pytest.mark.parametrize("level", ["standard", "strict"])
@pytest.mark.parametrize("value", ["alice", "s-live", "01J8Z3K4QW5E6R7T8Y9UABCDEF", "lin-7", "u42", ""])
def test_redact_id_keeps_plain_ids(level: str, value: str) -> None:
    r = Redactor(level)
    assert r.redact_id(value, "user") == value and r.ids_masked == 0


def test_redact_id_leaves_non_strings_alone() -> None:
    r = Redactor("strict")
    assert r.redact_id(None) is None and r.redact_id(42) == 42 and r.ids_masked == 0


@pytest.mark.parametrize(
    "value",
    [
        "+49 151 12345678",
        "cust-00012345678",
        "/home/alice/agent",
        "10.0.0.7",
        "deadbeefdeadbeefdeadbeefdeadbeef0001",
    ],
)
def test_strict_masks_ids_with_any_pattern_standard_only_emails_and_keys(value: str) -> None:
    assert Redactor("standard").redact_id(value) == value
    assert PSEUDONYM_RE.fullmatch(Redactor("strict").redact_id(value))


@pytest.mark.parametrize("level", ["standard", "strict"])
@pytest.mark.parametrize("value", ["sk-abcdefghijklmnopqrstuvwxyz123456", "run/ghp_" + "a1" * 18])
def test_an_id_holding_an_api_key_is_pseudonymised_at_every_level(level: str, value: str) -> None:
    r = Redactor(level)
    assert PSEUDONYM_RE.fullmatch(r.redact_id(value, "session")) and r.ids_masked == 1


@pytest.mark.parametrize("level", ["standard", "strict"])
def test_pseudonyms_are_never_redacted_again(level: str) -> None:
    r = Redactor(level)
    for i in range(200):  # many digests: none may contain a digit run, a word or an address
        p = pseudonym(f"user{i}@example.com", "user")
        assert r.redact_id(p) == p and r.redact(p) == p
    assert r.ids_masked == 0


def test_installation_key_is_created_once_private_and_reused(tmp_path) -> None:
    key = installation_key(tmp_path)
    assert key is not None and len(key) == 32
    path = tmp_path / KEY_FILE
    assert path.stat().st_mode & 0o777 == 0o600
    assert installation_key(tmp_path) == key
    assert [p.name for p in tmp_path.iterdir()] == [KEY_FILE]  # no temporary file left behind


def test_installation_key_falls_back_to_none(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    assert installation_key(tmp_path / "missing-home") is None  # cannot be created
    (tmp_path / KEY_FILE).write_text("not hex\n")
    assert installation_key(tmp_path) is None  # unreadable: unkeyed, with a warning
    assert "unkeyed" in caplog.text


# ---- properties -----------------------------------------------------------------------------

_FRAGMENTS = st.sampled_from(
    [
        "alice@example.com",
        "+1 555 123 4567",
        "555-123-4567",
        "4111 1111 1111 1111",
        "1234567812345678",
        "192.168.1.1",
        "2001:db8::1:2",
        "sk-abcdefghijklmnopqrstuvwxyz123456",
        "Bearer abc123def456ghi789jkl012",
        "3f786850e387550fdab836ed7e6dc881de23001b",
        "https://x.org/p?a=b",
        "/home/bob/x",
        "~/y",
        "[REDACTED:email:1]",
        "[REDACTED:",
        "]",
        "1.2.3",
        "2024-06-10",
        "123456",
        ":",
        ".",
        "-",
        "@",
        " ",
        "/",
        "+",
        "0",
    ]
)
_TEXT = st.lists(st.one_of(_FRAGMENTS, st.text(max_size=12)), max_size=12).map("".join)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_TEXT, level=st.sampled_from(["standard", "strict"]))
def test_redaction_is_idempotent_and_total(text: str, level: str) -> None:
    r = Redactor(level)
    once = r.redact(text)
    assert r.redact(once) == once
    assert Redactor(level).redact(once) == once


@settings(max_examples=150, deadline=None)
@given(text=st.text())
def test_arbitrary_text_never_raises(text: str) -> None:
    out = Redactor("strict").redact(text)
    assert Redactor("strict").redact(out) == out
