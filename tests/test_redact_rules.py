"""Each rule class of the rebuilt redaction, its validators, and the look-alikes it keeps."""

from __future__ import annotations

import json
import random

import pytest
from redaction_corpus import iban, luhn_complete

from memviewer.io.redact import Redactor
from memviewer.io.redact_rules import iban_ok, is_secret_name, luhn_ok

RNG = random.Random(11)
VISA = luhn_complete(RNG, "4", 16)
AMEX = luhn_complete(RNG, "34", 15)
DE_IBAN = iban(RNG, "DE", 18)


def test_validators() -> None:
    assert luhn_ok(VISA) and luhn_ok("4111 1111 1111 1111")
    assert not luhn_ok(VISA[:-1] + str((int(VISA[-1]) + 1) % 10))
    assert not luhn_ok("1717171717171")  # an epoch in ms is no card (networks start 2-6)
    assert iban_ok(DE_IBAN) and iban_ok("GB82 WEST 1234 5698 7654 32")
    assert not iban_ok("GB82 WEST 1234 5698 7654 33")  # one digit off: the mod-97 check fails
    assert not iban_ok("DE89370400440532013")  # DE needs 22 characters


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("AWS_SECRET_ACCESS_KEY", True),
        ("SENDGRID_API_KEY", True),
        ("db.password", True),
        ("apiKey", True),
        ("clientSecret", True),
        ("Authorization", True),
        ("AccountKey", True),
        ("max_tokens", False),
        ("tokenizer", False),
        ("passport", False),
        ("token_count", False),
        ("password_hint", False),
        ("keyword", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


@pytest.mark.parametrize(
    ("text", "cls", "kept"),
    [
        (
            "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "secret",
            "AWS_SECRET_ACCESS_KEY=",
        ),
        (
            "SENDGRID_API_KEY=SG.abcdefghij0123456789AB.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
            "api_key",
            "SENDGRID_API_KEY=",
        ),
        ("pay with sk_live_4eC39HqLyjWDarjtT1zdp7dc", "api_key", "pay with "),
        ("rk_live_51HaBcDeFgHiJkLmNoPqRsTuV", "api_key", ""),
        ("npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "api_key", ""),
        ("xoxb-123456789012-123456789012-AbCdEfGhIjKlMnOpQrStUvWx", "api_key", ""),
        ("AKIAIOSFODNN7EXAMPLE", "api_key", ""),
        ("AIzaSyA1234567890abcdefghijklmnopqrstuv", "api_key", ""),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "api_key", ""),
        ("password=hunter2", "secret", "password="),
        ('{"password": "correct horse battery"}', "secret", '{"password": "'),
        ("DB_PASSWORD: 'p@ss'", "secret", "DB_PASSWORD: '"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "api_key", "Authorization: Basic "),
        ("Authorization: Bearer abc123def456ghi789jkl012", "api_key", "Authorization: Bearer "),
        (f"card {VISA}", "card", "card "),
        (f"card {VISA[:4]}-{VISA[4:8]}-{VISA[8:12]}-{VISA[12:]}", "card", "card "),
        (f"card {VISA[:4]}.{VISA[4:8]}.{VISA[8:12]}.{VISA[12:]}", "card", "card "),
        (f"amex {AMEX[:4]} {AMEX[4:10]} {AMEX[10:]}", "card", "amex "),
        (f"IBAN {DE_IBAN}", "iban", "IBAN "),
        ("IBAN GB82 WEST 1234 5698 7654 32.", "iban", "IBAN "),
        ("SSN 123-45-6789", "ssn", "SSN "),
        ("ssn: 123456789", "ssn", "ssn: "),
    ],
)
def test_each_rule_masks_only_the_secret(text: str, cls: str, kept: str) -> None:
    out = Redactor().redact(text)
    assert f"[REDACTED:{cls}:1]" in out, out
    assert out.startswith(kept)


def test_private_key_blocks_are_masked_whole() -> None:
    body = "\n".join("MIIEowIBAAKCAQEA" + str(i) * 48 for i in range(6))
    for label in ("RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY"):
        text = f"key:\n-----BEGIN {label}-----\n{body}\n-----END {label}-----\nthanks"
        assert Redactor().redact(text) == "key:\n[REDACTED:private_key:1]\nthanks"
    # escaped inside a JSON string, and cut short without its footer
    escaped = json.dumps(f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----")
    assert Redactor().redact(escaped) == '"[REDACTED:private_key:1]"'
    cut = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{body}"
    assert Redactor().redact(cut) == "[REDACTED:private_key:1]"


def test_azure_connection_string_keeps_its_names() -> None:
    key = "Zm9v" * 21 + "YmE="  # 88 characters
    text = f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={key};EndpointSuffix=core.windows.net"
    out = Redactor().redact(text)
    assert key not in out and "AccountName=acme;AccountKey=[REDACTED:" in out and "EndpointSuffix" in out


def test_structured_values() -> None:
    r = Redactor()
    out = r.redact_obj(
        {
            "card_number": int(VISA),
            "api_key": "abc123xyz987",
            "password": "",  # nothing to hide
            "tokens": 1234,
            "args": json.dumps({"cmd": "deploy", "token": "t0k3n-abcdef", "n": int(VISA)}),
            "nested": [{"client_secret": 42424242}],
        }
    )
    assert out["card_number"] == "[REDACTED:card:1]"
    assert out["api_key"].startswith("[REDACTED:secret:") and out["password"] == ""
    assert out["tokens"] == 1234
    args = json.loads(out["args"])
    assert args["cmd"] == "deploy" and args["token"].startswith("[REDACTED:secret:")
    assert args["n"] == "[REDACTED:card:1]"
    assert out["nested"][0]["client_secret"].startswith("[REDACTED:secret:")
    # unchanged JSON strings keep their exact bytes
    raw = '{"cmd":  "ls",\n "cwd": "/srv"}'
    assert r.redact_obj({"arguments": raw}) == {"arguments": raw}


@pytest.mark.parametrize(
    "text",
    [
        "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it",
        "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "request 550e8400-e29b-41d4-a716-446655440000 failed",
        "max_tokens=512 temperature=0.2 top_k=40",
        "def get_token(self):\n    token = self.make_token(user)\n    return token",
        "password = request.form['password']",
        "const accessToken = req.body.accessToken;",
        "export GOOGLE_APPLICATION_CREDENTIALS=/etc/keys/service.json",
        "The password policy requires 12 characters; the token expires in 3600 seconds.",
        "I paid $1,234.56 on 2024-06-10 at 12:30; order 12345 shipped in 3-5 days.",
        "Version 1.2.3 and build 20240610 were released.",
        "timestamp 1717171717171 and 1717171717171717",
        "See RFC 6750 section 2.1 about the Authorization header.",
        "pip install torch==2.3.0 numpy>=1.26",
    ],
)
def test_ordinary_text_and_code_survive_standard(text: str) -> None:
    assert Redactor().redact(text) == text


def test_strict_masks_long_hex_standard_keeps_it() -> None:
    sha = "3f786850e387550fdab836ed7e6dc881de23001b"
    assert Redactor().redact(sha) == sha
    assert Redactor("strict").redact(sha) == "[REDACTED:hex:1]"


# -- the audit's classes (issue 32, row 17) ------------------------------------------------------

PW = "Marlow" + "4471" + "!"  # built here, not a literal credential
_RNG = random.Random(32)
KEY32 = "".join(_RNG.choice("abcdefghijkmnpqrstuvwxyzABCDEFGH23456789") for _ in range(32))
HEX40 = "".join(_RNG.choice("0123456789abcdef") for _ in range(40))


@pytest.mark.parametrize("level", ["standard", "strict"])
@pytest.mark.parametrize(
    ("text", "kept", "value"),
    [
        (f"my password is {PW}", "my password is ", PW),
        (f"the password: {PW}", "the password: ", PW),
        (f"Password for my gmail account is {PW}.", "account is ", PW),
        (f"she said the root password was {PW} but it changed", "was ", PW),
        ("my password is sunflower.", "my password is ", "sunflower"),
        ('use the passphrase "violet anchor staple"', "passphrase ", "violet anchor staple"),
        (f"log in with password {PW} please", "with password ", PW),
        ("my PIN is 482913", "my PIN is ", "482913"),
        (f"here is my Stripe key {KEY32}", "Stripe key ", KEY32),
        (f"Mailgun API key: {KEY32}", "API key: ", KEY32),
        (f"the token for the bot is {KEY32}", "bot is ", KEY32),
        (f'"private_key_id": "{HEX40}"', '"private_key_id": "', HEX40),
        (f"config: api_key={KEY32}", "config: api_key=", KEY32),
        (f"env: DB_PASSWORD={PW} LOG_LEVEL=info", "LOG_LEVEL=info", PW),
        (f"conn: Server=db;Password={PW};Encrypt=true", "Encrypt=true", PW),
    ],
)
def test_audit_phrasings_are_masked(level: str, text: str, kept: str, value: str) -> None:
    out = Redactor(level).redact(text)
    assert value not in out and kept in out and "[REDACTED:" in out


def test_azure_client_secret_is_an_api_key_anywhere() -> None:
    from redaction_corpus import azure_client_secret

    secret = azure_client_secret(random.Random(5))
    for text in (secret, f"-p {secret} --tenant x", f"value {secret}.", json.dumps({"v": secret})):
        out = Redactor().redact(text)
        assert secret not in out and "[REDACTED:api_key:1]" in out, text


@pytest.mark.parametrize(
    "text",
    [
        "the password is wrong, try again",
        "Your password is required for login.",
        "A strong password is important for every account.",
        "the password is hashed with bcrypt before it is stored",
        "Reset the password to something memorable.",
        "Use a password manager like Bitwarden.",
        "1. **Use a password manager**: Tools like LastPass help.",
        "* **Password Generation:** LastPass generates strong passwords",
        "password = input('Password: ')",
        "WHERE username = '$user' AND password = '$pass'",
        "the password is 8 characters long",
        "the key is to stay calm and keep going",
        "the primary key is user_id_2024 on that table",
        "token 0x1f9840a85d5af5bf1d1762f925bdaddc4201f984 on Ethereum",
        "the API key is stored in settings.api_key_v2",
        "the session token is sent in a cookie",
        '"client_id": "114823334526741987325", "client_email_verified": true',
    ],
)
def test_audit_rules_keep_prose_and_code(text: str) -> None:
    assert Redactor().redact(text) == text


def test_private_key_id_is_a_secret_name_other_ids_are_not() -> None:
    assert is_secret_name("private_key_id") and is_secret_name("privateKeyId")
    assert not is_secret_name("client_id") and not is_secret_name("key_id")
    out = Redactor().redact_obj({"private_key_id": HEX40, "project_id": "acme-prod"})
    assert out == {"private_key_id": "[REDACTED:secret:1]", "project_id": "acme-prod"}
