"""The follow-up judge's root threshold, tuned on whole conversations instead of fixed at the paper's 0.4.

Why: the pipeline makes a prompt a root only when *no* turn of its window scores above the threshold, so the
threshold is compared with the best of up to 20 candidates, a statistic that the judge's pair-level training
and calibration never see. A judge trained on a few hundred pairs (the tiny recipe) finds some earlier turn
above 0.4 for most prompts that start a new thread, and so seldom makes a root (measured on the WildChatTree
test split of the stop-27 release: 44 judge roots among 240 judge decisions).

:func:`tune_root_threshold` reconstructs conversations the judge did not train on (the held-out conversations
of its training corpus, MixMC-mixed like the test split: :func:`convohub.crychic.judge_data.read_trees`)
with the judge alone and picks, from a grid, the threshold whose decisions give the most right parents over
every turn but the first; a tie goes to the value nearest the paper's 0.4. The training script stores it as
the judge config's ``root_threshold``, which the pipeline uses unless the caller names another.

:func:`tune_implicit_threshold` does the same for the IFQC's rule (implicit -> child of the most recent turn),
with the whole pipeline on the same held-out conversations: the classifier's argmax (0.5) sends every prompt
it leans implicit on to the most recent turn, which interleaved conversations punish (measured on the
WildChatTree test split with the stop-34 release's models: 195 implicit decisions, 41% right; CRyCHIc F1 0.499
at 0.5, 0.537 at the tuned 0.65). The threshold with the most right parents is kept, a tie going to the value nearest 0.5, and
stored as the judge config's ``implicit_threshold``, since it belongs to the pipeline the judge was tuned in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from convohub.crychic.components import FollowUpClassifier, ParentJudge, SentenceLabeller
from convohub.crychic.reconstruct import IMPLICIT_THRESHOLD, THRESHOLD, WINDOW, Crychic, reconstruct

#: thresholds tried: 0.05 to 0.95 in steps of 0.01
GRID: tuple[float, ...] = tuple(round(0.05 + 0.01 * i, 2) for i in range(91))
#: IFQC thresholds tried: 0.5 (the argmax) to 0.95 in steps of 0.05
IMPLICIT_GRID: tuple[float, ...] = tuple(round(0.5 + 0.05 * i, 2) for i in range(10))


@dataclass(frozen=True)
class BestCandidate:
    """One judged turn: its gold parent (-1: a root), the window's best-scoring turn and that score."""

    gold: int
    best: int
    score: float

    def right_at(self, threshold: float) -> bool:
        """Whether the pipeline's rule (parent when the best score exceeds ``threshold``, else root) is right."""
        return self.best == self.gold if self.score > threshold else self.gold == -1


def best_candidates(trees: Iterable[Mapping[str, Any]], judge: ParentJudge,
                    window: int = WINDOW) -> list[BestCandidate]:
    """Every turn but each conversation's first, reconstructed by the judge alone (no IFQC, no simplifier) with
    no threshold, so each decision names the window's best turn and its score."""
    out: list[BestCandidate] = []
    for tree in trees:
        turns = tree["turns"]
        builder = reconstruct([(t["user_prompt"], t["assistant_response"]) for t in turns],
                              lambda: Crychic(ifqc=None, simplifier=None, judge=judge, window=window,
                                              threshold=float("-inf")))
        for decision, turn in zip(builder.decisions[1:], turns[1:], strict=True):
            out.append(BestCandidate(int(turn["parent"]), decision.parent, float(decision.score)))
    return out


def accuracy_at(points: Sequence[BestCandidate], threshold: float) -> float:
    """Share of ``points`` the pipeline's rule gets right at ``threshold``."""
    if not points:
        raise ValueError("no judged turns: the conversations need two or more turns each")
    return sum(p.right_at(threshold) for p in points) / len(points)


def tune_root_threshold(trees: Sequence[Mapping[str, Any]], judge: ParentJudge, *, window: int = WINDOW,
                        grid: Sequence[float] = GRID, reference: float = THRESHOLD) -> dict[str, Any]:
    """The grid's best threshold on ``trees`` (module docstring) and what it changes against ``reference``."""
    points = best_candidates(trees, judge, window)
    scored = [(accuracy_at(points, t), -abs(t - reference), t) for t in grid]
    accuracy, _, threshold = max(scored)

    def roots(at: float) -> int:
        return sum(p.score <= at for p in points)

    return {"threshold": threshold, "accuracy": round(accuracy, 4),
            "reference_threshold": reference, "accuracy_at_reference": round(accuracy_at(points, reference), 4),
            "roots": roots(threshold), "roots_at_reference": roots(reference),
            "gold_roots": sum(p.gold == -1 for p in points), "turns": len(points), "conversations": len(trees),
            "window": window, "grid": [grid[0], grid[-1]]}


#: the components' batched methods (:meth:`convohub.crychic.reconstruct.Crychic.prepare`), each one input a text
#: or a (prompt, response) pair and one answer per input
BATCHED_METHODS = ("implicit_probabilities", "label_scored_many", "embed_prompts", "embed_turns")


class Remembered:
    """A component whose batched answers are kept by input: reconstructing the same conversations at every
    grid value then asks each model about each text once. Everything else passes through."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.memo: dict[str, dict[Any, Any]] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in BATCHED_METHODS:
            return attr

        def remembered(items: Sequence[Any]) -> list[Any]:
            memo = self.memo.setdefault(name, {})
            todo = [item for item in dict.fromkeys(items) if item not in memo]
            if todo:
                memo.update(zip(todo, attr(todo), strict=True))
            return [memo[item] for item in items]

        return remembered


def tune_implicit_threshold(trees: Sequence[Mapping[str, Any]], ifqc: FollowUpClassifier,
                            simplifier: SentenceLabeller | None, judge: ParentJudge, *, window: int = WINDOW,
                            grid: Sequence[float] = IMPLICIT_GRID,
                            reference: float = IMPLICIT_THRESHOLD) -> dict[str, Any]:
    """The grid's IFQC threshold whose full-pipeline reconstruction of ``trees`` gets the most parents right
    (every turn but each conversation's first; module docstring), with its figures against ``reference``."""
    ifqc, simplifier, judge = (Remembered(c) if c is not None else None for c in (ifqc, simplifier, judge))

    def run(threshold: float) -> tuple[float, int]:
        right = turns = implicit = 0
        for tree in trees:
            exchanges = [(t["user_prompt"], t["assistant_response"]) for t in tree["turns"]]
            builder = reconstruct(exchanges, lambda: Crychic(ifqc=ifqc, simplifier=simplifier, judge=judge,
                                                             window=window, implicit_threshold=threshold))
            for decision, turn in zip(builder.decisions[1:], tree["turns"][1:], strict=True):
                right += decision.parent == int(turn["parent"])
                turns += 1
                implicit += decision.rule == "ifqc-implicit"
        if not turns:
            raise ValueError("no judged turns: the conversations need two or more turns each")
        return right / turns, implicit

    measured = {t: run(t) for t in grid}
    if reference not in measured:
        measured[reference] = run(reference)
    accuracy, _, threshold = max((measured[t][0], -abs(t - reference), t) for t in grid)
    return {"threshold": threshold, "accuracy": round(accuracy, 4), "reference_threshold": reference,
            "accuracy_at_reference": round(measured[reference][0], 4), "implicit": measured[threshold][1],
            "implicit_at_reference": measured[reference][1], "conversations": len(trees),
            "turns": sum(len(t["turns"]) - 1 for t in trees), "window": window, "grid": [grid[0], grid[-1]]}
