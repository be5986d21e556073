"""Mask secrets and personal data in exported text before it leaves the machine.

Exports of agent memory are shared in bug reports and chats, and transcripts are full of
pasted keys, emails and paths. Masks are numbered per secret (``[REDACTED:email:1]``), so a
reader can still tell that two turns mention the same address without learning it.

What is masked comes from ``memviewer.io.redact_rules`` (detect-secrets' vendor detectors,
our own rules for private-key blocks, ``NAME=<secret>`` assignments, authorization headers,
and checksum-validated PII); docs/redaction.md has the table of what each level masks.

Design notes:

* Classes run from the most specific to the least (a private-key block before a vendor key
  before a generic high-entropy string, cards before phone numbers before bare digit runs)
  and masked spans are never looked at again, so masks cannot overlap or nest.
* ``redact`` repeats its passes until nothing changes: masking one span can expose a
  boundary that lets another pattern match, and a fixpoint is what makes redaction
  idempotent (running it over an export twice is a no-op).
* Structured values are in scope (``redact_obj``): a value under a secret-named key
  (``"password"``, ``"api_key"``, ``"AWS_SECRET_ACCESS_KEY"``) is masked whole; integers are
  checked as text (``{"card_number": 4111111111111111}``); a string that is itself JSON
  (tool-call arguments) is parsed, redacted value by value and written back.

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
import json
import logging
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memviewer.io.redact_rules import (
    PII_CLASSES,
    RULES,
    SECRET_CLASSES,
    STRICT_ONLY_CLASSES,
    is_secret_name,
)

log = logging.getLogger("memviewer.io.redact")

LEVELS = ("standard", "strict")
STANDARD_CLASSES = SECRET_CLASSES + PII_CLASSES
STRICT_CLASSES = STRICT_ONLY_CLASSES

# Ids are pseudonymised when they contain one of these classes (strict: every enabled class).
# Standard leaves other ids alone: a hex or random-looking id is normal, a vendor key is not.
STANDARD_ID_CLASSES = ("email", "api_key", "private_key")
KEY_FILE = "redaction.key"
# 16 consonants, one per hex nibble: pseudonyms hold no digits (so no pattern matches them
# again) and no vowels (so they never spell a word).
_ID_ALPHABET = "bcdfghjklmnpqrst"
_ID_CODE_LEN = 10  # 40 bits: collisions stay unlikely up to ~a million distinct ids
_PREFIX_RE = re.compile(r"[a-z]{1,16}")

# What a mask looks like; text matching this is left alone, which also makes us idempotent.
MASK_RE = re.compile(r"\[REDACTED:[a-z_]+:[0-9]+\]")
# Values under a secret-named key that are not secrets themselves.
_EMPTY_VALUES = frozenset({"", "none", "null", "nil", "undefined", "true", "false", "***", "redacted"})
_MAX_JSON_TEXT = 8 * 1024 * 1024  # a bigger JSON-looking string is redacted as text only


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
        return any(
            next(iter(rule.spans(value)), None) is not None for cls in self.id_classes for rule in RULES[cls]
        )

    def redact(self, text: str) -> str:
        """Return ``text`` with every secret replaced by its mask."""
        while True:
            out = self._pass(text)
            if out == text:
                return out
            text = out

    def redact_obj(self, obj: Any) -> Any:
        """Redact every value inside nested dicts/lists/tuples; keys stay readable.

        A value under a secret-named key is masked whole; integers are checked as text; a
        string holding JSON is redacted value by value.
        """
        if isinstance(obj, str):
            return self._redact_string(obj)
        if isinstance(obj, dict):
            return {key: self._redact_item(key, value) for key, value in obj.items()}
        if isinstance(obj, list):
            return [self.redact_obj(value) for value in obj]
        if isinstance(obj, tuple):
            return tuple(self.redact_obj(value) for value in obj)
        if isinstance(obj, int) and not isinstance(obj, bool):
            text = str(obj)
            out = self.redact(text)
            return obj if out == text else out
        return obj

    # -- internals --------------------------------------------------------------------------

    def _redact_item(self, key: Any, value: Any) -> Any:
        if isinstance(key, str) and is_secret_name(key):
            if isinstance(value, int | str) and not isinstance(value, bool):
                text = str(value)
                if text.strip().lower() not in _EMPTY_VALUES and not MASK_RE.fullmatch(text):
                    if "secret" in self.counts:
                        return self._mask("secret", text)
        return self.redact_obj(value)

    def _redact_string(self, text: str) -> str:
        head = text.lstrip()[:1]
        if head in ("{", "[") and len(text) <= _MAX_JSON_TEXT:
            try:
                parsed = json.loads(text)
            except (ValueError, RecursionError):
                parsed = None
            if isinstance(parsed, dict | list):
                redacted = self.redact_obj(parsed)
                if redacted != parsed:
                    spaced = ": " in text or ", " in text
                    text = json.dumps(
                        redacted, ensure_ascii=False, separators=(", ", ": ") if spaced else (",", ":")
                    )
        return self.redact(text)

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
            for rule in RULES[cls]:
                pieces = [
                    out
                    for piece, masked in pieces
                    for out in ([(piece, True)] if masked else self._apply(cls, rule, piece))
                ]
        return "".join(piece for piece, _ in pieces)

    def _apply(self, cls: str, rule: Any, text: str) -> Iterator[tuple[str, bool]]:
        spans = sorted(rule.spans(text), key=lambda span: (span[0], -span[1])) if text else []
        pos = 0
        for start, end in spans:
            if start < pos:
                continue  # overlaps a span already masked
            if start > pos:
                yield text[pos:start], False
            yield self._mask(cls, text[start:end]), True
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
