"""Mask secrets and personal data in exported text before it leaves the machine.

Exports of agent memory are shared in bug reports and chats, and transcripts are full of
pasted keys, emails and paths. Masks are numbered per secret (``[REDACTED:email:1]``), so a
reader can still tell that two turns mention the same address without learning it.

Design notes:

* Classes run from the most specific to the least (provider API keys before generic
  high-entropy strings, cards before phone numbers before bare digit runs) and masked
  spans are never looked at again, so masks cannot overlap or nest.
* Every pattern starts only at the beginning of a character run (a look-behind on its own
  alphabet), which keeps matching linear on long inputs.
* ``redact`` repeats its passes until nothing changes: masking one span can expose a
  boundary that lets another pattern match, and a fixpoint is what makes redaction
  idempotent (running it over an export twice is a no-op).

Ids (``scope_id``/``user_id``, session, episode and turn ids, lineage keys) are not text to
mask but keys that group and link records, so ``redact_id`` replaces a sensitive id as a
whole with a stable pseudonym instead of a numbered mask:

* An id is sensitive when it contains an e-mail address or a vendor API key (``standard``)
  or anything the redactor masks in text (``strict``: also phone numbers, digit runs, home
  paths, long hex or random tokens …).
  Plain ids (``alice``, ``s-live``, ULIDs) are written unchanged.
* The pseudonym is ``<prefix>-<10 letters>``: the prefix says what it stands for (the scope,
  e.g. ``user``, for a scope id; ``session``, ``episode``, ``turn``, ``lineage``, ``thread``),
  the letters encode the first 40 bits of HMAC-SHA256 over the id. The same id gives the
  same pseudonym in every export and every format, so one user's sessions still group
  together and ``root_session_id`` still points at the right session. The letters are
  consonants only, so a pseudonym never matches a pattern again (redaction stays
  idempotent) and never spells a word.
* The HMAC key is a random per-installation secret (``redaction.key`` in the memviewer
  home, created on first use, mode 0600): without it, anyone could hash a guessed address
  and confirm it against an export. Exports from different homes therefore use different
  pseudonyms. A ``Redactor`` built without a key (library use) falls back to plain SHA-256,
  which is still stable but open to that guess-and-confirm attack.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import logging
import math
import os
import re
import secrets
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("memviewer.io.redact")

LEVELS = ("standard", "strict")
STANDARD_CLASSES = ("api_key", "secret", "card", "email", "ip", "phone")
STRICT_CLASSES = ("url_query", "home_path", "digits")

# Ids are pseudonymised when they contain one of these classes (strict: every enabled class).
# Standard leaves other ids alone: a hex or random-looking id is normal, a vendor key is not.
STANDARD_ID_CLASSES = ("email", "api_key")
KEY_FILE = "redaction.key"
# 16 consonants, one per hex nibble: pseudonyms hold no digits (so no pattern matches them
# again) and no vowels (so they never spell a word).
_ID_ALPHABET = "bcdfghjklmnpqrst"
_ID_CODE_LEN = 10  # 40 bits: collisions stay unlikely up to ~a million distinct ids
_PREFIX_RE = re.compile(r"[a-z]{1,16}")

# What a mask looks like; text matching this is left alone, which also makes us idempotent.
MASK_RE = re.compile(r"\[REDACTED:[a-z_]+:[0-9]+\]")

_A = re.ASCII  # "\d" must not match Arabic-Indic digits, "\w" not CJK letters.


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    # Keep the match only if this returns True for the masked text.
    accept: Callable[[str], bool] | None = None
    # Name of the group to mask; None masks the whole match ("Bearer <token>" keeps "Bearer").
    group: str | None = None


def _p(pattern: str, accept: Callable[[str], bool] | None = None, group: str | None = None) -> _Pattern:
    return _Pattern(re.compile(pattern, _A), accept, group)


# ---- validators -----------------------------------------------------------------------------


def _digits(text: str) -> str:
    return "".join(ch for ch in text if "0" <= ch <= "9")


def _luhn_ok(text: str) -> bool:
    digits = _digits(text)
    if not 13 <= len(digits) <= 19 or digits[0] == "0":
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _has_letter_and_digit(text: str) -> bool:
    return any(c.isdigit() for c in text) and any(c.isalpha() for c in text)


def _char_class(ch: str) -> int:
    return 0 if ch.isupper() else 1 if ch.islower() else 2


def _looks_random(text: str) -> bool:
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


# ---- patterns, most specific first ----------------------------------------------------------

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

PATTERNS: dict[str, tuple[_Pattern, ...]] = {
    "api_key": (
        _p(rf"{_B}sk-(?:ant-|proj-)?{_TOKEN}{{20,}}{_E}", _has_letter_and_digit),
        _p(rf"{_B}(?:gh[pousr]_[A-Za-z0-9]{{30,}}|github_pat_[A-Za-z0-9_]{{30,}}){_E}"),
        _p(rf"{_B}xox[abposr]-[A-Za-z0-9-]{{10,}}{_E}"),
        _p(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
        _p(rf"{_B}AIza{_TOKEN}{{35}}{_E}"),
        _p(rf"{_B}glpat-{_TOKEN}{{20,}}{_E}"),
        _p(rf"{_B}hf_[A-Za-z0-9]{{30,}}{_E}"),
        # JWT: header.payload.signature, header and payload are base64url JSON ("eyJ" = '{"').
        _p(rf"{_B}eyJ{_TOKEN}{{8,}}\.eyJ{_TOKEN}{{8,}}\.{_TOKEN}*"),
        # Any other bearer credential ("Authorization: Bearer <opaque token>").
        _p(
            r"(?i:\bbearer)\s+(?P<s>[A-Za-z0-9._~+/-]{16,}=*)(?![A-Za-z0-9._~+/=-])",
            _has_letter_and_digit,
            group="s",
        ),
    ),
    "secret": (
        # Password in URL userinfo: scheme://user:PASSWORD@host
        _p(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]+:(?P<s>[^\s/@]+)@", group="s"),
        _p(r"(?<![A-Za-z0-9])(?:0[xX])?[0-9A-Fa-f]{32,}(?![A-Za-z0-9])", _has_letter_and_digit),
        _p(r"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/_-]{40,}={0,2}(?![A-Za-z0-9+/=_-])", _looks_random),
    ),
    "card": (
        _p(
            r"(?<![0-9+-])(?:[0-9]{13,19}"
            r"|[0-9]{4}(?P<a>[ -])[0-9]{4}(?P=a)[0-9]{4}(?P=a)[0-9]{1,7}"  # 4-4-4-4(+3)
            r"|[0-9]{4}(?P<b>[ -])[0-9]{6}(?P=b)[0-9]{4,5})"  # Amex / Diners 4-6-5, 4-6-4
            r"(?![0-9]|-[0-9])",
            _luhn_ok,
        ),
    ),
    "email": (
        _p(
            r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@"
            r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
            r"(?![A-Za-z0-9-])"
        ),
    ),
    "ip": (
        _p(rf"(?<![A-Za-z0-9_.]){_OCTET}(?:\.{_OCTET}){{3}}(?![A-Za-z0-9_]|\.[0-9])"),
        _p(
            r"(?<![A-Za-z0-9_:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![A-Za-z0-9_:])",
            _valid_ipv6,
        ),
    ),
    "phone": (
        # International: +CC then 2-5 groups, separators optional ("+4915112345678").
        _p(
            r"(?<![A-Za-z0-9_+])\+[1-9][0-9]{0,2}(?:[ .-]?\(?[0-9]{1,4}\)?){2,5}" + _NUM_END,
            _phone_digits(8, 15),
        ),
        # North American: (555) 123-4567, 555-123-4567, 555.123.4567, 1-800-555-1234
        _p(
            rf"{_NUM_START}(?:1{_SEP})?(?:\([0-9]{{3}}\)\s?|[0-9]{{3}}{_SEP})"
            rf"[0-9]{{3}}{_SEP}[0-9]{{4}}" + _NUM_END
        ),
        # Trunk-prefixed national numbers: 030 1234567, 0151-1234567, 020 7946 0958,
        # 06 12 34 56 78, (030) 1234 5678. Dots are excluded on purpose: 06.10.2024 is a date.
        _p(
            rf"{_NUM_START}(?:0[0-9]{{1,4}}[ /-]|\(0[0-9]{{1,4}}\)\s?)[0-9]{{2,8}}"
            r"(?:[ -][0-9]{2,6}){0,3}" + _NUM_END,
            _phone_digits(8, 13),
        ),
        # Chinese mobile, commonly written without separators: 13812345678, 138-1234-5678
        _p(rf"{_NUM_START}1[3-9][0-9](?:[0-9]{{8}}|([ -])[0-9]{{4}}\1[0-9]{{4}})" + _NUM_END),
    ),
    "url_query": (
        _p(
            r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#<>\"'`]+[^\s?#<>\"'`]*\?(?P<s>"
            + _URL_TAIL
            + ")",
            group="s",
        ),
    ),
    "home_path": (
        _p(r"(?<![A-Za-z0-9_/.~-])/(?:home|Users)/[A-Za-z0-9._-]+" + _PATH_TAIL),
        _p(r"(?<![A-Za-z0-9_])[A-Za-z]:(?:\\{1,2}|/)Users(?:\\{1,2}|/)[^\\/\s<>\"'`|:]+" + _PATH_TAIL),
        _p(r"(?<![A-Za-z0-9_/.~-])~[A-Za-z0-9._-]*/" + _PATH_BODY),
    ),
    "digits": (_p(r"(?<![0-9])[0-9]{6,}(?![0-9])"),),
}


def pseudonym(value: str, prefix: str = "id", key: bytes | None = None) -> str:
    """``<prefix>-<10 consonants>``: a stable stand-in for ``value`` (HMAC-SHA256 when keyed)."""
    data = value.encode("utf-8")
    digest = hmac.new(key, data, hashlib.sha256).digest() if key else hashlib.sha256(data).digest()
    code = "".join(_ID_ALPHABET[int(nibble, 16)] for nibble in digest.hex()[:_ID_CODE_LEN])
    prefix = prefix.lower() if _PREFIX_RE.fullmatch(prefix.lower()) else "id"
    return f"{prefix}-{code}"


def installation_key(home: str | os.PathLike[str]) -> bytes | None:
    """The home's pseudonym key, created (0600) on first use; ``None`` if it cannot be had.

    The key file appears atomically and exclusively (written aside, then hard-linked into
    place), so two exports racing to create it agree on one key. A home that cannot be
    written falls back to unkeyed pseudonyms, with a warning, rather than failing the export.
    """
    path = Path(home) / KEY_FILE
    try:
        try:
            return _read_key(path)
        except FileNotFoundError:
            pass
        key = secrets.token_bytes(32)
        tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as fh:
                fh.write(key.hex() + "\n")
            try:
                os.link(tmp, path)
            except FileExistsError:
                return _read_key(path)  # another export created it first: use theirs
            return key
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
    except (OSError, ValueError) as exc:
        log.warning("redaction key %s unusable (%s); id pseudonyms are unkeyed", path, exc)
        return None


def _read_key(path: Path) -> bytes:
    key = bytes.fromhex(path.read_text(encoding="ascii").strip())
    if len(key) < 16:
        raise ValueError("key too short")
    return key


class Redactor:
    """Masks secrets consistently for the lifetime of one instance (one export).

    ``id_key`` keys the id pseudonyms (see the module notes); pass the installation's key
    so that pseudonyms cannot be confirmed by hashing a guess.
    """

    def __init__(self, level: str = "standard", *, id_key: bytes | None = None) -> None:
        if level not in LEVELS:
            raise ValueError(f"unknown redaction level {level!r}; expected one of {LEVELS}")
        self.level = level
        self.classes: tuple[str, ...] = STANDARD_CLASSES + (STRICT_CLASSES if level == "strict" else ())
        self.id_classes = STANDARD_ID_CLASSES if level == "standard" else self.classes
        self.counts: dict[str, int] = dict.fromkeys(self.classes, 0)  # masks written per class
        self.ids_masked = 0  # ids replaced by a pseudonym
        self._masks: dict[tuple[str, str], str] = {}
        self._next: dict[str, int] = dict.fromkeys(self.classes, 1)
        self._id_key = id_key

    def redact_id(self, value: Any, prefix: str = "id") -> Any:
        """``value`` itself, or its pseudonym when it is a string holding sensitive data."""
        if not isinstance(value, str) or not self.id_is_sensitive(value):
            return value
        self.ids_masked += 1
        return pseudonym(value, prefix, self._id_key)

    def id_is_sensitive(self, value: str) -> bool:
        """Whether an id holds data of a class this level pseudonymises ids for."""
        return any(self._matches(pattern, value) for cls in self.id_classes for pattern in PATTERNS[cls])

    def redact(self, text: str) -> str:
        """Return ``text`` with every secret replaced by its mask."""
        while True:
            out = self._pass(text)
            if out == text:
                return out
            text = out

    def redact_obj(self, obj: Any) -> Any:
        """Redact every string value inside nested dicts/lists/tuples; keys stay readable."""
        if isinstance(obj, str):
            return self.redact(obj)
        if isinstance(obj, dict):
            return {key: self.redact_obj(value) for key, value in obj.items()}
        if isinstance(obj, list):
            return [self.redact_obj(value) for value in obj]
        if isinstance(obj, tuple):
            return tuple(self.redact_obj(value) for value in obj)
        return obj

    # -- internals --------------------------------------------------------------------------

    def _mask(self, cls: str, secret: str) -> str:
        key = (cls, secret)
        mask = self._masks.get(key)
        if mask is None:
            mask = f"[REDACTED:{cls}:{self._next[cls]}]"
            self._next[cls] += 1
            self._masks[key] = mask
        self.counts[cls] += 1
        return mask

    def _pass(self, text: str) -> str:
        # Pieces are (text, is_mask); only unmasked pieces are searched, so later classes
        # never see (or split) an earlier mask.
        pieces = list(_split_masks(text))
        for cls in self.classes:
            for pattern in PATTERNS[cls]:
                pieces = [
                    out
                    for piece, masked in pieces
                    for out in ([(piece, True)] if masked else self._apply(cls, pattern, piece))
                ]
        return "".join(piece for piece, _ in pieces)

    @staticmethod
    def _matches(pattern: _Pattern, text: str) -> bool:
        for match in pattern.regex.finditer(text):
            start, end = match.span(pattern.group or 0)
            if start >= 0 and start != end and (pattern.accept is None or pattern.accept(text[start:end])):
                return True
        return False

    def _apply(self, cls: str, pattern: _Pattern, text: str) -> Iterator[tuple[str, bool]]:
        pos = 0
        for match in pattern.regex.finditer(text):
            start, end = match.span(pattern.group or 0)
            if start < 0 or start == end:
                continue
            secret = text[start:end]
            if pattern.accept is not None and not pattern.accept(secret):
                continue
            if start > pos:
                yield text[pos:start], False
            yield self._mask(cls, secret), True
            pos = end
        if pos < len(text):
            yield text[pos:], False


def _split_masks(text: str) -> Iterator[tuple[str, bool]]:
    pos = 0
    for match in MASK_RE.finditer(text):
        if match.start() > pos:
            yield text[pos : match.start()], False
        yield match.group(), True
        pos = match.end()
    if pos < len(text):
        yield text[pos:], False
