"""PII scrubber applied to every user and assistant text convohub publishes.

WildChat already redacts some PII, but derived releases (summaries, feedback pairs, trees) re-expose raw
turns, so convohub scrubs again with typed placeholders (``[EMAIL]``, ``[PHONE]``, ``[IP]``, ``[CARD]``,
``[IBAN]``, ``[SSN]``, ``[KEY]``).

Why presidio: the field's detectors are presidio-analyzer's recognizers, and hand-written regexes leaked
international phone layouts, IBANs, IDN e-mails and SSNs (issue 16). Its pattern recognizers run without
an NLP model: e-mails (domain checked against the public-suffix list bundled with ``tldextract``, never
fetched), phone numbers through Google's ``phonenumbers`` in many regions, IBANs with their mod-97 check,
Luhn-checked cards, IPv4/IPv6 and US SSNs. convohub keeps its own rules only for what presidio has no
recognizer for: secrets (API keys, tokens, passwords in URLs and assignments) and obfuscated e-mails
("ana dot lopez at example dot com").

Numbers that are not PII must survive: years, dates, clock times, version strings, decimals, amounts,
ISBNs, epoch timestamps. presidio errs towards recall there, so its matches pass convohub's filters
(:func:`_plausible`) and a score floor that drops its "very weak" SSN guesses.

Not scrubbed: names, street addresses and other free-text identifiers. They need an NER model (presidio's
``AnalyzerEngine`` wants a spaCy pipeline such as ``en_core_web_lg``) and none installs offline from a
package index here; :data:`NOT_SCRUBBED` says so in every dataset card.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from convohub.conversations.record import Conversation

PLACEHOLDERS = {"EMAIL": "[EMAIL]", "PHONE": "[PHONE]", "IP": "[IP]", "CARD": "[CARD]", "IBAN": "[IBAN]",
                "SSN": "[SSN]", "KEY": "[KEY]"}

#: Markdown for dataset cards: what the scrubber replaces and, as plainly, what it leaves.
SCRUB_SCOPE = ("e-mail addresses (IDN and obfuscated \"name at domain dot com\" forms included), phone numbers "
               "(international and national layouts, through `phonenumbers`), IPv4/IPv6 addresses, Luhn-valid "
               "card numbers, IBANs, US SSNs and secrets (API keys, tokens, passwords) become `[EMAIL]`, "
               "`[PHONE]`, `[IP]`, `[CARD]`, `[IBAN]`, `[SSN]`, `[KEY]` (presidio-analyzer's recognizers plus "
               "convohub's rules for secrets)")
NOT_SCRUBBED = ("**Not scrubbed:** personal names, street addresses and other free-text identifiers (they need an "
                "NER model, and none installs offline here); national ID numbers other than US SSNs. Do not "
                "assume a text is anonymous because it passed the scrubber.")

# Presidio entity -> convohub placeholder kind.
_ENTITY_KIND = {"EMAIL_ADDRESS": "EMAIL", "PHONE_NUMBER": "PHONE", "IP_ADDRESS": "IP", "CREDIT_CARD": "CARD",
                "IBAN_CODE": "IBAN", "US_SSN": "SSN"}
# presidio's SSN patterns score 0.05 ("very weak", any 9 digits) up to 0.5; phones score 0.4.
_MIN_SCORE = 0.4
# Phone regions tried by phonenumbers for numbers written without a +country code.
_PHONE_REGIONS = ("US", "GB", "DE", "FR", "IN", "CN", "BR", "ES", "IT", "NL", "RU", "AU", "JP", "MX")

_SECRET_NAMES = (r"api[_-]?key|apikey|access[_-]?token|auth[_-]?token|refresh[_-]?token|id[_-]?token|token|"
                 r"client[_-]?secret|secret|key|password|passwd|pwd|sig|signature|session[_-]?id")
_AT = r"(?:\s*[\[({<]\s*at\s*[\])}>]\s*|\s+at\s+)"
_DOT = r"(?:\s*[\[({<]\s*dot\s*[\])}>]\s*|\s+dot\s+)"
_TLD = r"(?:com|org|net|edu|gov|io|co|uk|de|fr|es|it|nl|ru|cn|in|br|jp|au|ca|info|biz)"


# Words that make "<word> at <word> dot com" ordinary English ("look at this dot com bubble").
_PLAIN_WORDS = frozenset({"a", "an", "the", "this", "that", "these", "those", "it", "its", "me", "you", "him", "her",
                          "us", "them", "my", "your", "our", "their", "home", "work", "school", "least", "most",
                          "all", "once", "first", "last", "night", "noon", "one"})


def _not_plain_english(match: re.Match[str]) -> bool:
    local, domain = re.split(_AT, match.group(0), maxsplit=1, flags=re.IGNORECASE)
    return not {local.split()[-1].lower(), domain.split()[0].lower()} & _PLAIN_WORDS


@dataclass(frozen=True)
class _Rule:
    """One of convohub's own rules; group ``value`` (or the whole match) becomes the placeholder."""

    kind: str
    pattern: re.Pattern[str]
    valid: Callable[[re.Match[str]], bool] = lambda match: True


_OWN_RULES: tuple[_Rule, ...] = (
    # Secrets in URL query strings / assignments: keep "?api_key=", replace the value.
    _Rule("KEY", re.compile(rf"[?&;](?:{_SECRET_NAMES})=(?P<value>[^&#\s\"'<>]+)", re.IGNORECASE)),
    _Rule("KEY", re.compile(rf"\b(?:{_SECRET_NAMES})\s*[:=]\s*[\"']?(?P<value>(?=[A-Za-z0-9_\-./+]*\d)"
                            r"[A-Za-z0-9_\-./+]{8,})", re.IGNORECASE)),
    # Common API-key shapes: OpenAI/Anthropic, Hugging Face, GitHub, AWS, Slack, Google.
    _Rule("KEY", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_\-]{16,}"
                            r"|\bhf_[A-Za-z0-9]{20,}"
                            r"|\bgh[pousr]_[A-Za-z0-9]{30,}"
                            r"|\bgithub_pat_[A-Za-z0-9_]{30,}"
                            r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
                            r"|\bxox[abprs]-[A-Za-z0-9\-]{10,}"
                            r"|\bAIza[0-9A-Za-z_\-]{35}")),
    # Obfuscated e-mails: "ana.lopez [at] example [dot] com", "ana at example dot co dot uk". A bracketed
    # "at" may be followed by a plain dotted domain; a spaced "at" needs a spelled "dot" before a known TLD,
    # so "look at this" stays.
    _Rule("EMAIL", re.compile(rf"(?<![\w.+\-])[\w.+\-]*\w\s*[\[({{<]\s*at\s*[\])}}>]\s*[\w\-]+"
                              rf"(?:(?:{_DOT}|\.)[\w\-]+)*(?:{_DOT}|\.){_TLD}\b", re.IGNORECASE)),
    _Rule("EMAIL", re.compile(rf"(?<![\w.+\-])[\w.+\-]*\w(?:{_DOT}[\w.+\-]*\w)*{_AT}[\w\-]+(?:{_DOT}[\w\-]+)*"
                              rf"{_DOT}{_TLD}\b", re.IGNORECASE), _not_plain_english),
)


@cache
def _recognizers() -> tuple[Any, ...]:
    """presidio's pattern recognizers, built once (the phone one carries convohub's regions and the e-mail
    one an offline public-suffix list)."""
    import tldextract
    from presidio_analyzer.predefined_recognizers import (
        CreditCardRecognizer,
        EmailRecognizer,
        IbanRecognizer,
        IpRecognizer,
        PhoneRecognizer,
        UsSsnRecognizer,
    )

    # presidio's own check calls tldextract's default extractor, which downloads the public-suffix list on
    # first use; this one reads the snapshot shipped inside tldextract and never touches the network.
    offline_suffixes = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)

    class OfflineEmailRecognizer(EmailRecognizer):
        def validate_result(self, pattern_text: str) -> bool:
            return offline_suffixes(pattern_text.rsplit("@", 1)[-1]).fqdn != ""

    return (OfflineEmailRecognizer(), PhoneRecognizer(supported_regions=_PHONE_REGIONS), IbanRecognizer(),
            CreditCardRecognizer(), IpRecognizer(), UsSsnRecognizer())


# Day-month-year and year-month-day dates, which phonenumbers accepts as national numbers (09.04.2023).
_DATE = re.compile(r"\d{1,2}([./-])\d{1,2}\1\d{2,4}|\d{4}([./-])\d{1,2}\2\d{1,2}")
_PHONE_CANDIDATE = re.compile(r"\d[\d\s().\-/]{5,}\d")


def _plausible(kind: str, text: str, start: int, end: int) -> bool:
    """convohub's number conservatism on top of presidio: a match glued to letters, digits or version dots
    is part of something else, an unseparated run is a phone only up to 12 digits (13-digit epoch
    milliseconds are not), a date is not a phone, and an unseparated card must start like one (2-6; presidio checks Luhn)."""
    span = text[start:end]
    before = text[start - 1] if start > 0 else " "
    after = text[end:end + 2]
    if kind in {"PHONE", "CARD", "SSN", "IP"}:
        if before.isalnum() or before in "._" or (after[:1] in ".:" and after[1:2].isdigit()):
            return False
        if after[:1].isalnum() or after[:1] == "_":
            return False
    digits = sum(c.isdigit() for c in span)
    if kind == "PHONE":
        if not span.startswith("+") and (span.isdigit() and digits > 12 or _DATE.fullmatch(span)):
            return False
        return 7 <= digits <= 15
    if kind == "CARD" and span.isdigit():
        return span[0] in "23456"
    if kind == "IP" and ":" in span:
        groups = [g for g in span.split(":") if g]
        return len(groups) >= 2 and any(c.isdigit() for c in span)
    return True


def _spans(text: str) -> list[tuple[int, int, str, float]]:
    """(start, end, kind, priority) of every candidate; convohub's own rules first (priority 2)."""
    found: list[tuple[int, int, str, float]] = []
    for rule in _OWN_RULES:
        for match in rule.pattern.finditer(text):
            if not rule.valid(match):
                continue
            group = "value" if "value" in rule.pattern.groupindex else 0
            found.append((match.start(group), match.end(group), rule.kind, 2.0))
    if not any(c.isdigit() or c == "@" for c in text):
        return found
    for recognizer in _recognizers():
        entities = recognizer.supported_entities
        if entities == ["PHONE_NUMBER"] and not _PHONE_CANDIDATE.search(text):
            continue  # phonenumbers scans the text once per region: skip texts without a digit run
        for result in recognizer.analyze(text, entities, None):
            kind = _ENTITY_KIND[result.entity_type]
            if result.score >= _MIN_SCORE and _plausible(kind, text, result.start, result.end):
                found.append((result.start, result.end, kind, float(result.score)))
    return found


def pii_spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, kind)`` of every PII span the scrubber replaces, in text order.

    Overlapping candidates are resolved by priority (convohub's rules, then presidio's score), then by
    length, so ``4111 1111 1111 1111`` is one card and not a phone inside a card."""
    chosen: list[tuple[int, int, str]] = []
    for start, end, kind, _ in sorted(_spans(text), key=lambda s: (-s[3], -(s[1] - s[0]), s[0])):
        if all(end <= s or start >= e for s, e, _ in chosen):
            chosen.append((start, end, kind))
    return sorted(chosen)


def scrub_pii_with_counts(text: str) -> tuple[str, dict[str, int]]:
    """Scrubbed text and the number of replacements per type (only types that occurred)."""
    counts: Counter[str] = Counter()
    out = text
    for start, end, kind in reversed(pii_spans(text)):
        out = out[:start] + PLACEHOLDERS[kind] + out[end:]
        counts[kind] += 1
    return out, dict(counts)


def scrub_pii(text: str) -> str:
    """Replace e-mails, phone numbers, IP addresses, cards, IBANs, SSNs and secrets with placeholders."""
    return scrub_pii_with_counts(text)[0]


def scrub_pii_counts(text: str) -> dict[str, int]:
    """Replacements :func:`scrub_pii` would make, per type, e.g. ``{"EMAIL": 1, "PHONE": 2}``."""
    return scrub_pii_with_counts(text)[1]


def scrub_conversation_with_counts(conv: Conversation) -> tuple[Conversation, dict[str, int]]:
    """Scrub every turn; a turn (and the conversation) whose text changed is marked ``redacted``, which is
    what WildChat's own flag means. Also returns the replacements per type, for the dataset card."""
    turns = []
    counts: Counter[str] = Counter()
    for turn in conv.turns:
        clean, found = scrub_pii_with_counts(turn.content)
        counts.update(found)
        turns.append(replace(turn, content=clean, redacted=True) if clean != turn.content else turn)
    if not counts:
        return conv, {}
    return replace(conv, turns=tuple(turns), redacted=True), dict(counts)


def scrub_conversation(conv: Conversation) -> Conversation:
    """:func:`scrub_conversation_with_counts` without the counts."""
    return scrub_conversation_with_counts(conv)[0]
