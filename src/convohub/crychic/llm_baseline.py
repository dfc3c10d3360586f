"""The paper's LLM baseline (Table 1's GPT-4.1, DeepSeek-V3, ... rows) through convohub's LLM backend.

Per new prompt, as in the paper: the first turn is a root; otherwise the LLM labels the *whole* prompt
polite / information / instruction; information -> child of the most recent turn, polite -> root;
an instruction is scored 0-5 against each of the 10 most recent turns, one request per candidate turn, and a
score of at least 4 makes that turn the parent (the highest score wins, the more recent turn on a tie),
else the prompt starts a new tree. The prompts are convohub's own wording with the paper's structure and
labels: short, the closed answer list spelled out, worked examples, one answer per request, so a small
model can follow them. The fixed instructions come first and what varies last, so the requests of a batch
share a long prefix (a local model computes it once). Labels depend on the prompt alone, so a logged
conversation's prompts are labelled in one batch before its turns are replayed (:meth:`LLMBaseline.prepare`).

Two ways of reading the answers (``scoring``):

* ``generate``: the model writes its answer, the first allowed label or digit in it counts; any backend;
* ``likelihood``: a local model's probability of each allowed answer is read instead
  (:class:`convohub.llm.choices.ChoiceBackend`), so every answer is one of the allowed ones; among
  candidates answered 4 or 5, the expected score breaks ties before recency. The probabilities are
  calibrated by default (contextual calibration: each answer's log-likelihood minus the one the model gives
  the same request with "N/A" in place of every text), because SmolLM2-135M-Instruct otherwise favours one
  label whatever the prompt (measured: "polite" for all 43 later turns of 6 test conversations, so every
  turn a root).

An answer that names no allowed label counts as ``instruction`` and one with no digit 0-5 as score 0 (the
prompt then goes to the judge step, or the candidate is not a parent); both are counted in
:attr:`LLMBaseline.unparsed`, so a report can say how often it happened.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from convohub.crychic.reconstruct import Decision, TreeBuilder
from convohub.llm import ChatBackend, ChatRequest
from convohub.llm.choices import CONTENT_FREE, calibrated

LABELS = ("polite", "information", "instruction")
DIGITS = tuple(str(i) for i in range(6))
#: the paper's window and threshold for the LLM baselines
LLM_WINDOW = 10
LLM_THRESHOLD = 4
SCORINGS = ("generate", "likelihood")
#: characters kept of each text in a prompt (backend-agnostic: an endpoint has no tokenizer here)
MAX_CHARS = 400

LABEL_SYSTEM = "You sort chat messages into kinds. Answer with one word."
#: The fourth example (an instruction asked as a lowercase question without a question mark, as chat users
#: write) was chosen on the test conversations the release does not report (33-100: 68 conversations, 295 turns;
#: SmolLM2, likelihood, calibrated): micro accuracy / precision / recall / F1 over all turns 0.512 / 0.286 /
#: 0.014 / 0.027 with three examples, 0.556 / 0.486 / 0.119 / 0.191 with four (with three, 221 of the 233
#: later turns of the first 32 conversations were labelled polite, so nearly every turn became a root).
LABEL_PROMPT = """Which kind of message is this? Answer polite, information or instruction.
polite: only thanks, greetings or small talk; asks for nothing
information: only gives facts, context or content; asks for nothing
instruction: asks a question or asks for something to be done

Message: Thank you so much, that was helpful!
Kind: polite
Message: I am 35 and I live in Berlin.
Kind: information
Message: Write a haiku about rain.
Kind: instruction
Message: how do I sort a list in python
Kind: instruction

Message: {prompt}
Kind:"""

SCORE_SYSTEM = "You judge whether a chat message builds on an earlier turn. Answer with one digit."
SCORE_PROMPT = """Does the new message build on the earlier turn (continue it, change it, or need it to be
understood)? Answer with one digit from 0 (unrelated) to 5 (clearly builds on it).
Example: earlier "Write a poem about cats.", new "Make it shorter." -> 5
Example: earlier "Write a poem about cats.", new "What is the capital of Peru?" -> 0

New message: {prompt}

Earlier turn:
User: {earlier_prompt}
Assistant: {earlier_response}

Score:"""

_DIGIT = re.compile(r"(?<![\d.])([0-5])(?![\d.])")


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"


def label_request(prompt: str) -> ChatRequest:
    return ChatRequest(messages=[{"role": "system", "content": LABEL_SYSTEM},
                                 {"role": "user", "content": LABEL_PROMPT.format(prompt=_clip(prompt))}],
                       max_new_tokens=4, temperature=0.0)


def score_request(prompt: str, earlier_prompt: str, earlier_response: str) -> ChatRequest:
    text = SCORE_PROMPT.format(earlier_prompt=_clip(earlier_prompt), earlier_response=_clip(earlier_response),
                               prompt=_clip(prompt))
    return ChatRequest(messages=[{"role": "system", "content": SCORE_SYSTEM}, {"role": "user", "content": text}],
                       max_new_tokens=3, temperature=0.0)


def parse_label(text: str) -> str | None:
    """The first of :data:`LABELS` the answer names (None when it names none)."""
    found = [(m.start(), label) for label in LABELS for m in [re.search(rf"\b{label}\b", text or "", re.I)] if m]
    return min(found)[1] if found else None


def parse_score(text: str) -> int | None:
    """The first stand-alone digit 0-5 of the answer (None when there is none)."""
    match = _DIGIT.search(text or "")
    return int(match.group(1)) if match else None


def distribution(text: str, options: Sequence[str], calibration: dict[str, float] | None = None
                 ) -> dict[str, float] | None:
    """The probability of each option a likelihood answer carries, after subtracting the calibration
    log-likelihoods when given (None for a generated answer)."""
    import math

    from convohub.llm.choices import choice_logprobs

    logp = choice_logprobs(text)
    if set(logp) != set(options):
        return None
    logp = calibrated(logp, calibration)
    top = max(logp.values())
    weights = {o: math.exp(v - top) for o, v in logp.items()}
    total = sum(weights.values())
    return {o: w / total for o, w in weights.items()}


def expected_score(probabilities: dict[str, float]) -> float:
    """The mean digit under a distribution over 0-5."""
    return sum(int(d) * p for d, p in probabilities.items())


class LLMBaseline(TreeBuilder):
    """The paper's LLM baseline over any chat backend (module docstring). ``label_llm`` and ``score_llm``
    answer the two questions (the same backend for generation; two closed-choice backends for likelihood,
    see :func:`llm_baseline_factory`)."""

    name = "llm-baseline"

    def __init__(self, label_llm: ChatBackend, score_llm: ChatBackend | None = None, *, window: int = LLM_WINDOW,
                 threshold: int = LLM_THRESHOLD, unparsed: Counter[str] | None = None,
                 calibration: dict[str, dict[str, float]] | None = None) -> None:
        super().__init__()
        self.label_llm, self.score_llm = label_llm, score_llm or label_llm
        self.window, self.threshold = window, threshold
        #: content-free log-likelihoods per question (filled on first use) when calibrating, else None
        self.calibration = calibration
        #: answers that named no allowed label / digit (shared across conversations when the caller passes one)
        self.unparsed: Counter[str] = unparsed if unparsed is not None else Counter()
        self._labels: dict[str, str] = {}  # prompt -> the label answer (filled by prepare)

    def _answer(self, llm: ChatBackend, requests: Sequence[ChatRequest]) -> list[str]:
        responses = llm.chat(list(requests))
        failed = [r.error for r in responses if not r.ok]
        if failed:
            raise RuntimeError(f"the LLM baseline's backend {llm.name} failed: {failed[0]}")
        return [r.text for r in responses]

    def prepare(self, prompts: list[str], responses: list[str] | None = None) -> None:
        """Label every prompt but the first in one batch (a label depends on the prompt alone)."""
        todo = [p for p in dict.fromkeys(prompts[1:]) if p not in self._labels]
        if todo:
            self._labels.update(zip(todo, self._answer(self.label_llm, [label_request(p) for p in todo]),
                                    strict=True))

    def _calibration(self, which: str) -> dict[str, float] | None:
        """The content-free answer's log-likelihoods ("N/A" in place of every text) for ``label`` or
        ``score``, asked once per factory; None unless calibrating."""
        if self.calibration is None:
            return None
        if which not in self.calibration:
            from convohub.llm.choices import choice_logprobs

            llm, request = ((self.label_llm, label_request(CONTENT_FREE)) if which == "label"
                            else (self.score_llm, score_request(CONTENT_FREE, CONTENT_FREE, CONTENT_FREE)))
            self.calibration[which] = choice_logprobs(self._answer(llm, [request])[0])
        return self.calibration[which] or None

    def decide(self, prompt: str) -> Decision:
        t = len(self.turns)
        if t == 0:
            return Decision(t, -1, "first-turn")
        if prompt not in self._labels:
            self.prepare(["", prompt])
        text = self._labels[prompt]
        probabilities = distribution(text, LABELS, self._calibration("label"))
        label = max(probabilities, key=probabilities.__getitem__) if probabilities else parse_label(text)
        if label is None:
            self.unparsed["label"] += 1
            label = "instruction"
        confidence = probabilities[label] if probabilities else None
        if label == "information":
            return Decision(t, t - 1, "llm-information", score=confidence, label=label)
        if label == "polite":
            return Decision(t, -1, "llm-polite", score=confidence, label=label)
        candidates = self.turns[-self.window:]
        answers = self._answer(self.score_llm, [score_request(prompt, c.prompt, c.response) for c in candidates])
        best: tuple[int, float, int] | None = None  # (score, expected score, recency) of the best candidate
        best_index = -1
        for recency, (turn, answer) in enumerate(zip(candidates, answers, strict=True)):
            probabilities = distribution(answer, DIGITS, self._calibration("score"))
            if probabilities:
                score = int(max(probabilities, key=probabilities.__getitem__))
                expected = expected_score(probabilities)
            else:
                parsed = parse_score(answer)
                if parsed is None:
                    self.unparsed["score"] += 1
                score = parsed or 0
                expected = float(score)
            key = (score, expected, recency)
            if best is None or key > best:
                best, best_index = key, turn.index
        assert best is not None
        rule = "llm-parent" if best[0] >= self.threshold else "llm-root"
        return Decision(t, best_index if rule == "llm-parent" else -1, rule, score=float(best[0]), label=label)


def llm_baseline_factory(llm: ChatBackend, scoring: str, unparsed: Counter[str] | None = None, *,
                         calibrate: bool = True) -> Any:
    """``make_builder`` for :func:`convohub.crychic.reconstruct.reconstruct`: fresh baselines sharing ``llm``
    (and, for ``likelihood``, the two closed-choice backends over its weights, calibrated against the
    content-free answer unless ``calibrate`` is False), one unparsed counter and one calibration."""
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {SCORINGS}, got {scoring!r}")
    label_llm = score_llm = llm
    if scoring == "likelihood":
        from convohub.llm.choices import as_choice_backend

        label_llm, score_llm = as_choice_backend(llm, LABELS), as_choice_backend(llm, DIGITS)
        if label_llm is None or score_llm is None:
            raise ValueError(f"likelihood scoring reads a local model's probabilities; {llm.name} is not a local "
                             "transformers model: use scoring='generate'")
    counter = unparsed if unparsed is not None else Counter()
    calibration: dict[str, dict[str, float]] | None = {} if scoring == "likelihood" and calibrate else None

    def make() -> LLMBaseline:
        return LLMBaseline(label_llm, score_llm, unparsed=counter, calibration=calibration)

    make.unparsed = counter  # type: ignore[attr-defined]
    make.calibrated = calibration is not None  # type: ignore[attr-defined]
    return make


def default_scoring(llm: ChatBackend) -> str:
    """``likelihood`` for a local transformers model (every answer is then one of the allowed labels or
    digits, so none goes unparsed), ``generate`` for any other backend (an endpoint returns text only)."""
    from convohub.llm.choices import local_model

    return "likelihood" if local_model(llm) is not None else "generate"
