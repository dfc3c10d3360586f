"""The user who acts at every turn of a generated dialogue (Algorithm 1, line 7), and how it is chosen.

The paper's users were MTurk annotators (majority of three), plus an LLM user for 1,200 more dialogues. The
user knows the intent; the agent never sees it. Two users act here, each named in every dialogue it acts in:

* :class:`LLMUser` (``llm:<model id>``): the paper's LLM user without the explanation: the action prompt of
  :mod:`convohub.promise.prompts` through any chat backend, parsed, re-asked a bounded number of times;
* :class:`CoverageUser` (``rules:intent-coverage-v2``): a named rule stand-in. When the questions asked so far
  (the first one included) cover at least :data:`DONE_COVERAGE` of the intent's content words and it has
  picked at least one suggestion, it says ``done``. Otherwise it picks the suggestion with the most intent
  words that no picked suggestion has brought yet, or ``none`` when no suggestion has any. The first
  question counts toward ``done`` but not toward what a suggestion adds: ProMISe never answers the first
  question (only picked suggestions come with answers), so an intent word the user typed is still wanted.
  Measured against every question asked instead, no suggestion could add anything once the first question
  holds many of the intent's words, and the user would say ``none`` to nearly every turn.

Which one acts is a named choice (``auto`` measures both on ``src/convohub/data/promise_user_gold.jsonl``,
24 user decisions labelled by hand for convohub, and takes the one that agrees better; ties go to the LLM).
SmolLM2-135M as the user answers "1" to nearly everything (never "done"), which would make every dialogue
run eight turns with the first suggestion picked: the measured agreement goes into the dataset card.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from convohub.llm.runner import Parsed
from convohub.promise.prompts import content_words, parse_action, user_request

GOLD_FILE = Path(__file__).resolve().parents[1] / "data" / "promise_user_gold.jsonl"
#: share of the intent's content words the asked questions must cover before the rule user says "done"
DONE_COVERAGE = 0.5
RULES_NAME = "rules:intent-coverage-v2"
AUTO = "auto"


@dataclass(frozen=True)
class UserView:
    """What the user sees at one turn: the intent, the questions asked so far, the suggestions."""

    intent: str
    asked: tuple[str, ...]
    candidates: tuple[str, ...]
    seed: int = 0


class DialogueUser(Protocol):
    name: str

    def act(self, views: Sequence[UserView]) -> list[Parsed[str]]:
        """One action (``sq1``..``sq4``, ``none``, ``done``) per view (value None when no usable answer came),
        with the LLM calls it took (0 for a rule user) and their errors, as the loop's report counts them."""
        ...


class CoverageUser:
    """The rule user (module docstring)."""

    name = RULES_NAME

    def __init__(self, done_coverage: float = DONE_COVERAGE) -> None:
        if not 0 < done_coverage <= 1:
            raise ValueError(f"done_coverage must be in (0, 1], got {done_coverage}")
        self.done_coverage = done_coverage

    def decide(self, view: UserView) -> str:
        wanted = content_words(view.intent)
        covered = set().union(*(content_words(q) for q in view.asked)) & wanted
        if len(view.asked) > 1 and wanted and len(covered) / len(wanted) >= self.done_coverage:
            return "done"
        answered = set().union(*(content_words(q) for q in view.asked[1:])) & wanted
        gains = [len((content_words(c) & wanted) - answered) for c in view.candidates]
        best = max(gains)
        return "none" if best == 0 else f"sq{gains.index(best) + 1}"

    def act(self, views: Sequence[UserView]) -> list[Parsed[str]]:
        return [Parsed(value=self.decide(v)) for v in views]  # no LLM call


class LLMUser:
    """The LLM user: one closed-choice request per view, re-asked (sampled) up to ``max_attempts`` times."""

    def __init__(self, backend: Any, max_attempts: int = 2, temperature: float = 0.0, progress: bool = False,
                 seed: int = 0) -> None:
        self.backend, self.max_attempts, self.temperature, self.progress = backend, max_attempts, temperature, progress
        self.seed = seed
        self.name = f"llm:{backend.model_id}"

    def act(self, views: Sequence[UserView]) -> list[Parsed[str]]:
        from convohub.llm import ask_until_parsed

        def request(i: int, attempt: int) -> Any:
            view = views[i]
            # one seed per try, shared by the batch: a local model batches only requests with equal settings
            sampled = attempt > 0 or self.temperature > 0
            return user_request(view.intent, view.asked, view.candidates, seed=self.seed + attempt if sampled else None,
                                temperature=(self.temperature if attempt == 0 else 0.7) if sampled else 0.0)

        return ask_until_parsed(self.backend, len(views), request, lambda _i, text: parse_action(text),
                                max_attempts=self.max_attempts, desc="user actions (try {try})",
                                progress=self.progress)


def read_gold(path: Path = GOLD_FILE) -> list[dict[str, Any]]:
    """The hand-labelled user decisions (intent, asked, candidates, action)."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def agreement(user: DialogueUser, gold: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy of ``user``'s actions against the gold actions, and its action counts."""
    actions = [p.value for p in user.act([UserView(g["intent"], tuple(g["asked"]), tuple(g["candidates"]), seed=i)
                                          for i, g in enumerate(gold)])]
    hits = sum(a == g["action"] for a, g in zip(actions, gold, strict=True))
    counts: dict[str, int] = {}
    for a in actions:
        counts[str(a)] = counts.get(str(a), 0) + 1
    return {"user": user.name, "items": len(gold), "accuracy": round(hits / len(gold), 4),
            "actions": dict(sorted(counts.items()))}


def choose_user(choice: str, backend: Any) -> tuple[DialogueUser, dict[str, Any]]:
    """The user named by ``choice`` (``auto``, ``rules`` or ``llm``) and how it was chosen (agreements)."""
    if choice in ("rules", RULES_NAME):
        return CoverageUser(), {"chosen": RULES_NAME, "rule": "named"}
    if backend is None:
        raise ValueError(f"user {choice!r} needs an LLM backend")
    llm = LLMUser(backend)
    if choice == "llm":
        return llm, {"chosen": llm.name, "rule": "named"}
    if choice != AUTO:
        raise ValueError(f"unknown user {choice!r}; use auto, llm or rules")
    gold = read_gold()
    rules = CoverageUser()
    scores = [agreement(llm, gold), agreement(rules, gold)]
    chosen = llm if scores[0]["accuracy"] >= scores[1]["accuracy"] else rules
    return chosen, {"chosen": chosen.name, "rule": "auto: higher accuracy on the hand-labelled user decisions",
                    "agreement": scores}
