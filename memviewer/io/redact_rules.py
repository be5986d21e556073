"""The redaction rules: which text each class masks, and the checks that keep look-alikes.

Three sources, in one table (``RULES``), run from the most specific class to the least:

* ``detect-secrets`` (Yelp's well-kept secret scanner): its vendor detectors' own regular
  expressions and validators (AWS, Azure storage, GitHub, GitLab, Slack, Stripe, npm, PyPI,
  SendGrid, Twilio, Mailchimp, Discord, Telegram, JWT, IBM, Artifactory, basic-auth URLs …)
  and its base64 high-entropy string detector, run on text through their ``analyze_string``
  (no CLI, no files);
* our own secret rules for what it does not cover or covers only in code syntax: whole PEM /
  OpenSSH private-key blocks, ``NAME=<secret>`` assignments and ``"password": "…"`` pairs,
  ``Authorization: Basic|Bearer …``, newer key formats (``sk_live_``, ``npm_``, ``sk-proj-``,
  Azure AD client secrets ``xxxNQ~…``), and secrets named only by the sentence around them
  ("my password is …", "here is my Stripe key …");
* PII with checksums where the format has one: Luhn for card numbers (any common spacing),
  ISO 7064 mod-97 for IBANs, the SSA's rules for US social security numbers; e-mail, IP and
  phone formats.

Each rule yields ``(start, end)`` spans of the text to mask. ``redact.Redactor`` applies them.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

_A = re.ASCII  # "\d" must not match Arabic-Indic digits, "\w" not CJK letters.

Spans = Iterator[tuple[int, int]]


@dataclass(frozen=True)
class Rule:
    """A regex rule: the span of ``group`` (or the whole match) when ``accept`` agrees."""

    regex: re.Pattern[str]
    accept: Callable[[re.Match[str]], bool] | None = None
    group: str | None = None

    def spans(self, text: str) -> Spans:
        for match in self.regex.finditer(text):
            start, end = match.span(self.group or 0)
            if start < 0 or start == end:
                continue
            if self.accept is None or self.accept(match):
                yield start, end


def _r(
    pattern: str, accept: Callable[[str], bool] | None = None, group: str | None = None, flags: int = 0
) -> Rule:
    def check(match: re.Match[str]) -> bool:
        return accept(match.group(group or 0)) if accept else True

    return Rule(re.compile(pattern, _A | flags), check if accept else None, group)


class DetectSecretsRule:
    """Spans of what detect-secrets' plugins report in the text (their regexes and checks)."""

    def __init__(self, factories: Callable[[], list[Any]]) -> None:
        self._factories = factories

    @property
    def plugins(self) -> list[Any]:
        return _plugins(self._factories)

    def spans(self, text: str) -> Spans:
        found: set[str] = set()
        for plugin in self.plugins:
            try:
                for secret in plugin.analyze_string(text):
                    secret = _NAME_PREFIX.sub("", secret.strip(" \t\r\n\"'=:,"))
                    if len(secret) >= 8:
                        found.add(secret)
            except Exception:  # a third-party detector must never sink an export
                continue
        for secret in sorted(found, key=len, reverse=True):
            pos = text.find(secret)
            while pos >= 0:
                yield pos, pos + len(secret)
                pos = text.find(secret, pos + len(secret))


_NAME_PREFIX = re.compile(r"^[A-Za-z_]{2,40}[=:]\s*")  # "AccountKey=": keep the name readable


@cache
def _plugins(factories: Callable[[], list[Any]]) -> list[Any]:
    return factories()


def _vendor_plugins() -> list[Any]:
    from detect_secrets.plugins.artifactory import ArtifactoryDetector
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.basic_auth import BasicAuthDetector
    from detect_secrets.plugins.cloudant import CloudantDetector
    from detect_secrets.plugins.discord import DiscordBotTokenDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.ibm_cloud_iam import IbmCloudIamDetector
    from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
    from detect_secrets.plugins.jwt import JwtTokenDetector
    from detect_secrets.plugins.mailchimp import MailchimpDetector
    from detect_secrets.plugins.npm import NpmDetector
    from detect_secrets.plugins.openai import OpenAIDetector
    from detect_secrets.plugins.pypi_token import PypiTokenDetector
    from detect_secrets.plugins.sendgrid import SendGridDetector
    from detect_secrets.plugins.slack import SlackDetector
    from detect_secrets.plugins.softlayer import SoftlayerDetector
    from detect_secrets.plugins.square_oauth import SquareOAuthDetector
    from detect_secrets.plugins.stripe import StripeDetector
    from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
    from detect_secrets.plugins.twilio import TwilioKeyDetector

    classes = (
        ArtifactoryDetector,
        AWSKeyDetector,
        AzureStorageKeyDetector,
        BasicAuthDetector,
        CloudantDetector,
        DiscordBotTokenDetector,
        GitHubTokenDetector,
        GitLabTokenDetector,
        IbmCloudIamDetector,
        IbmCosHmacDetector,
        JwtTokenDetector,
        MailchimpDetector,
        NpmDetector,
        OpenAIDetector,
        PypiTokenDetector,
        SendGridDetector,
        SlackDetector,
        SoftlayerDetector,
        SquareOAuthDetector,
        StripeDetector,
        TelegramBotTokenDetector,
        TwilioKeyDetector,
    )
    return [cls() for cls in classes]


def _entropy_plugins() -> list[Any]:
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

    return [_EntropyFilter(Base64HighEntropyString(limit=4.5))]


class _EntropyFilter:
    """detect-secrets' quoted base64 strings, kept when their entropy passes its own limit."""

    def __init__(self, plugin: Any) -> None:
        self.plugin = plugin

    def analyze_string(self, text: str) -> Iterator[str]:
        for value in self.plugin.analyze_string(text):
            if len(value) >= 20 and self.plugin.calculate_shannon_entropy(value) > self.plugin.entropy_limit:
                if _has_letter_and_digit(value):
                    yield value


# ---- validators -----------------------------------------------------------------------------


def _digits(text: str) -> str:
    return "".join(ch for ch in text if "0" <= ch <= "9")


def luhn_ok(text: str) -> bool:
    """A card number: 13-19 digits passing the Luhn check (ISO/IEC 7812)."""
    digits = _digits(text)
    # Issuer networks start 2-6 (Mastercard, Amex/Diners/JCB, Visa, Discover/UnionPay); a
    # leading 1 is far more often an epoch in ms/us/ns than a card.
    if not 13 <= len(digits) <= 19 or digits[0] not in "23456" or len(set(digits)) < 2:
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


# Lengths from the SWIFT IBAN registry; a country not listed is checked by checksum alone.
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20,
    "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18,
    "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IS": 26, "IT": 27, "JO": 30,
    "KW": 30, "KZ": 20, "LB": 28, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24,
    "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28,
    "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SE": 24, "SI": 19, "SK": 24,
    "SM": 27, "TN": 24, "TR": 26, "UA": 29, "VG": 24, "XK": 20,
}  # fmt: skip


def iban_ok(text: str) -> bool:
    """An IBAN: country code, the registry's length, and the ISO 7064 mod-97-10 checksum."""
    iban = re.sub(r"[ -]", "", text).upper()
    if not 15 <= len(iban) <= 34:
        return False
    expected = _IBAN_LENGTHS.get(iban[:2])
    if expected is not None and len(iban) != expected:
        return False
    rearranged = iban[4:] + iban[:4]
    number = "".join(str(int(ch, 36)) for ch in rearranged)
    return int(number) % 97 == 1


def _ssn_ok(text: str) -> bool:
    digits = _digits(text)
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


def _has_letter_and_digit(text: str) -> bool:
    return any(c.isdigit() for c in text) and any(c.isalpha() for c in text)


def _char_class(ch: str) -> int:
    return 0 if ch.isupper() else 1 if ch.islower() else 2


def looks_random(text: str) -> bool:
    """Tell a base64 blob from a long identifier, path or kebab-case name.

    Random base64 mixes upper, lower and digits and switches between them on most
    alphanumerics (about 3 in 5); ``CamelCase/with-words2`` switches only at word starts.
    Separators (``+/_-=``) are ignored so that ``some-long-name`` does not count as mixing.
    """
    alnum = [c for c in text if c.isalnum()]
    classes = [_char_class(c) for c in alnum]
    if len(alnum) < 32 or len(set(classes)) < 3:
        return False
    switches = sum(1 for a, b in zip(classes, classes[1:], strict=False) if a != b)
    if switches < 0.3 * len(alnum):
        return False
    counts = Counter(alnum)
    entropy = -sum(n / len(alnum) * math.log2(n / len(alnum)) for n in counts.values())
    return entropy >= 4.0


def _phone_digits(lo: int, hi: int) -> Callable[[str], bool]:
    def accept(text: str) -> bool:
        return lo <= len(_digits(text)) <= hi

    return accept


def _valid_ipv6(text: str) -> bool:
    # Two groups ("a::b", "std::x" look-alikes, "[::2]" slices) are too likely to be code;
    # real addresses worth hiding have at least three groups.
    if len([g for g in text.split(":") if g]) < 3:
        return False
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def _basic_credentials(text: str) -> bool:
    """``Basic <base64>`` whose payload decodes to ``user:password``."""
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return ":" in decoded and decoded.isprintable()


# ---- secret names ---------------------------------------------------------------------------

# A name (an environment variable, a JSON key, a keyword argument) whose value is a secret.
# Names are split into words (snake, kebab, dotted, camelCase) and matched word-wise, so
# ``AWS_SECRET_ACCESS_KEY``, ``sendgridApiKey`` and ``db.password`` are secret names while
# ``tokenizer``, ``max_tokens`` and ``passport`` are not.
_SECRET_WORDS = frozenset(
    {
        "password", "passwd", "pwd", "pass", "passphrase", "passcode", "secret", "secrets",
        "token", "apikey", "credential", "credentials", "auth", "authorization", "accountkey",
        "sharedaccesskey", "sig", "privatekey", "pin", "cvv", "cvc", "otp", "totp", "dsn",
    }
)  # fmt: skip
_SECRET_PAIRS = frozenset(
    {
        ("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key"),
        ("account", "key"), ("signing", "key"), ("encryption", "key"), ("master", "key"),
        ("session", "key"), ("client", "secret"), ("connection", "string"), ("conn", "str"),
        ("shared", "key"), ("app", "key"), ("license", "key"), ("webhook", "secret"),
    }
)  # fmt: skip
# A last word that makes the name describe the secret rather than hold it.
_NOT_A_VALUE = frozenset(
    {
        "count", "counts", "limit", "len", "length", "type", "max", "min", "size", "expires",
        "expiry", "expiration", "ttl", "url", "uri", "file", "path", "name", "names", "env",
        "var", "id", "ids", "hint", "usage", "budget", "estimate", "prompt", "field",
        "header", "policy", "required", "enabled", "set", "valid", "format", "label", "kind",
        "mode", "source", "provider", "location", "rotation", "strength", "rate", "ratio",
        "percent", "score", "threshold", "fraction", "k", "at", "fail", "through",
    }
)  # fmt: skip
_WORD_SPLIT = re.compile(r"[_.\-\s]+|(?<=[a-z0-9])(?=[A-Z])")


# Names whose last word would read as "describes the secret" but whose value identifies one:
# a GCP service account's ``private_key_id`` names the key a leaked file signs with.
_SECRET_NAME_TAILS = frozenset({("private", "key", "id")})


@cache
def is_secret_name(name: str) -> bool:
    """Whether a key or variable called ``name`` holds a secret (``DB_PASSWORD``, ``apiKey``)."""
    words = [w.lower() for w in _WORD_SPLIT.split(name.strip("\"'[]")) if w]
    if tuple(words[-3:]) in _SECRET_NAME_TAILS:
        return True
    if not words or len(words) > 8 or words[-1] in _NOT_A_VALUE:
        return False
    if any(w in _SECRET_WORDS for w in words):
        return True
    return any(pair in _SECRET_PAIRS for pair in zip(words, words[1:], strict=False))


_PLACEHOLDERS = frozenset(
    {"none", "null", "nil", "true", "false", "undefined", "required", "optional", "string", "str", "bool",
     "int", "yes", "no", "empty", "redacted", "the", "a", "an", "is", "was", "and", "or", "to", "for", "in"}
)  # fmt: skip


def _assignment_value(match: re.Match[str]) -> bool:
    name, value = match.group("name"), match.group("s")
    if not is_secret_name(name) or value.lower() in _PLACEHOLDERS:
        return False
    if value.startswith(("$", "%(", "{{", "<", "os.", "process.", "env.", "getenv", "[REDACTED")):
        return False  # a reference to a secret, not the secret
    if not match.group("vq") and not match.group("op").strip(" ").startswith("="):
        # "token: xyz" in prose: an unquoted value after a colon must look like a credential
        return len(value) >= 8 and any(not c.isalpha() for c in value)
    words = [w.lower() for w in _WORD_SPLIT.split(name) if w]
    if any(w.startswith("pass") or w in ("pwd", "pin", "cvv", "cvc", "otp") for w in words):
        return len(value) >= 3
    return len(value) >= 6


# ---- the rules, by class ----------------------------------------------------------------------

_TOKEN = r"[A-Za-z0-9_-]"
_B = r"(?<![A-Za-z0-9_-])"  # start of a token run
_E = r"(?![A-Za-z0-9_-])"  # end of a token run

_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
# After a number: no more digits/letters, and no ".<digit>" (versions like 1.2.3.4.5).
_NUM_END = r"(?![A-Za-z0-9_]|\.[0-9]|[/:-][0-9])"
_NUM_START = r"(?<![A-Za-z0-9_.+/:-])"
_SEP = r"[ .-]"

_URL_TAIL = r"[^\s<>\"'`]*[^\s<>\"'`.,;:!?)\]}]"  # URL chars, not ending on punctuation
# Path chars; a path may not end on punctuation, and ":" starts a line number ("x.py:12").
_PATH_BODY = r"(?:[^\s<>\"'`|;,:)\]}]*[^\s<>\"'`|;,.:!?)\]}])?"
_PATH_TAIL = rf"(?:[/\\]{_PATH_BODY})?"

_PEM_LABEL = r"-----(?:BEGIN|END)[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
# Assignment: NAME, an operator, a value (quoted: to the closing quote; bare: to a delimiter).
_ASSIGN = (
    r"(?<![A-Za-z0-9_.-])(?P<nq>[\"']?)(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,63})(?P=nq)"
    r"(?P<op>[ \t]*(?::=|=>|==?|:)[ \t]*)"
    r"(?:(?P<vq>[\"'])(?P<qs>[^\"'\n]{1,512})(?P=vq)|(?P<bs>[^\s\"'`,;<>(){}\[\]]{1,512}))"
)


class _AssignmentRule:
    """``NAME=value``, ``"name": "value"``, ``name: value``: the value, when NAME is secret."""

    regex = re.compile(_ASSIGN, _A)

    def spans(self, text: str) -> Spans:
        # Not ``finditer``: a value that is no secret is searched again, because it may hold
        # one (``env: DB_PASSWORD=x``, ``args: --token=x``: the outer ``name: value`` match
        # would otherwise swallow the inner pair).
        pos = 0
        while (match := self.regex.search(text, pos)) is not None:
            group = "qs" if match.group("vq") else "bs"
            value = match.group(group)
            if not (
                group == "bs"
                and _is_reference(value, text[match.end() : match.end() + 1], match.group("name"))
            ) and _assignment_value(_AssignmentMatch(match, value)):  # type: ignore[arg-type]
                start, end = match.span(group)
                yield start, end
                pos = end
            else:
                pos = max(match.start() + 1, match.start(group))


_DOTTED = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+", _A)
_IDENT = re.compile(r"[A-Za-z_-]+", _A)


def _is_reference(value: str, after: str, name: str) -> bool:
    """An unquoted value in code that names the secret instead of holding it: a call or an
    index (``token = make_token(...)``, ``request.form['password']``), an attribute path
    (``req.body.accessToken``), a file path, or (for names other than passwords) a bare word."""
    if after in ("(", "[") or _DOTTED.fullmatch(value) or value.startswith(("/", "./", "../", "~/")):
        return True
    is_password = any(w.startswith("pass") or w == "pwd" for w in _WORD_SPLIT.split(name.lower()))
    return not is_password and _IDENT.fullmatch(value) is not None


class _AssignmentMatch:
    def __init__(self, match: re.Match[str], value: str) -> None:
        self._match, self._value = match, value

    def group(self, name: str) -> str:
        return self._value if name == "s" else self._match.group(name) or ""


# ---- secrets named only by the sentence around them -------------------------------------------

# Words that follow "the password is" in ordinary prose (and type names after "password:").
_NOT_A_PASSWORD = frozenset(
    {
        "a", "an", "the", "my", "your", "our", "their", "his", "her", "its", "this", "that", "it",
        "not", "no", "now", "still", "also", "just", "only", "too", "very", "so", "being", "been",
        "wrong", "incorrect", "correct", "right", "invalid", "valid", "expired", "required",
        "optional", "missing", "empty", "blank", "weak", "strong", "secure", "insecure", "safe",
        "unsafe", "long", "short", "same", "different", "new", "old", "case", "sensitive",
        "hidden", "unknown", "forgotten", "lost", "stolen", "compromised", "important", "needed",
        "necessary", "mandatory", "set", "reset", "changed", "saved", "stored", "sent", "shown",
        "masked", "encrypted", "hashed", "protected", "correctly", "ok", "okay", "fine", "good",
        "bad", "here", "there", "below", "above", "attached", "included", "provided", "given",
        "none", "null", "nil", "undefined", "true", "false", "str", "string", "int", "bool",
        "number", "text", "any", "password", "passwords", "secret", "hunter", "redacted",
        "something", "anything", "nothing", "everything", "enabled", "disabled",
        "easy", "hard", "simple", "complex", "unique", "random", "generated", "temporary",
        "what", "which", "whatever", "used", "one", "two", "three", "and", "or", "but", "for",
        "of", "on", "in", "to", "at", "by", "with", "as", "if", "then", "when", "where", "yes",
    }
)  # fmt: skip
# Suffixes of adjectives, participles and adverbs: "the password is expiring / reusable / mandatory".
_WORDY_SUFFIXES = (
    "ed", "ing", "ly", "ble", "ive", "ful", "less", "ous", "ant", "ent", "ary", "ory", "ic", "al"
)  # fmt: skip
_QUOTES = "\"'`\u2018\u2019\u201c\u201d"
_PASSWORD_SENTENCE = re.compile(
    r"(?i:\b(?P<det>(?:my|our|your|his|her|their|the|new|wifi|wi-fi|admin|root|default|"
    r"temporary|temp|account|login|router|master|db|database)\s+)?"
    r"(?P<kw>pass(?:word|wd|phrase|code)s?|pwd|pw|pin(?:\s+code)?)\b"
    # "for the router" may sit between the word and the verb, never before a bare value
    r"(?:(?:\s+(?:for|to|of|on|at)(?:\s+[\w.@'-]+){1,3}?)?"
    r"(?P<op>\s*[:=]\s*|\s+(?:is|was|will\s+be|would\s+be|should\s+be|remains|is\s+now|is\s+still"
    r"|has\s+been\s+(?:changed|set|reset|updated)\s+to|(?:changed|set|reset|updated)\s+to|to)(?:\s*:)?\s+)"
    r"|\s+))"
    r"(?:(?P<q>[" + _QUOTES + r"])(?P<qs>[^\n" + _QUOTES + r"]{3,128})[" + _QUOTES + r"]"
    r"|(?P<bs>[^\s" + _QUOTES + r"<>(){}\[\],;]{3,64}))"
)
_TRAILING = ".,;:)]}"  # "!" and "?" stay: a password may end on one


class _PasswordSentenceRule:
    """A password written in prose: "my password is X", "the password: X", "PIN is 4821".

    Only the value is masked. A value with a digit or a symbol is a password; a plain word only
    when it ends the phrase and does not read as prose ("the password is wrong", "... is
    required for", "... is hashed"). With no verb ("log in with password X") the value must mix
    letters with digits or symbols.
    """

    regex = _PASSWORD_SENTENCE

    def spans(self, text: str) -> Spans:
        for match in self.regex.finditer(text):
            if match.group("qs"):
                value, start = match.group("qs"), match.start("qs")
                if not _placeholder(value):
                    yield start, start + len(value)
                continue
            value, start = match.group("bs"), match.start("bs")
            if value.startswith("*"):
                continue  # Markdown: "**Password**: ..." is a heading, not a value
            trimmed = value.rstrip(_TRAILING + "*")
            if len(trimmed) >= 3 and self._accept(match, trimmed, text[start + len(trimmed) :]):
                yield start, start + len(trimmed)

    @staticmethod
    def _accept(match: re.Match[str], value: str, after: str) -> bool:
        lower = value.lower()
        if _placeholder(value):
            return False
        if _DOTTED.fullmatch(value) or value.startswith(("/", "./", "~/", "http")) or after[:1] in ("(", "["):
            return False  # code (``password = request.form``), a path or a link
        op = (match.group("op") or "").strip()
        kw = match.group("kw").lower()
        symbolic = not value.isalpha()
        if kw.startswith("pin"):
            return value.isdigit() and 4 <= len(value) <= 8 and bool(op)
        if not op:  # "with password X": letters and digits both, as in no word of prose
            return len(value) >= 6 and any(c.isalpha() for c in value) and any(c.isdigit() for c in value)
        if op in (":", "=") and not match.group("det"):
            # the assignment rule's case ("password: X" in config or code); here only
            # short symbolic values it leaves
            return symbolic and len(value) >= 4
        if symbolic:
            return True
        # A plain word: only when it ends the phrase and does not read as prose.
        if lower.endswith(_WORDY_SUFFIXES) or len(value) < 4:
            return False
        return after == "" or after[0] in "\n" + _TRAILING and (len(after) == 1 or after[1] in " \n\t")


def _placeholder(value: str) -> bool:
    """A stand-in for a password, not one: ``your-password``, ``$pass``, ``<pw>``, ``****``."""
    lower = value.strip().lower()
    if lower in _NOT_A_PASSWORD or set(lower) <= set("*.-_#x "):
        return True
    if value.startswith(("[REDACTED", "$", "%", "{{", "<", "*")):
        return True
    return any(word in lower for word in ("your", "password", "passwd", "example", "placeholder"))


# "here is my Stripe key <value>", "the client secret is <value>", "OpenAI token: <value>".
_NAMED_KEY = re.compile(
    r"(?i:\b(?:(?:api|access|secret|auth|private|license|licence|app|client|webhook|signing|"
    r"developer|dev|live|test|prod|production|service|account|master|personal\s+access)[ _-]?)?"
    r"(?:key|token|secret)s?\b"
    r"(?:\s+(?:for|from|of|to)\s+(?:the\s+|my\s+|our\s+)?[\w.-]+)?"
    r"(?:\s*[:=]\s*|\s+(?:is|was|is\s+now|=)(?:\s*:)?\s+|\s+(?:here|below)\s*:\s*|\s+))"
    r"[" + _QUOTES + r"]?(?P<s>[A-Za-z0-9_+/=.~-]{16,256})"
)
_IDENT_WORDS = re.compile(r"[A-Za-z]+(?:[_.-][A-Za-z]+)*[_.-]?[0-9]{0,4}", _A)


def _credential_like(value: str) -> bool:
    """An opaque credential rather than a word, an identifier or a number: letters and at least
    two digits, not a dotted/snake name with a version at the end, long enough for its alphabet."""
    digits = sum(c.isdigit() for c in value)
    letters = sum(c.isalpha() for c in value)
    if digits < 2 or letters < 4 or _IDENT_WORDS.fullmatch(value) or "://" in value:
        return False
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", value):
        return False  # a contract address or a hash, not a credential
    if re.fullmatch(r"[0-9a-fA-F-]+", value):
        return len(value.replace("-", "")) >= 32  # hex: a token's length, not a short hash
    return len(value) >= 16


class _NamedKeyRule:
    """A key whose vendor or kind is named only by the words before it (no prefix to match)."""

    regex = _NAMED_KEY

    def spans(self, text: str) -> Spans:
        for match in self.regex.finditer(text):
            start, end = match.span("s")
            value = text[start:end].rstrip(".")
            if _credential_like(value):
                yield start, start + len(value)


RULES: dict[str, tuple[Any, ...]] = {
    "private_key": (
        # The whole block, header to footer (a key cut short: to the end of its base64 body).
        _r(
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:[\s\S]{0,65536}?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
            r"|(?:[A-Za-z0-9+/=:,\s-]|\\[nrt])*)"
        ),
        _r(r"PuTTY-User-Key-File-[0-9]+:[\s\S]{0,8192}?Private-MAC: *[0-9a-fA-F]+"),
    ),
    "api_key": (
        _r(rf"{_B}sk-(?:ant-|proj-|svcacct-|admin-)?{_TOKEN}{{20,}}{_E}", _has_letter_and_digit),
        _r(rf"{_B}(?:gh[pousr]_[A-Za-z0-9]{{30,}}|github_pat_[A-Za-z0-9_]{{30,}}){_E}"),
        _r(rf"{_B}xox[abposre]-[A-Za-z0-9-]{{10,}}{_E}"),
        _r(r"https://hooks\.slack\.com/services/[A-Za-z0-9+/_-]{20,}"),
        _r(
            r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16}(?![A-Za-z0-9])"
        ),
        _r(rf"{_B}AIza{_TOKEN}{{35}}{_E}"),
        _r(rf"{_B}ya29\.{_TOKEN}{{20,}}{_E}"),  # Google OAuth access token
        _r(rf"{_B}glpat-{_TOKEN}{{20,}}{_E}"),
        _r(rf"{_B}hf_[A-Za-z0-9]{{30,}}{_E}"),
        _r(rf"{_B}(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{{10,}}{_E}"),  # Stripe secret / restricted
        _r(rf"{_B}whsec_[A-Za-z0-9]{{20,}}{_E}"),  # Stripe webhook signing secret
        _r(rf"{_B}npm_[A-Za-z0-9]{{36}}{_E}"),
        _r(rf"{_B}pypi-[A-Za-z0-9_-]{{50,}}"),
        _r(rf"{_B}SG\.[A-Za-z0-9_-]{{16,32}}\.[A-Za-z0-9_-]{{16,64}}{_E}"),  # SendGrid
        _r(rf"{_B}(?:shpat|shpss|shpca|shppa)_[a-fA-F0-9]{{32}}{_E}"),  # Shopify
        _r(rf"{_B}dop_v1_[a-f0-9]{{64}}{_E}"),  # DigitalOcean
        # Azure AD (Entra ID) client secret: 3 characters, a digit, "Q~", 31-34 more.
        _r(
            r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}"
            r"(?![A-Za-z0-9_~-]|\.[A-Za-z0-9_~-])"
        ),
        # JWT: header.payload.signature, header and payload are base64url JSON ("eyJ" = '{"').
        _r(rf"{_B}eyJ{_TOKEN}{{8,}}\.eyJ{_TOKEN}{{8,}}\.{_TOKEN}*"),
        DetectSecretsRule(_vendor_plugins),
        # Authorization headers: the credential after the scheme (Basic, Bearer, Token, …).
        _r(
            r"(?i:\b(?:proxy-)?authorization)[\"']?[ \t]*[:=][ \t]*[\"']?"
            r"(?:(?i:basic|bearer|token|digest|negotiate|apikey|sharedkey|hmac)[ \t]+)?"
            r"(?P<s>[A-Za-z0-9._~+/:=-]{8,})",
            lambda s: any(not c.isalpha() for c in s) or len(s) >= 16,
            group="s",
        ),
        _r(
            r"(?i:\bbasic)[ \t]+(?P<s>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])",
            _basic_credentials,
            group="s",
        ),
        # Any other bearer credential ("Bearer <opaque token>").
        _r(
            r"(?i:\bbearer)\s+(?P<s>[A-Za-z0-9._~+/-]{16,}=*)(?![A-Za-z0-9._~+/=-])",
            _has_letter_and_digit,
            group="s",
        ),
        _NamedKeyRule(),
    ),
    "secret": (
        # Password in URL userinfo: scheme://user:PASSWORD@host
        _r(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]+:(?P<s>[^\s/@]+)@", group="s"),
        _AssignmentRule(),
        _PasswordSentenceRule(),
        DetectSecretsRule(_entropy_plugins),
        # A random-looking base64 token (40+), also right after "NAME=".
        _r(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{40,}={0,2}(?![A-Za-z0-9+/=_-])", looks_random),
    ),
    "card": (
        _r(
            r"(?<![0-9+.,-])(?:[0-9]{13,19}"
            r"|[0-9]{4}(?P<a>[ .-]| - )[0-9]{4}(?P=a)[0-9]{4}(?P=a)[0-9]{1,7}"  # 4-4-4-4(+3)
            r"|[0-9]{4}(?P<b>[ -])[0-9]{6}(?P=b)[0-9]{4,5}"  # Amex / Diners 4-6-5, 4-6-4
            r"|[0-9]{4}(?P<c>  +)[0-9]{4}(?P=c)[0-9]{4}(?P=c)[0-9]{1,7})"  # wide spacing
            r"(?![0-9]|[.,-][0-9])",
            luhn_ok,
        ),
    ),
    "iban": (
        _r(
            r"(?<![A-Za-z0-9])[A-Z]{2}[0-9]{2}(?:[ -]?[A-Z0-9]{4}){2,7}(?:[ -]?[A-Z0-9]{1,3})?"
            r"(?![A-Za-z0-9])",
            iban_ok,
        ),
    ),
    "ssn": (
        _r(
            r"(?<![0-9A-Za-z-])[0-9]{3}(?P<d>[- ])[0-9]{2}(?P=d)[0-9]{4}(?![0-9]|-[0-9])",
            _ssn_ok,
        ),
        # Written without separators only where it is labelled as one.
        _r(
            r"(?i:\b(?:ssn|social security(?: number| no\.?)?)\b)[^0-9\n]{0,12}(?P<s>[0-9]{9})(?![0-9])",
            _ssn_ok,
            group="s",
        ),
    ),
    "email": (
        _r(
            r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@"
            r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
            r"(?![A-Za-z0-9-])"
        ),
    ),
    "ip": (
        _r(rf"(?<![A-Za-z0-9_.]){_OCTET}(?:\.{_OCTET}){{3}}(?![A-Za-z0-9_]|\.[0-9])"),
        _r(
            r"(?<![A-Za-z0-9_:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![A-Za-z0-9_:])",
            _valid_ipv6,
        ),
    ),
    "phone": (
        # International: +CC then 2-5 groups, separators optional ("+4915112345678").
        _r(
            r"(?<![A-Za-z0-9_+])\+[1-9][0-9]{0,2}(?:[ .-]?\(?[0-9]{1,4}\)?){2,5}" + _NUM_END,
            _phone_digits(8, 15),
        ),
        # North American: (555) 123-4567, 555-123-4567, 555.123.4567, 1-800-555-1234
        _r(
            rf"{_NUM_START}(?:1{_SEP})?(?:\([0-9]{{3}}\)\s?|[0-9]{{3}}{_SEP})"
            rf"[0-9]{{3}}{_SEP}[0-9]{{4}}" + _NUM_END
        ),
        # Trunk-prefixed national numbers: 030 1234567, 0151-1234567, 020 7946 0958,
        # 06 12 34 56 78, (030) 1234 5678. Dots are excluded on purpose: 06.10.2024 is a date.
        _r(
            rf"{_NUM_START}(?:0[0-9]{{1,4}}[ /-]|\(0[0-9]{{1,4}}\)\s?)[0-9]{{2,8}}"
            r"(?:[ -][0-9]{2,6}){0,3}" + _NUM_END,
            _phone_digits(8, 13),
        ),
        # Chinese mobile, commonly written without separators: 13812345678, 138-1234-5678
        _r(rf"{_NUM_START}1[3-9][0-9](?:[0-9]{{8}}|([ -])[0-9]{{4}}\1[0-9]{{4}})" + _NUM_END),
    ),
    "url_query": (
        _r(
            r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#<>\"'`]+[^\s?#<>\"'`]*\?(?P<s>"
            + _URL_TAIL
            + ")",
            group="s",
        ),
    ),
    "home_path": (
        _r(r"(?<![A-Za-z0-9_/.~-])/(?:home|Users)/[A-Za-z0-9._-]+" + _PATH_TAIL),
        _r(r"(?<![A-Za-z0-9_])[A-Za-z]:(?:\\{1,2}|/)Users(?:\\{1,2}|/)[^\\/\s<>\"'`|:]+" + _PATH_TAIL),
        _r(r"(?<![A-Za-z0-9_/.~-])~[A-Za-z0-9._-]*/" + _PATH_BODY),
    ),
    # Long hex strings: hashes and git SHAs are normal in agent transcripts (kept at standard),
    # but a 32+ digit hex string may also be a bare key.
    "hex": (_r(r"(?<![A-Za-z0-9])(?:0[xX])?[0-9A-Fa-f]{32,}(?![A-Za-z0-9])", _has_letter_and_digit),),
    "digits": (_r(r"(?<![0-9])[0-9]{6,}(?![0-9])"),),
}

#: Classes per level (the docs' table, docs/redaction.md, lists what each one masks).
SECRET_CLASSES = ("private_key", "api_key", "secret")
PII_CLASSES = ("card", "iban", "ssn", "email", "ip", "phone")
STRICT_ONLY_CLASSES = ("url_query", "home_path", "hex", "digits")
