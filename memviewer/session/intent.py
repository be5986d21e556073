"""Classify what a user message is for: a task, a memory probe, chitchat or a meta command.

Most messages are obvious from their wording, so a list of named regex rules (English and
Chinese) answers them for free and explains itself through ``rule_id``. Only weak or missing
matches are worth an LLM round-trip, and an LLM failure must never lose the message: we fall
back to the heuristic answer and record why.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from dataclasses import dataclass

from memviewer.errors import MemviewerError
from memviewer.llm import LlmEndpoint, chat_json

log = logging.getLogger("memviewer.session.intent")

TASK = "task"
MEMORY_PROBE = "memory_probe"
CHITCHAT = "chitchat"
META = "meta"
UNKNOWN = "unknown"
KINDS = (TASK, MEMORY_PROBE, CHITCHAT, META, UNKNOWN)

# LLM failures that mean "no usable verdict", as opposed to a misconfiguration.
_FALLBACK_CODES = ("llm_timeout", "llm_output_malformed", "internal")

# The LLM sees at most this much of a message: intent shows up early, and pasted logs are long.
_LLM_MAX_CHARS = 4000


@dataclass(frozen=True)
class IntentResult:
    kind: str
    confidence: float
    rule_id: str  # e.g. "en.task.imperative_verb", "zh.memory_probe.remember", "llm", "none"
    source: str  # "heuristic" | "llm" | "fallback"
    error: str | None = None  # the LLM error code when we fell back


@dataclass(frozen=True)
class _Rule:
    rule_id: str
    kind: str
    confidence: float
    pattern: re.Pattern[str]
    max_len: int | None = None  # only match messages this short (chitchat)


def _rule(rule_id: str, confidence: float, pattern: str, *, max_len: int | None = None) -> _Rule:
    kind = rule_id.split(".")[1]
    assert kind in KINDS, rule_id
    return _Rule(rule_id, kind, confidence, re.compile(pattern, re.IGNORECASE), max_len)


# English verbs that open a request for work.
_EN_VERBS = (
    r"fix|write|implement|add|refactor|create|build|run|deploy|debug|update|remove|delete|"
    r"rename|generate|install|migrate|optimi[sz]e|rewrite|port|convert|set\s+up|configure|"
    r"review|document|patch|bump|upgrade|make(?!\s+sense)|explain\s+how\s+to|show\s+me\s+how\s+to"
)
_EN_ASK = r"(?:(?:please|pls|kindly|can\s+you|could\s+you|would\s+you|will\s+you)[\s,]+)?"

_EN_CHAT_WORDS = (
    r"hi|hello|hey|yo|hiya|thanks|thank\s+you|thx|ty|ok|okay|k|kk|cool|nice|great|awesome|"
    r"perfect|lol|lmao|haha+|good\s+(?:morning|afternoon|evening|night)|bye|goodbye|cheers|"
    r"sure|got\s+it|np|no\s+problem|sounds\s+good|you'?re\s+welcome|welcome|yes|yep|yeah|no|nope"
)
_EN_CHAT_TAIL = r"(?:\s+(?:there|so\s+much|a\s+lot|very\s+much|again|man|mate|buddy))?"
_EN_CHAT_TOKEN = rf"(?:{_EN_CHAT_WORDS}){_EN_CHAT_TAIL}"
# Social or connective lead-ins allowed before the verb ("thanks! now please fix ...").
_EN_LEAD = rf"(?:(?:{_EN_CHAT_TOKEN}|now|so|and|then|also|alright)[\s,!.:;-]+)*"
# Atomic group: "哈哈哈" must not be re-split into single tokens when the match fails.
_ZH_CHAT_TOKEN = (
    r"(?>谢谢(?:你|您|啦)?|多谢|感谢|你好|您好|好的|好滴|好|行|嗯+|哈+|嘿嘿|呵呵|早上好|早安|"
    r"午安|晚上好|晚安|再见|拜拜|没问题|收到|明白了?|了解|不客气|辛苦了|ok)"
)
_ZH_CHAT_PUNCT = r"[\s,.!?~。，！？、啊呀哦啦呢吧嘛]*"

RULES: tuple[_Rule, ...] = (
    # --- meta: the message talks to the tool, not to the agent ---------------------------
    # "any.": the rule does not depend on the language of the message.
    _rule("any.meta.slash_command", 0.97, r"^/[^\W\d][\w-]*(?:\s|$)"),
    _rule("any.meta.leading_slash", 0.6, r"^/"),  # "/home/x.py crashes": a path, not a command
    _rule("en.meta.capabilities", 0.7, r"^(?:help|what can you do|who are you|what are you)\b"),
    _rule("zh.meta.capabilities", 0.7, r"^(?:帮助|你是谁|你能做什么|你会什么)"),
    # --- memory_probe: asks about earlier conversation -----------------------------------
    _rule(
        "en.memory_probe.do_you_remember",
        0.95,
        r"\b(?:do|did|can)\s+you\s+(?:still\s+)?(?:remember|recall)\b",
    ),
    _rule(
        "en.memory_probe.remind_me",
        0.93,
        r"\bremind\s+me\s+(?:what|of|about|how|why|when|where|which|who)\b",
    ),
    _rule(
        "en.memory_probe.what_did_we",
        0.92,
        r"\bwhat\s+(?:did|have|had)\s+(?:we|i|you)\s+(?:just\s+)?"
        r"(?:discuss|decide|talk\s+about|agree|say|said|conclude|settle|choose)",
    ),
    _rule(
        "en.memory_probe.earlier_you_said",
        0.9,
        r"\b(?:earlier|before|previously)\s*,?\s+you\s+(?:said|mentioned|told\s+me|suggested)\b"
        r"|\byou\s+(?:said|mentioned|told\s+me|suggested)\s+(?:earlier|before|previously)\b",
    ),
    _rule("en.memory_probe.last_time", 0.86, r"\blast\s+time\b"),
    _rule(
        "en.memory_probe.we_discussed",
        0.7,
        r"\b(?:we|you\s+and\s+i)\s+(?:already\s+)?(?:discussed|talked\s+about|decided|agreed)\b",
    ),
    _rule("zh.memory_probe.remember", 0.95, r"还记得|记不记得|记得.{0,30}[吗么嘛]"),
    _rule(
        "zh.memory_probe.discussed",
        0.9,
        r"我们(?:之前|以前|刚才|上次)?(?:讨论|聊|谈|说)过|讨论过",
    ),
    _rule("zh.memory_probe.you_said", 0.9, r"你(?:之前|刚才|上次|以前|前面)(?:说|提到|讲|建议)"),
    _rule("zh.memory_probe.previously_we", 0.88, r"(?:之前|以前|刚才|前面)我们|我们(?:之前|以前)"),
    _rule("zh.memory_probe.last_time", 0.88, r"上一?次"),
    # --- task: asks the agent to do work --------------------------------------------------
    _rule("en.task.imperative_verb", 0.9, rf"^{_EN_LEAD}{_EN_ASK}(?:{_EN_VERBS})\b"),
    _rule(
        "en.task.need_you_to",
        0.88,
        r"\b(?:i\s+need\s+you\s+to|i\s+want\s+you\s+to|i'?d\s+like\s+you\s+to"
        r"|help\s+me(?:\s+to)?)\s+\w",
    ),
    _rule("en.task.lets", 0.75, rf"\blet'?s\s+(?:{_EN_VERBS})\b"),
    _rule("en.task.how_do_i", 0.6, r"^(?:how\s+(?:do|can|should)\s+(?:i|we)|how\s+to)\b"),
    _rule("en.task.error_paste", 0.6, r"Traceback \(most recent call last\)|^\w*(?:Error|Exception):"),
    _rule("zh.task.help_me", 0.9, r"帮我|帮忙|麻烦你"),
    _rule("zh.task.write_a", 0.9, r"(?:写|做|搞|生成|建)(?:一个|个|一段|一份|一下)"),
    _rule(
        "zh.task.please_verb",
        0.9,
        r"请.{0,12}?(?:改|写|修|实现|添加|加上|删|重构|生成|部署|运行|跑|检查|优化|解释|创建|更新)",
    ),
    _rule("zh.task.verb", 0.86, r"实现|修复|重构|部署|调试|修一下|改一下"),
    _rule("zh.task.how_to", 0.6, r"怎么(?:做|写|改|修|实现|弄|办)|如何"),
    # --- chitchat: short social messages only ---------------------------------------------
    _rule(
        "en.chitchat.greeting_ack",
        0.92,
        rf"^(?:{_EN_CHAT_TOKEN})(?:[\s,.!~:;)(-]+(?:{_EN_CHAT_TOKEN}))*[\s,.!?~:;)(-]*$",
        max_len=40,
    ),
    _rule("en.chitchat.short_opener", 0.6, rf"^(?:{_EN_CHAT_TOKEN})\b", max_len=30),
    _rule(
        "zh.chitchat.greeting_ack",
        0.92,
        rf"^{_ZH_CHAT_TOKEN}(?:{_ZH_CHAT_PUNCT}{_ZH_CHAT_TOKEN})*{_ZH_CHAT_PUNCT}$",
        max_len=20,
    ),
    _rule("zh.chitchat.short_opener", 0.6, rf"^{_ZH_CHAT_TOKEN}", max_len=12),
)

_NO_MATCH = IntentResult(kind=UNKNOWN, confidence=0.0, rule_id="none", source="heuristic")

SYSTEM_PROMPT = (
    "You classify one message that a user sent to a coding agent. "
    'Reply with only a JSON object: {"kind": "task" | "memory_probe" | "chitchat" | "meta" '
    '| "unknown", "confidence": <number from 0 to 1>}. '
    "task: asks the agent to do or explain work. "
    "memory_probe: asks what was said, decided or done earlier in the conversation. "
    "chitchat: greetings, thanks, acknowledgements, small talk. "
    "meta: commands or questions about the tool or its memory itself. "
    "unknown: none of these."
)


def _normalize(message: str) -> str:
    # NFKC folds full-width forms ("／", "！", "ｆｉｘ") so one pattern serves both widths.
    return unicodedata.normalize("NFKC", message).strip()


def _require_text(message: str) -> str:
    if not isinstance(message, str) or not message.strip():
        raise MemviewerError("invalid_argument", "cannot classify an empty message")
    return _normalize(message)


def heuristic_classify(message: str) -> IntentResult:
    """Return the most confident matching rule, or ``unknown`` with confidence 0.

    Ties keep the earlier rule, so RULES order (meta, memory, task, chitchat) is the
    precedence among equally confident rules.
    """
    text = _require_text(message)
    best: _Rule | None = None
    for rule in RULES:
        if rule.max_len is not None and len(text) > rule.max_len:
            continue
        if best is not None and rule.confidence <= best.confidence:
            continue
        if rule.pattern.search(text):
            best = rule
    if best is None:
        log.debug("no heuristic rule matched (len=%d)", len(text))
        return _NO_MATCH
    log.debug("heuristic match %s -> %s (%.2f)", best.rule_id, best.kind, best.confidence)
    return IntentResult(best.kind, best.confidence, best.rule_id, "heuristic")


def _parse_verdict(reply: dict[str, object], url: str) -> tuple[str, float]:
    """Check the LLM reply against the tiny schema; anything off counts as malformed."""
    kind = reply.get("kind")
    confidence = reply.get("confidence")
    if not isinstance(kind, str) or kind.strip().lower() not in KINDS:
        raise MemviewerError(
            "llm_output_malformed",
            f"LLM returned an unknown intent kind {kind!r}",
            data={"url": url},
        )
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not 0.0 <= float(confidence) <= 1.0
    ):
        raise MemviewerError(
            "llm_output_malformed",
            f"LLM returned an invalid confidence {confidence!r}",
            data={"url": url},
        )
    return kind.strip().lower(), float(confidence)


class IntentClassifier:
    """Heuristics first; the LLM (when configured) only breaks weak or missing matches."""

    STRONG = 0.85

    def __init__(self, endpoint: LlmEndpoint | None = None) -> None:
        self.endpoint = endpoint

    def classify(self, message: str) -> IntentResult:
        heuristic = heuristic_classify(message)
        if heuristic.confidence >= self.STRONG or self.endpoint is None:
            return heuristic
        endpoint = self.endpoint
        try:
            reply = chat_json(endpoint, SYSTEM_PROMPT, _normalize(message)[:_LLM_MAX_CHARS])
            kind, confidence = _parse_verdict(reply, endpoint.chat_url)
        except MemviewerError as exc:
            if exc.code not in _FALLBACK_CODES:
                raise
            log.warning(
                "intent LLM failed (%s: %s); falling back to %s/%s",
                exc.code,
                exc,
                heuristic.kind,
                heuristic.rule_id,
            )
            return IntentResult(heuristic.kind, heuristic.confidence, heuristic.rule_id, "fallback", exc.code)
        log.info(
            "intent LLM verdict %s (%.2f); heuristic was %s/%s",
            kind,
            confidence,
            heuristic.kind,
            heuristic.rule_id,
        )
        return IntentResult(kind, confidence, "llm", "llm")
