"""Realistic FAKE secrets and personal data, generated (never real): Luhn-valid card numbers,
IBANs with valid mod-97 check digits, well-formed keys of each vendor's shape.

``corpus(seed)`` returns ``{name: (level_class, value)}`` where ``level_class`` is
``"secret"`` (``standard`` must mask it) or ``"pii"`` (``strict`` must; ``standard`` masks
these too). Used by tests/test_redact_corpus.py and tests/test_redact_audit.py, which also
share the session and turn shapes they import and the export they read back (below).
"""

from __future__ import annotations

import base64
import json
import random
import string
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from memviewer.cli import cli

B64 = string.ascii_letters + string.digits + "+/"
ALNUM = string.ascii_letters + string.digits
T0 = 1_781_000_000.0
FORMATS = ("json", "jsonl", "md", "praisonai")


def export_turn(sid: str, i: int, role: str, content: str, **kw: Any) -> dict[str, Any]:
    """A turn as ``SessionManager.import_session`` takes it."""
    return {
        "id": f"{sid}-t{i}",
        "role": role,
        "content": content,
        "timestamp": T0 + i,
        "archived": False,
        **kw,
    }


def export_session(sid: str, title: str) -> dict[str, Any]:
    return {
        "id": sid,
        "agent": "ops-bot",
        "scope": "user",
        "scope_id": "u-1",
        "title": title,
        "started_at": T0,
        "last_seen_at": T0 + 100,
        "status": "closed",
    }


def run_export(home: Path, out: Path, fmt: str, level: str | None, ids: tuple[str, ...] = ()) -> str:
    """Export through the real CLI (all sessions, or ``ids``) and return the text written."""
    name = f"{fmt}-{level}-{len(ids)}"
    target = out / name if fmt == "praisonai" else out / f"{name}.{fmt}"
    args = ["--home", str(home), "export", *(ids or ("--all",)), "--format", fmt, "-o", str(target)]
    if level:
        args += ["--redact", level]
    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert r.exit_code == 0, r.output
    if fmt == "praisonai":
        return "\n".join(p.read_text(encoding="utf-8") for p in sorted(target.glob("*.json")))
    return target.read_text(encoding="utf-8")


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def luhn_complete(rng: random.Random, prefix: str, length: int) -> str:
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    for check in string.digits:
        number = body + check
        total = 0
        for i, ch in enumerate(reversed(number)):
            d = int(ch)
            if i % 2:
                d = d * 2 - 9 if d > 4 else d * 2
            total += d
        if total % 10 == 0:
            return number
    raise AssertionError("unreachable")


def iban(rng: random.Random, country: str, bban_len: int) -> str:
    bban = "".join(rng.choice(string.digits) for _ in range(bban_len))
    numeric = "".join(str(int(ch, 36)) for ch in bban + country + "00")
    check = 98 - int(numeric) % 97
    return f"{country}{check:02d}{bban}"


def _group(text: str, size: int = 4, sep: str = " ") -> str:
    return sep.join(text[i : i + size] for i in range(0, len(text), size))


def _jwt(rng: random.Random) -> str:
    def enc(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    sig = base64.urlsafe_b64encode(rng.randbytes(32)).rstrip(b"=").decode()
    payload = {"sub": str(rng.randint(1, 10**9)), "iat": 1700000000}
    return f"{enc({'alg': 'HS256', 'typ': 'JWT'})}.{enc(payload)}.{sig}"


def _pem(rng: random.Random, label: str, lines: int = 8) -> str:
    body = "\n".join(_pick(rng, B64, 64) for _ in range(lines))
    return f"-----BEGIN {label}-----\n{body}\n{_pick(rng, B64, 20)}==\n-----END {label}-----"


def corpus(seed: int = 7) -> dict[str, tuple[str, str]]:
    rng = random.Random(seed)
    visa = luhn_complete(rng, "4", 16)
    mc = luhn_complete(rng, "51", 16)
    amex = luhn_complete(rng, "37", 15)
    de = iban(rng, "DE", 18)
    gb_bban = "WEST" + "".join(rng.choice(string.digits) for _ in range(14))
    gb_num = "".join(str(int(ch, 36)) for ch in gb_bban + "GB00")
    gb = f"GB{98 - int(gb_num) % 97:02d}{gb_bban}"
    basic = base64.b64encode(f"deploy:{_pick(rng, ALNUM, 14)}".encode()).decode()
    account_key = _pick(rng, B64, 86) + "=="
    return {
        # -- secrets (standard) --
        "aws_access_key_id": ("secret", "AKIA" + _pick(rng, string.ascii_uppercase + string.digits, 16)),
        "aws_secret_env": ("secret", _pick(rng, B64, 40)),
        "sendgrid_env": ("secret", f"SG.{_pick(rng, ALNUM, 22)}.{_pick(rng, ALNUM + '_-', 43)}"),
        "stripe_live": ("secret", "sk_live_" + _pick(rng, ALNUM, 24)),
        "stripe_restricted": ("secret", "rk_live_" + _pick(rng, ALNUM, 24)),
        "npm_token": ("secret", "npm_" + _pick(rng, ALNUM, 36)),
        "github_pat": ("secret", "ghp_" + _pick(rng, ALNUM, 36)),
        "github_fine": ("secret", "github_pat_11" + _pick(rng, ALNUM + "_", 60)),
        "slack_bot": (
            "secret",
            f"xoxb-{rng.randint(10**10, 10**11)}-{rng.randint(10**10, 10**11)}-{_pick(rng, ALNUM, 24)}",
        ),
        "slack_webhook": (
            "secret",
            f"https://hooks.slack.com/services/T{_pick(rng, string.ascii_uppercase + string.digits, 8)}/"
            f"B{_pick(rng, string.ascii_uppercase + string.digits, 8)}/{_pick(rng, ALNUM, 24)}",
        ),
        "google_key": ("secret", "AIza" + _pick(rng, ALNUM + "_-", 35)),
        "openai_key": ("secret", "sk-proj-" + _pick(rng, ALNUM, 48)),
        "jwt": ("secret", _jwt(rng)),
        "pem_rsa": ("secret", _pem(rng, "RSA PRIVATE KEY")),
        "openssh": ("secret", _pem(rng, "OPENSSH PRIVATE KEY", 6)),
        "password_assign": ("secret", "Tr0ub4dor&3-" + _pick(rng, ALNUM, 6)),
        "password_json": ("secret", "correct horse " + _pick(rng, string.ascii_lowercase, 8)),
        "basic_auth": ("secret", basic),
        "bearer": ("secret", _pick(rng, ALNUM, 40)),
        "azure_account_key": ("secret", account_key),
        "azure_sas_sig": ("secret", _pick(rng, ALNUM, 43) + "%3D"),
        "db_url_password": ("secret", "pw" + _pick(rng, ALNUM, 12)),
        "generic_api_key": ("secret", _pick(rng, string.ascii_lowercase + string.digits, 32)),
        # -- personal data (strict; standard masks these too) --
        "visa_spaced": ("pii", _group(visa)),
        "visa_dashed": ("pii", _group(visa, sep="-")),
        "mc_plain": ("pii", mc),
        "amex_465": ("pii", f"{amex[:4]} {amex[4:10]} {amex[10:]}"),
        "card_in_meta_int": ("pii", luhn_complete(rng, "4", 16)),
        "iban_de_spaced": ("pii", _group(de)),
        "iban_gb_plain": ("pii", gb),
        "ssn": ("pii", f"{rng.randint(100, 665)}-{rng.randint(10, 99)}-{rng.randint(1000, 9999)}"),
        "email": ("pii", f"jane.doe{rng.randint(10, 99)}@example.org"),
        "phone_us": ("pii", f"(415) {rng.randint(200, 999)}-{rng.randint(1000, 9999)}"),
        "phone_intl": ("pii", f"+44 20 {rng.randint(1000, 9999)} {rng.randint(1000, 9999)}"),
        "ip": ("pii", f"10.{rng.randint(1, 254)}.{rng.randint(1, 254)}.{rng.randint(1, 254)}"),
    }


def placed(values: dict[str, tuple[str, str]]) -> dict[str, str]:
    """Each value in the context it appears in real transcripts (prose, env files, headers)."""
    v = {k: val for k, (_, val) in values.items()}
    return {
        "aws_access_key_id": f"I set aws_access_key_id {v['aws_access_key_id']} in the profile.",
        "aws_secret_env": f"export AWS_SECRET_ACCESS_KEY={v['aws_secret_env']}",
        "sendgrid_env": f"SENDGRID_API_KEY={v['sendgrid_env']}",
        "stripe_live": f"Use {v['stripe_live']} for the live charge.",
        "stripe_restricted": f"the restricted key is {v['stripe_restricted']}",
        "npm_token": f"//registry.npmjs.org/:_authToken={v['npm_token']}",
        "github_pat": f"git clone https://{v['github_pat']}@github.com/acme/app.git",
        "github_fine": f"GH_TOKEN: {v['github_fine']}",
        "slack_bot": f"SLACK_BOT_TOKEN={v['slack_bot']}",
        "slack_webhook": f"post to {v['slack_webhook']} when done",
        "google_key": f"maps key {v['google_key']}",
        "openai_key": f"OPENAI_API_KEY={v['openai_key']}",
        "jwt": f"the session cookie was {v['jwt']}",
        "pem_rsa": f"Here is the deploy key:\n{v['pem_rsa']}\nkeep it safe",
        "openssh": f"{v['openssh']}",
        "password_assign": f"mysql -u root password={v['password_assign']}",
        "password_json": json.dumps({"user": "ops", "password": v["password_json"]}),
        "basic_auth": f"curl -H 'Authorization: Basic {v['basic_auth']}' https://api.example.com",
        "bearer": f"Authorization: Bearer {v['bearer']}",
        "azure_account_key": (
            "DefaultEndpointsProtocol=https;AccountName=acmestore;"
            f"AccountKey={v['azure_account_key']};EndpointSuffix=core.windows.net"
        ),
        "azure_sas_sig": f"https://acme.blob.core.windows.net/c/x.txt?sv=2022-11-02&sp=r&sig={v['azure_sas_sig']}",
        "db_url_password": f"DATABASE_URL=postgres://app:{v['db_url_password']}@db.internal:5432/app",
        "generic_api_key": f'config = {{"api_key": "{v["generic_api_key"]}"}}',
        "visa_spaced": f"my card is {v['visa_spaced']}, exp 04/29",
        "visa_dashed": f"charge {v['visa_dashed']} please",
        "mc_plain": f"mastercard {v['mc_plain']}",
        "amex_465": f"amex {v['amex_465']}",
        "card_in_meta_int": f"card on file {v['card_in_meta_int']}",
        "iban_de_spaced": f"wire it to IBAN {v['iban_de_spaced']} by Friday",
        "iban_gb_plain": f"GB account {v['iban_gb_plain']}",
        "ssn": f"SSN {v['ssn']} on the form",
        "email": f"write to {v['email']}",
        "phone_us": f"call me at {v['phone_us']}",
        "phone_intl": f"London office {v['phone_intl']}",
        "ip": f"the db host is {v['ip']}",
    }


def leak_forms(value: str) -> list[str]:
    """Ways a value could still appear in an export: verbatim, JSON-escaped, digits-only for
    spaced numbers, and each line of a multi-line key body."""
    forms = {value, json.dumps(value)[1:-1]}
    digits = "".join(ch for ch in value if ch.isdigit())
    if len(digits) >= 9 and len(digits) >= len(value.replace(" ", "").replace("-", "")) - 4:
        forms.add(digits)
    if "\n" in value:
        forms.update(line for line in value.split("\n") if len(line) >= 16 and "-----" not in line)
    return sorted(forms)


# -- the audit's classes (issue 32, row 17): what `standard` used to pass ------------------------

#: The classes the audit found passing ``standard`` (``password_sentence`` and
#: ``azure_client_secret`` passed ``strict`` too).
AUDIT_CLASSES = (
    "password_sentence",
    "vendor_key_sentence",
    "azure_client_secret",
    "gcp_private_key_id",
    "nested_assignment",
)
HEX = "0123456789abcdef"
AZ = string.ascii_letters + string.digits + "_~.-"


def _password(rng: random.Random) -> str:
    """A password as people pick them: a word-ish stem, digits, maybe a symbol."""
    stem = _pick(rng, string.ascii_uppercase, 1) + _pick(rng, string.ascii_lowercase, rng.randint(4, 7))
    return stem + _pick(rng, string.digits, rng.randint(2, 4)) + rng.choice(["", "!", "#", "$", "&"])


def azure_client_secret(rng: random.Random) -> str:
    """Entra ID's current client-secret shape: 3 characters, a digit, ``Q~``, 34 more."""
    body = _pick(rng, AZ, 33) + _pick(rng, ALNUM, 1)  # ends on a letter or digit, as real ones do
    return _pick(rng, ALNUM, 3) + rng.choice(string.digits) + "Q~" + body


def _uuid(rng: random.Random) -> str:
    h = _pick(rng, HEX, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


def audit_corpus(seed: int = 32) -> dict[str, tuple[str, str, str]]:
    """``{name: (audit class, fake value, the value in its context)}``, several phrasings per
    class. Generated at test time so that no secret scanner sees a literal key in the repo."""
    rng = random.Random(seed)
    out: dict[str, tuple[str, str, str]] = {}

    def add(name: str, cls: str, value: str, context: str) -> None:
        assert value in context
        out[name] = (cls, value, context)

    pw = [_password(rng) for _ in range(9)]
    add("pw_my_is", "password_sentence", pw[0], f"my password is {pw[0]}")
    add("pw_the_colon", "password_sentence", pw[1], f"ok, the password: {pw[1]}")
    add("pw_for_is", "password_sentence", pw[2], f"The password for the staging db is {pw[2]}.")
    add("pw_with", "password_sentence", pw[3], f"log in as admin with password {pw[3]} and change it")
    add("pw_changed_to", "password_sentence", pw[4], f"I changed my password to {pw[4]} yesterday")
    add("pw_wifi", "password_sentence", pw[5], f"wifi password is {pw[5]}, network HomeNet-5G")
    word = rng.choice(["sunflower", "marmalade", "bluebirds", "tangerine"])
    add("pw_plain_word", "password_sentence", word, f"My email password is {word}.")
    phrase = " ".join(
        rng.choice(["correct", "horse", "battery", "staple", "violet", "anchor"]) for _ in range(4)
    )
    add("pw_quoted_phrase", "password_sentence", phrase, f'the passphrase is "{phrase}"')
    add("pw_short_label", "password_sentence", pw[6], f"user: deploy  pw: {pw[6]}")

    stripe_like = _pick(rng, ALNUM, 32)
    add("key_stripe", "vendor_key_sentence", stripe_like, f"here is my Stripe key {stripe_like}")
    mailgun = _pick(rng, HEX, 32)
    add("key_mailgun_is", "vendor_key_sentence", mailgun, f"My Mailgun API key is {mailgun}, keep it private")
    twilio = _pick(rng, HEX, 32)
    add("key_twilio_colon", "vendor_key_sentence", twilio, f"Twilio auth token: {twilio}")
    datadog = _pick(rng, HEX, 32)
    add("key_for_the", "vendor_key_sentence", datadog, f"use this Datadog key for the agent: {datadog}")
    weather = _pick(rng, ALNUM, 24)
    add("token_is", "vendor_key_sentence", weather, f"the OpenWeather token is {weather}.")
    algolia = _pick(rng, ALNUM, 32)
    add("admin_key", "vendor_key_sentence", algolia, f"Algolia admin key {algolia} (do not commit)")

    az = [azure_client_secret(rng) for _ in range(5)]
    app, tenant = _uuid(rng), _uuid(rng)
    add(
        "az_sentence", "azure_client_secret", az[0], f"the client secret for the app registration is {az[0]}."
    )
    add(
        "az_cli",
        "azure_client_secret",
        az[1],
        f"az login --service-principal -u {app} -p {az[1]} --tenant {tenant}",
    )
    add(
        "az_json",
        "azure_client_secret",
        az[2],
        json.dumps({"clientId": app, "clientSecret": az[2], "tenantId": tenant}),
    )
    add("az_env", "azure_client_secret", az[3], f"AZURE_CLIENT_ID={app}\nAZURE_CLIENT_SECRET={az[3]}")
    add("az_bare", "azure_client_secret", az[4], f"new value {az[4]} expires in 6 months")

    key_ids = [_pick(rng, HEX, 40) for _ in range(3)]
    service_account = {
        "type": "service_account",
        "project_id": "acme-prod-4821",
        "private_key_id": key_ids[0],
        "private_key": _pem(rng, "PRIVATE KEY", 4) + "\n",
        "client_email": "deployer@acme-prod-4821.iam.gserviceaccount.com",
        "client_id": str(rng.randint(10**20, 10**21)),
        "token_uri": "https://oauth2.googleapis.com/token",
    }
    add("gcp_sa_json", "gcp_private_key_id", key_ids[0], json.dumps(service_account, indent=2))
    add("gcp_toml", "gcp_private_key_id", key_ids[1], f'private_key_id = "{key_ids[1]}"')
    add("gcp_yaml", "gcp_private_key_id", key_ids[2], f"privateKeyId: {key_ids[2]}")

    tok = [_pick(rng, ALNUM, 28) for _ in range(3)]
    add("nest_env", "nested_assignment", pw[7], f"env: DB_PASSWORD={pw[7]} LOG_LEVEL=info")
    add("nest_args", "nested_assignment", tok[0], f"args: --api-token={tok[0]} --verbose")
    add("nest_conn", "nested_assignment", pw[8], f"connection: Server=db;User Id=app;Password={pw[8]};")
    add("nest_config", "nested_assignment", tok[1], f"config: secret_key={tok[1]}")
    add("nest_yaml_cmd", "nested_assignment", tok[2], f"- run: deploy.sh SENTRY_AUTH_TOKEN={tok[2]}")
    return out


def azure_tool_calls(seed: int = 33) -> list[tuple[str, str]]:
    """``(fake secret, tool-call arguments JSON)``: an Azure client secret the way agents pass
    one to tools (a shell command, an env map, nested credentials, a file written)."""
    rng = random.Random(seed)
    app, tenant = _uuid(rng), _uuid(rng)
    s = [azure_client_secret(rng) for _ in range(4)]
    return [
        (s[0], json.dumps({"command": f"az login --service-principal -u {app} -p {s[0]} --tenant {tenant}"})),
        (s[1], json.dumps({"command": "terraform apply", "env": {"ARM_CLIENT_SECRET": s[1]}})),
        (s[2], json.dumps({"auth": {"credentials": {"client_id": app, "secret": s[2]}}})),
        (s[3], json.dumps({"path": ".env", "content": f"TENANT={tenant}\nSECRET={s[3]}\n"})),
    ]
