"""Realistic FAKE secrets and personal data, generated (never real): Luhn-valid card numbers,
IBANs with valid mod-97 check digits, well-formed keys of each vendor's shape.

``corpus(seed)`` returns ``{name: (level_class, value)}`` where ``level_class`` is
``"secret"`` (``standard`` must mask it) or ``"pii"`` (``strict`` must; ``standard`` masks
these too). Used by tests/test_redact_corpus.py.
"""

from __future__ import annotations

import base64
import json
import random
import string

B64 = string.ascii_letters + string.digits + "+/"
ALNUM = string.ascii_letters + string.digits


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
