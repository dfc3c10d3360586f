"""CRyCHIc's per-prompt reconstruction: which earlier turn does a new prompt build on?

For every new prompt the rules of the paper (seed 002, spec ``crychic.md``) run in order, and the first that
applies decides:

0. empty history -> root (``first-turn``);
1. the IFQC says implicit follow-up ("Continue", "Translate this") -> child of the most recent turn
   (``ifqc-implicit``); implicit means a probability above 0.5 (the classifier's argmax) unless the judge
   carries an ``implicit_threshold`` tuned for the whole pipeline (:func:`resolve_implicit_threshold`);
2. the prompt simplifier labels every sentence; the prompt takes its highest-priority label (instruction >
   information > polite): information -> child of the most recent turn (``simplifier-information``),
   polite -> root (``simplifier-polite``), instruction -> the simplified prompt (every instruction sentence
   plus the first information sentence, in prompt order) goes to the judge;
3. the follow-up judge scores the (simplified) prompt against the 20 most recent turns; the best one becomes
   the parent when its probability is above the threshold, the more recent turn winning a tie
   (``judge-parent``), else the prompt starts a new tree (``judge-root``). The threshold is the paper's 0.4
   unless the judge carries one tuned for it (``root_threshold``, :mod:`convohub.crychic.threshold`) or the
   caller names one.

When the turn is finished (its response known) it is stored with its parent and the judge's embedding of its
prompt and response (each truncated to 512 tokens by the judge); :meth:`TreeBuilder.filtered_history` gives
the ancestors of a turn, which is what an LLM would receive with the prompt.

Every decision records the rule that made it and the deciding score, for error analysis. The baselines
(``non-reconstructing``: every turn a child of the previous one; ``all-roots``) share the same interface, so
an evaluation runs any of them the same way.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass

from convohub.crychic.components import FollowUpClassifier, ParentJudge, SentenceLabeller, StoredTurn

#: the paper's defaults
WINDOW = 20
THRESHOLD = 0.4
#: the IFQC is a two-class softmax: implicit when that class wins
IMPLICIT_THRESHOLD = 0.5
#: the simplifier's labels, highest priority first
LABEL_PRIORITY = ("instruction", "information", "polite")

#: rule name -> the module that applies it
RULES: dict[str, str] = {
    "first-turn": "history",
    "ifqc-implicit": "ifqc",
    "simplifier-information": "simplifier",
    "simplifier-polite": "simplifier",
    "judge-parent": "judge",
    "judge-root": "judge",
    "previous-turn": "baseline",
    "all-roots": "baseline",
    # the paper's LLM baseline (convohub.crychic.llm_baseline)
    "llm-information": "llm",
    "llm-polite": "llm",
    "llm-parent": "llm",
    "llm-root": "llm",
}


@dataclass(frozen=True)
class Decision:
    """The parent given to one turn (-1: a root) and why.

    ``score``: the deciding module's number (IFQC: probability of implicit; simplifier: the highest
    probability of the deciding label among the prompt's sentences, when the labeller scores; judge: the best
    candidate's probability, also when it stayed below the threshold); ``label``: the prompt's simplifier
    label; ``simplified_prompt``: what the judge scored.
    """

    turn_index: int
    parent: int
    rule: str
    score: float | None = None
    label: str | None = None
    simplified_prompt: str | None = None

    @property
    def module(self) -> str:
        return RULES[self.rule]

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "module": self.module}

    def summary(self) -> dict[str, object]:
        """What ``convohub tree reconstruct --json`` prints per turn (parent -1: a root)."""
        return {"turn_index": self.turn_index, "parent": self.parent, "module": self.module, "score": self.score}


class TreeBuilder(ABC):
    """Turns in arrival order with their parents: decide a new prompt's parent, then store the finished turn."""

    #: how the builder is named in reports
    name: str = ""

    def __init__(self) -> None:
        self.turns: list[StoredTurn] = []

    @abstractmethod
    def decide(self, prompt: str) -> Decision:
        """The parent of ``prompt`` as the next turn (nothing is stored yet)."""

    def embed(self, prompt: str, response: str) -> object:
        """What to store with a finished turn; only the judge needs anything."""
        return None

    def prepare(self, prompts: list[str], responses: list[str] | None = None) -> None:
        """Offline reconstruction knows every turn in advance: a builder whose per-prompt work does not
        depend on the history (the LLM baseline's whole-prompt labels, CRyCHIc's classifiers and embeddings)
        may do it here, in batches; ``responses``, when given, are the turns' responses in the same order."""
        return None

    def commit(self, prompt: str, response: str, decision: Decision) -> StoredTurn:
        """Store the finished turn (post-processing): texts, parent, embedding, decision."""
        if decision.turn_index != len(self.turns):
            raise ValueError(f"decision is for turn {decision.turn_index} but the next turn is {len(self.turns)}")
        turn = StoredTurn(len(self.turns), prompt, response, decision.parent, self.embed(prompt, response),
                          decision)
        self.turns.append(turn)
        return turn

    def add_turn(self, prompt: str, response: str) -> Decision:
        """Decide and store in one step (offline reconstruction of a logged conversation)."""
        decision = self.decide(prompt)
        self.commit(prompt, response, decision)
        return decision

    def ancestors(self, parent: int) -> list[StoredTurn]:
        """``parent`` and its ancestors, oldest first: the context a child of ``parent`` gets."""
        chain: list[StoredTurn] = []
        while parent != -1:
            turn = self.turns[parent]
            chain.append(turn)
            parent = turn.parent
        return chain[::-1]

    def filtered_history(self, turn_index: int) -> list[StoredTurn]:
        """The ancestors of a stored turn, oldest first (its own prompt excluded): what an LLM would receive."""
        if not 0 <= turn_index < len(self.turns):
            raise IndexError(f"turn {turn_index} is not stored (turns 0..{len(self.turns) - 1})")
        return self.ancestors(self.turns[turn_index].parent)

    @property
    def parents(self) -> list[int]:
        return [turn.parent for turn in self.turns]

    @property
    def decisions(self) -> list[Decision]:
        return [turn.decision for turn in self.turns if turn.decision is not None]


class NonReconstructing(TreeBuilder):
    """Baseline: the flat log, every turn a child of the one before (what a chat UI sends an LLM)."""

    name = "non-reconstructing"

    def decide(self, prompt: str) -> Decision:
        t = len(self.turns)
        return Decision(t, -1, "first-turn") if t == 0 else Decision(t, t - 1, "previous-turn")


class AllRoots(TreeBuilder):
    """Baseline: no turn builds on another (every prompt sent alone)."""

    name = "all-roots"

    def decide(self, prompt: str) -> Decision:
        t = len(self.turns)
        return Decision(t, -1, "first-turn" if t == 0 else "all-roots")


BASELINES: dict[str, type[TreeBuilder]] = {cls.name: cls for cls in (NonReconstructing, AllRoots)}


def prompt_label(labelled: list[tuple[str, str]]) -> str | None:
    """The highest-priority label among the sentences' (None for a prompt without sentences)."""
    present = {label for _, label in labelled}
    unknown = present - set(LABEL_PRIORITY)
    if unknown:
        raise ValueError(f"unknown simplifier labels {sorted(unknown)}; expected {LABEL_PRIORITY}")
    return next((label for label in LABEL_PRIORITY if label in present), None)


def simplify(labelled: list[tuple[str, str]]) -> str:
    """Every instruction sentence plus the first information sentence, in the prompt's order."""
    first_information = next((i for i, (_, label) in enumerate(labelled) if label == "information"), None)
    return " ".join(sentence for i, (sentence, label) in enumerate(labelled)
                    if label == "instruction" or i == first_information)


def judge_query(prompt: str, labelled: list[tuple[str, str]]) -> tuple[str | None, str | None]:
    """The prompt's label (rule 2) and what the judge reads for it: None when the label decides alone
    (information, polite), the simplified prompt for an instruction, else the whole prompt."""
    label = prompt_label(labelled)
    if label in ("information", "polite"):
        return label, None
    return label, simplify(labelled) if label == "instruction" else prompt


def resolve_implicit_threshold(judge: ParentJudge, given: float | None = None) -> tuple[float, str]:
    """The IFQC probability above which a pipeline over ``judge`` calls a prompt implicit, and where it came
    from: ``given``, else the ``implicit_threshold`` tuned for the pipeline and stored with its judge
    (:func:`convohub.crychic.threshold.tune_implicit_threshold`), else the classifier's argmax (0.5)."""
    if given is not None:
        if not 0 <= float(given) < 1:
            raise ValueError(f"the implicit threshold must be in [0, 1), got {given}")
        return float(given), "given"
    tuned = getattr(judge, "implicit_threshold", None)
    return (IMPLICIT_THRESHOLD, "the IFQC's argmax") if tuned is None else (float(tuned), "tuned for this pipeline")


def resolve_threshold(judge: ParentJudge, given: float | None = None) -> tuple[float, str]:
    """The root threshold a pipeline over ``judge`` uses and where it came from (for headers and cards):
    ``given`` when the caller names one, else the judge's tuned ``root_threshold``, else the paper's
    :data:`THRESHOLD`."""
    if given is not None:
        return float(given), "given"
    tuned = getattr(judge, "root_threshold", None)
    return (THRESHOLD, "the paper's") if tuned is None else (float(tuned), "tuned for this judge")


class Crychic(TreeBuilder):
    """The CRyCHIc pipeline over its three components.

    ``ifqc`` or ``simplifier`` may be None, which skips that rule (the paper's ablations "w/o IFQC" and
    "w/o PS"; without the simplifier the whole prompt goes to the judge); there are no defaults, so leaving
    one out is always the caller's stated choice. ``threshold`` None: :func:`resolve_threshold`;
    ``implicit_threshold`` None: :func:`resolve_implicit_threshold`.
    """

    name = "crychic"

    def __init__(self, *, ifqc: FollowUpClassifier | None, simplifier: SentenceLabeller | None,
                 judge: ParentJudge, window: int = WINDOW, threshold: float | None = None,
                 implicit_threshold: float | None = None) -> None:
        super().__init__()
        if window < 1:
            raise ValueError(f"window must be at least 1 turn, got {window}")
        self.ifqc, self.simplifier, self.judge = ifqc, simplifier, judge
        self.window = window
        self.threshold, self.threshold_origin = resolve_threshold(judge, threshold)
        self.implicit_threshold, self.implicit_threshold_origin = resolve_implicit_threshold(judge, implicit_threshold)
        # what :meth:`prepare` computed ahead, by prompt (and by turn for the embeddings)
        self._implicit: dict[str, float] = {}
        self._labelled: dict[str, list[tuple[str, str, float]]] = {}
        self._query_embedding: dict[str, object] = {}
        self._turn_embedding: dict[tuple[str, str], object] = {}

    def prepare(self, prompts: list[str], responses: list[str] | None = None) -> None:
        """Every step that depends on a prompt alone, batched over the conversation: the IFQC's probabilities,
        the simplifier's labels, the judge's embeddings of the (simplified) prompts and, with ``responses``,
        of the finished turns. Components without batched methods are asked turn by turn in :meth:`decide`."""
        later = list(dict.fromkeys(prompts[1:]))
        if self.ifqc is not None and hasattr(self.ifqc, "implicit_probabilities"):
            todo = [p for p in later if p not in self._implicit]
            self._implicit.update(zip(todo, self.ifqc.implicit_probabilities(todo), strict=True))
        if self.ifqc is not None:
            later = [p for p in later if self._implicit.get(p, 0.0) <= self.implicit_threshold]
        if self.simplifier is not None and hasattr(self.simplifier, "label_scored_many"):
            todo = [p for p in later if p not in self._labelled]
            self._labelled.update(zip(todo, self.simplifier.label_scored_many(todo), strict=True))
        if getattr(self.judge, "architecture", None) == "bi" and hasattr(self.judge, "embed_prompts"):
            queries = [q for q in dict.fromkeys(self._query(p) for p in later) if q is not None
                       and q not in self._query_embedding]
            self._query_embedding.update(zip(queries, self.judge.embed_prompts(queries), strict=True))
        if responses is not None and hasattr(self.judge, "embed_turns"):
            if len(responses) != len(prompts):
                raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
            todo_turns = [t for t in dict.fromkeys(zip(prompts, responses, strict=True))
                          if t not in self._turn_embedding]
            self._turn_embedding.update(zip(todo_turns, self.judge.embed_turns(todo_turns), strict=True))

    def _query(self, prompt: str) -> str | None:
        """What the judge will read for ``prompt`` when the labels are known ahead (None when a simplifier
        rule decides it, or its labels are not known yet)."""
        if self.simplifier is None:
            return prompt
        if prompt not in self._labelled:
            return None
        labelled = [(sentence, label) for sentence, label, _ in self._labelled[prompt]]
        return judge_query(prompt, labelled)[1]

    def decide(self, prompt: str) -> Decision:
        t = len(self.turns)
        if t == 0:
            return Decision(t, -1, "first-turn")
        if self.ifqc is not None:
            implicit = self._implicit.get(prompt)
            if implicit is None:
                implicit = float(self.ifqc.implicit_probability(prompt))
            if implicit > self.implicit_threshold:
                return Decision(t, t - 1, "ifqc-implicit", score=implicit)
        label, query = None, prompt
        if self.simplifier is not None:
            labelled, confidence = self._label(prompt)
            label, judged = judge_query(prompt, labelled)
            if judged is None:
                parent = t - 1 if label == "information" else -1
                return Decision(t, parent, f"simplifier-{label}", score=confidence.get(label), label=label)
            query = judged
        return self._judge(t, query, label)

    def _label(self, prompt: str) -> tuple[list[tuple[str, str]], dict[str, float]]:
        """The simplifier's (sentence, label) pairs and, when it scores them, each label's highest sentence
        probability (the score behind a simplifier decision)."""
        scored = getattr(self.simplifier, "label_scored", None)
        if scored is None:
            return self.simplifier.label(prompt), {}
        triples = self._labelled[prompt] if prompt in self._labelled else scored(prompt)
        confidence: dict[str, float] = {}
        for _, label, probability in triples:
            confidence[label] = max(confidence.get(label, 0.0), float(probability))
        return [(sentence, label) for sentence, label, _ in triples], confidence

    def _judge(self, t: int, query: str, label: str | None) -> Decision:
        candidates = self.turns[-self.window:]
        embedding = self._query_embedding.get(query)
        scores = (self.judge.scores(query, candidates) if embedding is None or not candidates
                  else self.judge.scores(query, candidates, prompt_embedding=embedding))
        if len(scores) != len(candidates):
            raise ValueError(f"the judge returned {len(scores)} scores for {len(candidates)} candidate turns")
        best, best_score = -1, float("-inf")
        for turn, score in zip(reversed(candidates), reversed(scores), strict=True):  # most recent first
            if score > best_score:  # strictly: an equal score never displaces the more recent turn
                best, best_score = turn.index, float(score)
        if best_score > self.threshold:
            return Decision(t, best, "judge-parent", score=best_score, label=label, simplified_prompt=query)
        return Decision(t, -1, "judge-root", score=best_score, label=label, simplified_prompt=query)

    def embed(self, prompt: str, response: str) -> object:
        stored = self._turn_embedding.get((prompt, response))
        return stored if stored is not None else self.judge.embed_turn(prompt, response)


def reconstruct(exchanges: list[tuple[str, str]], make_builder: Callable[[], TreeBuilder]) -> TreeBuilder:
    """A fresh builder fed one logged conversation's (prompt, response) pairs in order."""
    builder = make_builder()
    builder.prepare([prompt for prompt, _ in exchanges], [response for _, response in exchanges])
    for prompt, response in exchanges:
        builder.add_turn(prompt, response)
    return builder
