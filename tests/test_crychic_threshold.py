"""The judge's root threshold and the pipeline's IFQC threshold tuned on whole conversations
(convohub.crychic.threshold), and the pipeline taking a judge's tuned thresholds unless the caller names one."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from convohub.crychic.components import StoredTurn
from convohub.crychic.reconstruct import THRESHOLD, Crychic, resolve_implicit_threshold, resolve_threshold
from convohub.crychic.threshold import (
    BestCandidate,
    accuracy_at,
    best_candidates,
    tune_implicit_threshold,
    tune_root_threshold,
)
from convohub.crychic.trees import tree_record

#: prompt -> score of each earlier turn (by index); unlisted turns score 0
SCORES: dict[str, dict[int, float]] = {
    "a1": {0: 0.6},                  # child of a0, found at 0.6
    "a2": {0: 0.1, 1: 0.3},          # a new topic whose best candidate is a1 at 0.3
    "a3": {1: 0.5, 0: 0.2},          # child of a1, found at 0.5
    "b1": {0: 0.45},                 # a new topic whose best candidate is b0 at 0.45
    "b2": {0: 0.7, 1: 0.2},          # child of b1, but b0 scores higher: never right
}
TREES = [
    tree_record("a", "single", [("a0", "r"), ("a1", "r"), ("a2", "r"), ("a3", "r")], [-1, 0, -1, 1]),
    tree_record("b", "single", [("b0", "r"), ("b1", "r"), ("b2", "r")], [-1, -1, 1]),
]


class TableJudge:
    def __init__(self, root_threshold: float | None = None) -> None:
        self.root_threshold = root_threshold

    def embed_turn(self, prompt: str, response: str) -> str:
        return prompt

    def scores(self, prompt: str, candidates: Sequence[StoredTurn]) -> list[float]:
        return [SCORES.get(prompt, {}).get(turn.index, 0.0) for turn in candidates]


def test_best_candidates_are_the_judges_alone_without_a_threshold() -> None:
    assert best_candidates(TREES, TableJudge()) == [
        BestCandidate(0, 0, 0.6), BestCandidate(-1, 1, 0.3), BestCandidate(1, 1, 0.5),
        BestCandidate(-1, 0, 0.45), BestCandidate(1, 0, 0.7)]


def test_accuracy_follows_the_pipelines_strict_rule() -> None:
    points = best_candidates(TREES, TableJudge())
    # right at 0.4: a1, a2 (root), a3; wrong: b1 (0.45 makes it a child), b2 (wrong turn)
    assert accuracy_at(points, 0.4) == pytest.approx(3 / 5)
    assert accuracy_at(points, 0.45) == pytest.approx(4 / 5)  # 0.45 is not above 0.45: b1 is a root
    assert accuracy_at(points, 0.5) == pytest.approx(3 / 5)  # a3 becomes a root
    with pytest.raises(ValueError, match="no judged turns"):
        accuracy_at([], 0.4)


def test_the_best_threshold_wins_and_a_tie_goes_nearest_the_papers() -> None:
    result = tune_root_threshold(TREES, TableJudge())
    # 0.45 .. 0.49 all give 4 of 5; 0.45 is the nearest to 0.4
    assert result["threshold"] == 0.45 and result["accuracy"] == 0.8
    assert (result["accuracy_at_reference"], result["reference_threshold"]) == (0.6, THRESHOLD)
    assert (result["roots"], result["roots_at_reference"], result["gold_roots"]) == (2, 1, 2)
    assert (result["turns"], result["conversations"], result["grid"]) == (5, 2, [0.05, 0.95])
    # a reference elsewhere moves the tie-break, not the accuracy
    assert tune_root_threshold(TREES, TableJudge(), reference=0.9)["threshold"] == 0.49


def test_the_pipeline_takes_the_judges_tuned_threshold_unless_one_is_given() -> None:
    def decide(judge: TableJudge, **kwargs: float) -> int:
        builder = Crychic(ifqc=None, simplifier=None, judge=judge, **kwargs)
        for prompt in ("a0", "a1"):
            builder.add_turn(prompt, "r")
        return builder.decide("a2").parent  # best candidate a1 at 0.3

    assert decide(TableJudge()) == -1  # the paper's 0.4
    assert decide(TableJudge(root_threshold=0.25)) == 1
    assert decide(TableJudge(root_threshold=0.25), threshold=0.4) == -1
    assert resolve_threshold(TableJudge()) == (THRESHOLD, "the paper's")
    assert resolve_threshold(TableJudge(0.25)) == (0.25, "tuned for this judge")
    assert resolve_threshold(TableJudge(0.25), 0.4) == (0.4, "given")
    # the pipeline keeps where its threshold came from (what the Space and the reports show)
    given = Crychic(ifqc=None, simplifier=None, judge=TableJudge(0.25), threshold=0.4)
    assert (given.threshold, given.threshold_origin) == (0.4, "given")


def test_a_judge_config_refuses_a_threshold_that_is_no_probability() -> None:
    from convohub.crychic.models import CrychicFollowUpJudgeConfig

    assert CrychicFollowUpJudgeConfig(root_threshold=0.3).root_threshold == 0.3
    with pytest.raises(ValueError, match="root_threshold must be a probability"):
        CrychicFollowUpJudgeConfig(root_threshold=1.5)


class TableIFQC:
    """Implicit probabilities by prompt (unlisted: 0)."""

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table

    def implicit_probability(self, prompt: str) -> float:
        return self.table.get(prompt, 0.0)


def test_the_implicit_threshold_is_tuned_with_the_whole_pipeline() -> None:
    # the IFQC leans implicit on a1 (gold: the most recent turn), a2 (gold: a new topic) and b2 (gold: b1, the
    # most recent turn, which the judge misses)
    ifqc = TableIFQC({"a1": 0.9, "a2": 0.6, "b2": 0.75})
    judge = TableJudge(root_threshold=0.45)
    result = tune_implicit_threshold(TREES, ifqc, None, judge)
    # at 0.5: a1 right (implicit -> 0), a2 wrong (implicit -> 1, gold root), b2 right (implicit -> 1), a3 and b1
    # by the judge at 0.45 (a3 -> 1 right, b1 root right): 4 of 5; from 0.6: a2 goes to the judge (root, right)
    # and b2 still implicit: 5 of 5; from 0.75 b2 goes to the judge (b0, wrong): 4 of 5
    assert (result["threshold"], result["accuracy"], result["accuracy_at_reference"]) == (0.6, 1.0, 0.8)
    assert (result["implicit"], result["implicit_at_reference"]) == (2, 3)
    assert (result["turns"], result["conversations"], result["grid"]) == (5, 2, [0.5, 0.95])


def test_the_pipeline_takes_the_judges_implicit_threshold_unless_one_is_given() -> None:
    class Tuned(TableJudge):
        implicit_threshold = 0.7

    ifqc = TableIFQC({"a1": 0.6})

    def rule(judge: TableJudge, **kwargs: float) -> str:
        builder = Crychic(ifqc=ifqc, simplifier=None, judge=judge, **kwargs)
        builder.add_turn("a0", "r")
        return builder.decide("a1").rule

    assert rule(TableJudge()) == "ifqc-implicit"  # the argmax: 0.6 > 0.5
    assert rule(Tuned()) == "judge-parent"  # 0.6 is not above the tuned 0.7
    assert rule(Tuned(), implicit_threshold=0.5) == "ifqc-implicit"
    assert resolve_implicit_threshold(TableJudge()) == (0.5, "the IFQC's argmax")
    assert resolve_implicit_threshold(Tuned()) == (0.7, "tuned for this pipeline")
    assert resolve_implicit_threshold(Tuned(), 0.55) == (0.55, "given")
    with pytest.raises(ValueError, match="implicit threshold must be in"):
        resolve_implicit_threshold(TableJudge(), 1.0)
    from convohub.crychic.models import CrychicFollowUpJudgeConfig

    assert CrychicFollowUpJudgeConfig(implicit_threshold=0.7).implicit_threshold == 0.7
    with pytest.raises(ValueError, match="implicit_threshold must be a probability"):
        CrychicFollowUpJudgeConfig(implicit_threshold=1.2)


def test_tuning_asks_each_model_about_each_text_once() -> None:
    class BatchedIFQC(TableIFQC):
        def __init__(self, table: dict[str, float]) -> None:
            super().__init__(table)
            self.asked: list[str] = []

        def implicit_probabilities(self, prompts: Sequence[str]) -> list[float]:
            self.asked += list(prompts)
            return [self.implicit_probability(p) for p in prompts]

    ifqc = BatchedIFQC({"a1": 0.9, "a2": 0.6, "b2": 0.75})
    result = tune_implicit_threshold(TREES, ifqc, None, TableJudge(root_threshold=0.45))
    assert result["threshold"] == 0.6  # as with the one-prompt IFQC above
    assert sorted(ifqc.asked) == ["a1", "a2", "a3", "b1", "b2"]  # 11 reconstructions, one question per prompt
