"""WildFeedback's label vocabulary (SPUR rubrics, Tables 3-4 of the paper) and the per-turn record.

One :class:`TurnLabel` describes one *user* turn ``T-k`` (the k-th user utterance, judged with respect to
the AI response just before it). The enums use the underscore spellings as canonical values; LLM output is
mapped onto them by :func:`normalise_label` (case, spaces/hyphens vs underscores) and
:func:`normalise_intent` (a doubled ``INTENT:INTENT:`` prefix, a missing prefix, a bare number). Anything
that still is not in an enum makes the output invalid -- it is never mapped to a nearest guess.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

RELATION_LABELS = ("YES", "NO")
DOMAIN_LABELS = (
    "AI MACHINE LEARNING AND DATA SCIENCE", "ASTROLOGY", "BIOLOGY AND LIFE SCIENCE", "BUSINESS AND MARKETING",
    "CAREER AND JOB APPLICATION", "CLOTHING AND FASHION", "COOKING FOOD AND DRINKS", "CRAFTS",
    "CULTURE AND HISTORY", "CYBERSECURITY", "DATING FRIENDSHIPS AND RELATIONSHIPS", "DESIGN", "EDUCATION",
    "ENTERTAINMENT", "ENVIRONMENT AGRICULTURE AND ENERGY", "FAMILY PARENTING AND WEDDINGS",
    "FINANCE AND ECONOMICS", "GAMES", "GEOGRAPHY AND GEOLOGY", "HEALTH AND MEDICINE", "HOUSING AND HOMES",
    "HUMOR AND SARCASM", "LANGUAGE", "LAW AND POLITICS", "LITERATURE AND POETRY", "MANUFACTURING AND MATERIALS",
    "MATH LOGIC AND STATISTICS", "MUSIC AND AUDIO", "NEWS", "PETS AND ANIMALS", "PHILOSOPHY",
    "PHYSICS CHEMISTRY AND ASTRONOMY", "PRODUCTIVITY", "PSYCHOLOGY AND EMOTIONS", "RELIGION AND MYTHOLOGY",
    "SHIPPING AND DELIVERY", "SHOPPING AND GIFTS", "SMALL TALK", "SOCIAL MEDIA", "SOFTWARE AND WEB DEVELOPMENT",
    "SPORTS AND FITNESS", "TAXATION", "TECHNOLOGY", "TIME AND DATES", "TRANSPORTATION AUTOMOTIVE AND AEROSPACE",
    "TRAVEL", "VISUAL ARTS AND PHOTOGRAPHY", "WEATHER", "WRITING JOURNALISM AND PUBLISHING", "OTHER",
)
INTENT_LABELS = ("INTENT:1-INFORMATION_SEEKING", "INTENT:2-ANALYSIS", "INTENT:3-CREATION",
                 "INTENT:4-OPEN-ENDED_DISCOVERY")
SAT_LABELS = ("Gratitude", "Learning", "Compliance", "Praise", "Personal_Details", "Humor", "Acknowledgment",
              "Positive_Closure", "Getting_There", "N/A")
DSAT_LABELS = ("Negative_Feedback", "Revision", "Factual_Error", "Unrealistic_Expectation", "No_Engagement",
               "Ignored", "Lower_Quality", "Insufficient_Detail", "Style", "N/A")
STATE_LABELS = ("FEEDBACK", "REFINEMENT", "NEWTOPIC", "CONTINUATION")
NA = "N/A"

#: Short definitions (convohub's wording of the paper's Tables 3-4), used in the labelling prompt.
SAT_DEFINITIONS = {
    "Gratitude": "the user thanks the AI or compliments its response",
    "Learning": "the user shows they learned something new or useful and are curious or pleased about it",
    "Compliance": "the user follows the AI's suggestion or instruction (e.g. reports that it worked)",
    "Praise": "the user uses positive words (excellent, amazing) or emojis showing enthusiasm",
    "Personal_Details": "the user, pleased with the answers, shares more personal details or opinions",
    "Humor": "the user jokes with or teases the AI in a friendly way",
    "Acknowledgment": "the user confirms they understood or agree with the AI's explanation",
    "Positive_Closure": "the user ends the conversation on a positive note without asking for more",
    "Getting_There": "the user says the response improved or has merit but is not fully satisfying yet",
    "N/A": "none of the satisfaction labels applies",
}
DSAT_DEFINITIONS = {
    "Negative_Feedback": "the user openly expresses dissatisfaction, frustration, annoyance or anger at the AI",
    "Revision": "the user asks the AI to revise its previous response, or repeats a similar request",
    "Factual_Error": "the user points out a factual mistake, inaccuracy or self-contradiction in the response",
    "Unrealistic_Expectation": "the user expects what the AI cannot do and rejects its limits or alternatives",
    "No_Engagement": "the user ignores the AI's questions, suggestions or requests for feedback",
    "Ignored": "the user says their request was ignored or the response missed their goal entirely",
    "Lower_Quality": "the user finds the service worse than before or than other assistants/tools",
    "Insufficient_Detail": "the user wants more specific or more useful information than was given",
    "Style": "the user wants another style (bullets vs prose, formal vs casual, short vs long, ...)",
    "N/A": "none of the dissatisfaction labels applies",
}
STATE_DEFINITIONS = {
    "FEEDBACK": "the utterance comments on, evaluates or judges the previous AI response",
    "REFINEMENT": "the utterance repeats or refines the user's own unclear previous instruction",
    "NEWTOPIC": "the first turn, or a turn unrelated in topic or task to the previous turn",
    "CONTINUATION": "a topical or logical continuation of the previous turn",
}
INTENT_DEFINITIONS = {
    "INTENT:1-INFORMATION_SEEKING": "the user wants facts or the answer to a specific question",
    "INTENT:2-ANALYSIS": "the user asks for reasoning, interpretation, comparison or analysis of a problem",
    "INTENT:3-CREATION": "the user asks for original content, or content transformed under given constraints",
    "INTENT:4-OPEN-ENDED_DISCOVERY": "chit-chat, curiosity, play, or an intent too unclear for other classes",
}


class LabelError(ValueError):
    """A labeller output that does not fit the schema; the message names the turn and the field."""


def _key(text: str) -> str:
    return re.sub(r"[\s_\-]+", "_", text.strip()).lower()


_INTENT_BY_NUMBER = {label.split(":")[1].split("-")[0]: label for label in INTENT_LABELS}
_INTENT_BY_KEY = {_key(label.split("-", 1)[1]): label for label in INTENT_LABELS}


@lru_cache(maxsize=32)
def _lookup(allowed: tuple[str, ...]) -> dict[str, str]:
    """Normalised key -> label; the SAT and DSAT sets also take the "NA" spelling of :data:`NA`."""
    table = {_key(label): label for label in allowed}
    if allowed in (SAT_LABELS, DSAT_LABELS):
        table[_key("NA")] = NA
    return table


def normalise_label(value: Any, allowed: Sequence[str], what: str) -> str:
    """``value`` as one of ``allowed`` (case and space/underscore/hyphen insensitive) or :class:`LabelError`."""
    if not isinstance(value, str):
        raise LabelError(f"{what} must be a string, got {type(value).__name__}")
    found = _lookup(tuple(allowed)).get(_key(value))
    if found is None:
        raise LabelError(f"{what} {value!r} is not one of {list(allowed)}")
    return found


def normalise_intent(value: Any) -> str:
    """Canonical intent: strips any number of ``INTENT:`` prefixes (LLMs often double the one the template
    already shows) and accepts ``1-INFORMATION_SEEKING``, ``INFORMATION SEEKING`` or ``1``."""
    if not isinstance(value, str):
        raise LabelError(f"intent must be a string, got {type(value).__name__}")
    text = value.strip()
    while text.upper().startswith("INTENT:"):
        text = text[len("INTENT:"):].strip()
    match = re.fullmatch(r"(\d)(?:\s*[-_.:]\s*(.*))?", text)
    if match:
        label = _INTENT_BY_NUMBER.get(match.group(1))
        if label is not None and (not match.group(2) or _key(match.group(2)) == _key(label.split("-", 1)[1])):
            return label
    elif _key(text) in _INTENT_BY_KEY:
        return _INTENT_BY_KEY[_key(text)]
    raise LabelError(f"intent {value!r} is not one of {list(INTENT_LABELS)}")


def normalise_label_list(value: Any, allowed: Sequence[str], what: str) -> list[str]:
    """A label list: accepts a list or one comma-separated string; drops ``N/A`` next to real labels,
    de-duplicates in order, and returns ``["N/A"]`` for an empty list."""
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, list):
        raise LabelError(f"{what} must be a list of labels, got {type(value).__name__}")
    labels = list(dict.fromkeys(normalise_label(v, allowed, what) for v in value))
    real = [label for label in labels if label != NA]
    return real or [NA]


@dataclass
class TurnLabel:
    """SPUR fields of one user turn (see the module docstring)."""

    summary: str
    preceding_topical_relation: str
    domain: str
    intent: str
    satisfaction: list[str] = field(default_factory=lambda: [NA])
    dissatisfaction: list[str] = field(default_factory=lambda: [NA])
    state: str = "NEWTOPIC"

    @property
    def sat(self) -> bool:
        return any(label != NA for label in self.satisfaction)

    @property
    def dsat(self) -> bool:
        return any(label != NA for label in self.dissatisfaction)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any], where: str = "turn") -> TurnLabel:
        """Validate one labeller object; :class:`LabelError` names ``where`` and the field."""
        try:
            summary = raw["summary"]
            if not isinstance(summary, str):
                raise LabelError(f"summary must be a string, got {type(summary).__name__}")
            return cls(
                summary=summary.strip(),
                preceding_topical_relation=normalise_label(raw["preceding_topical_relation"], RELATION_LABELS,
                                                           "preceding_topical_relation"),
                domain=normalise_label(raw["domain"], DOMAIN_LABELS, "domain"),
                intent=normalise_intent(raw["intent"]),
                satisfaction=normalise_label_list(raw["satisfaction"], SAT_LABELS, "satisfaction"),
                dissatisfaction=normalise_label_list(raw["dissatisfaction"], DSAT_LABELS, "dissatisfaction"),
                state=normalise_label(raw["state"], STATE_LABELS, "state"),
            )
        except KeyError as exc:
            raise LabelError(f"{where}: missing field {exc.args[0]!r}") from None
        except LabelError as exc:
            raise LabelError(f"{where}: {exc}") from None


@dataclass
class FeedbackResult:
    """Labels of every user turn of one conversation plus the conversation-level verdicts.

    A conversation is SAT (DSAT) when any user turn carries a non-``N/A`` satisfaction (dissatisfaction)
    label, as in the paper. ``labeller`` says what produced the labels (``rules:lexicon-v1`` offline, the
    backend name otherwise), so every row of a dataset can say where its labels came from.
    """

    turns: list[TurnLabel]
    labeller: str

    @property
    def sat(self) -> bool:
        return any(t.sat for t in self.turns)

    @property
    def dsat(self) -> bool:
        return any(t.dsat for t in self.turns)

    def sat_labels(self) -> list[str]:
        return _union(t.satisfaction for t in self.turns)

    def dsat_labels(self) -> list[str]:
        return _union(t.dissatisfaction for t in self.turns)

    def to_dict(self) -> dict[str, Any]:
        return {"turns": [t.to_dict() for t in self.turns], "sat": self.sat, "dsat": self.dsat,
                "labeller": self.labeller}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FeedbackResult:
        return cls(turns=[TurnLabel(**t) for t in data["turns"]], labeller=str(data["labeller"]))


def _union(lists: Iterable[list[str]]) -> list[str]:
    return list(dict.fromkeys(label for labels in lists for label in labels if label != NA))


def validate_turn_list(value: Any, n_turns: int) -> list[TurnLabel]:
    """The labeller's JSON list -> one :class:`TurnLabel` per user turn, in order, or :class:`LabelError`.

    Accepted item shapes: ``{"T-3": {...fields}}`` (the paper's) or the bare field object. The list must
    have exactly ``n_turns`` items and, where keyed, the keys must be ``T-1 .. T-n`` in order.
    """
    if isinstance(value, Mapping) and all(re.fullmatch(r"T-\d+", str(k)) for k in value):
        value = [{k: v} for k, v in value.items()]  # one object keyed T-1..T-n instead of a list
    if not isinstance(value, list):
        raise LabelError(f"expected a JSON list of {n_turns} turn objects, got {type(value).__name__}")
    if len(value) != n_turns:
        raise LabelError(f"expected {n_turns} turn objects (one per user turn), got {len(value)}")
    out = []
    for i, item in enumerate(value, 1):
        if not isinstance(item, Mapping):
            raise LabelError(f"T-{i}: expected an object, got {type(item).__name__}")
        if len(item) == 1 and isinstance(next(iter(item.values())), Mapping):
            key, inner = next(iter(item.items()))
            if str(key).strip() != f"T-{i}":
                raise LabelError(f"item {i} is keyed {key!r}, expected 'T-{i}' (turn order must match the input)")
            item = inner
        out.append(TurnLabel.from_raw(item, where=f"T-{i}"))
    return out
