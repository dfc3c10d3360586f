"""Metrics: hand-worked values, the paper-derived sanity baselines, scikit-learn equivalence for NDCG, the
Hit@1 rule table, and every ``evaluation/<name>/`` folder loaded the way users load it."""

from __future__ import annotations

import doctest
import importlib.util
import math
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from convohub.metrics import (
    hit_at_1,
    ms_ttr,
    ndcg_at_k,
    ndcg_per_question,
    ranking_scores,
    recall_at_k,
    self_bleu,
    sq_quality,
    tree_reconstruction_scores,
    user_simulation_f1,
    values_match,
)
from convohub.metrics.hit_at_1 import parse_answer
from convohub.metrics.sq_quality import intent_bleu

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
METRIC_DIRS = sorted(p for p in (REPO / "evaluation").iterdir() if (p / f"{p.name}.py").is_file())


# --- NDCG -------------------------------------------------------------------------------------------------

def _random_questions(rng: np.random.Generator, n_questions: int) -> tuple[list, list]:
    predictions, references = [], []
    for _ in range(n_questions):
        n = int(rng.choice([2, 4, 10]))
        if rng.random() < 0.5:
            weights = rng.integers(0, 3, n).astype(float)  # many tied weights, some all-zero questions
        else:
            weights = rng.random(n) * (rng.random(n) < 0.6)
        ranking = [int(i) for i in rng.permutation(n)[: rng.integers(0, n + 1)]]  # full, partial or empty
        if ranking and rng.random() < 0.15:
            ranking += [ranking[0], n + 3, -1]  # repeated, past-the-end and negative indices (authors' rule)
        predictions.append(ranking)
        references.append(weights.tolist())
    return predictions, references


def test_ndcg_equals_sklearn_on_random_data():
    from sklearn.metrics import ndcg_score

    predictions, references = _random_questions(np.random.default_rng(7), 400)
    ks = [1, 3, 5, 10]
    ours = ndcg_per_question(predictions, references, ks)
    for q, (ranking, weights) in enumerate(zip(predictions, references, strict=True)):
        scores = ranking_scores(ranking, len(weights))
        for k in ks:
            assert ours[k][q] == pytest.approx(ndcg_score([weights], [scores], k=k), abs=1e-9)
    means = ndcg_at_k(predictions, references, ks)
    assert set(means) == {"ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10"}
    assert means["ndcg@3"] == pytest.approx(float(ours[3].mean()), abs=1e-12)


def test_ndcg_hand_worked():
    # Perfect order -> 1; reversed order of weights [1, 0] -> 1/log2(3) at k=2.
    assert ndcg_at_k([[0, 1]], [[1.0, 0.0]], k=[1, 2]) == {"ndcg@1": 1.0, "ndcg@2": 1.0}
    assert ndcg_at_k([[1, 0]], [[1.0, 0.0]], k=[2])["ndcg@2"] == pytest.approx(1 / np.log2(3))
    # Empty ranking: every option tied, mean weight 0.5 at each position -> 0.5 at k=1, not 0.
    assert ndcg_at_k([[]], [[1.0, 0.0]], k=1)["ndcg@1"] == pytest.approx(0.5)
    # Partial ranking [2] of weights [0, 1, 3]: DCG@2 = 3 + mean(0, 1)/log2(3); ideal = 3 + 1/log2(3).
    expected = (3 + 0.5 / np.log2(3)) / (3 + 1 / np.log2(3))
    assert ndcg_at_k([[2]], [[0.0, 1.0, 3.0]], k=2)["ndcg@2"] == pytest.approx(expected)
    assert ndcg_at_k([[0]], [[0.0, 0.0]], k=1)["ndcg@1"] == 0.0  # all-zero weights score 0 like sklearn


def test_ndcg_rejects_bad_input():
    with pytest.raises(ValueError, match="question 1"):
        ndcg_at_k([[0], [0]], [[1.0, 0.0], [-1.0, 2.0]])
    with pytest.raises(ValueError, match="2 references"):
        ndcg_at_k([[0]], [[1.0, 0.0], [1.0, 0.0]])


def test_recall_at_k():
    retrieved = [["a", "b", "a", "c"], ["x"], ["p"]]
    gold = [["c", "b"], ["y"], []]  # the third question has no gold ids and is left out
    assert recall_at_k(retrieved, gold, k=[1, 2, 3]) == {"recall@1": 0.0, "recall@2": 0.25, "recall@3": 0.5}
    with pytest.raises(ValueError, match="no question"):
        recall_at_k([["a"]], [[]], k=1)


# --- Hit@1 ------------------------------------------------------------------------------------------------

HIT_RULES = [
    # (prediction, gold answers, strict hit, relaxed hit with relax=0.1, rule)
    ("42", ["42"], True, True, "same number"),
    ("42.004", ["42"], True, True, "rounded to 2 decimals"),
    ("42.01", ["42"], False, True, "2-decimal difference is a miss, within 10% slack"),
    ("95", ["100"], False, True, "within 10%"),
    ("89", ["100"], False, False, "outside 10%"),
    ("-95", ["-100"], False, True, "negative gold keeps a valid interval"),
    ("2", ["120"], True, True, "unit factor 60 (minutes -> seconds)"),
    ("7200", ["2"], True, True, "unit factor 3600 the other way"),
    ("1.5", ["1500"], True, True, "unit factor 1000"),
    ("Jazz ", ['"jazz"'], True, True, "strings lower-cased and stripped"),
    ("rock", ['"jazz"'], False, False, "different strings"),
    ("2024-11-25", ['"2024-11-25 18:30:00"'], True, True, "timestamp compared as a date"),
    ('"2024-11-25T09:00"', ['"2024-11-26"'], False, False, "different dates"),
    ("['b', 'A']", ['["a", "B"]'], True, True, "lists compared sorted"),
    ("('Jazz', 3)", ['["jazz", 3]'], True, True, "tuple vs list, sorted, typed elements"),
    ("['a']", ['["a", "b"]'], False, False, "list lengths differ"),
    ("['x', 'jazz']", ['"Jazz"'], True, True, "a list answer hits if any element matches"),
    ("[]", ["null"], True, True, "both empty"),
    ("", ['[]'], True, True, "both empty (empty string)"),
    ("0", ["null"], True, True, "gold None, answer 0"),
    ("null", ["0"], False, False, "answer None does not match gold 0"),
    (None, ["null"], False, False, "failed run scores 0"),
    ("7", ["3", "7"], True, True, "any of the tied gold answers"),
    ("true", ["1"], False, False, "bool never matches a number"),
    ("__import__('os').system('echo hacked')", ['"x"'], False, False, "never evaluated"),
]


@pytest.mark.parametrize(("prediction", "golds", "strict", "relaxed", "rule"), HIT_RULES,
                         ids=[r[-1] for r in HIT_RULES])
def test_hit_at_1_rules(prediction, golds, strict, relaxed, rule):
    scores = hit_at_1([prediction], [golds], relax=0.1)
    assert scores == {"hit@1": float(strict), "rlx_hit@1": float(relaxed)}, rule


def test_hit_at_1_parser_is_typed_and_safe():
    assert parse_answer('{"a": [1, "2024-01-02"]}') == {"a": [1, parse_answer("2024-01-02")]}
    assert parse_answer("(1, 'x')") == (1, "x")
    assert parse_answer("None") is None
    assert parse_answer("lambda: 1") == "lambda: 1"
    assert values_match(parse_answer("110"), parse_answer("100"), relax=0.1)
    assert not values_match(parse_answer("110.01"), parse_answer("100"), relax=0.1)


def test_hit_at_1_micro_average_and_validation():
    scores = hit_at_1(["1", "2", "3", "95"], [["1"], ["5"], ["3"], ["100"]], relax=0.2)
    assert scores == {"hit@1": 0.5, "rlx_hit@1": 0.75}
    with pytest.raises(ValueError):
        hit_at_1(["1"], [])


# --- tree reconstruction --------------------------------------------------------------------------------

def test_tree_reconstruction_hand_worked():
    predictions = [[-1, 0, 1], [-1, -1]]
    references = [[-1, 0, 0], [-1, 0]]
    # turns: (root ok), (edge ok: TP), (wrong edge: FP+FN), (root ok), (missed edge: FN)
    scores = tree_reconstruction_scores(predictions, references)
    assert scores["accuracy"] == pytest.approx(3 / 5)
    assert scores["precision"] == pytest.approx(1 / 2)
    assert scores["recall"] == pytest.approx(1 / 3)
    assert scores["f1"] == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))
    assert scores["macro_accuracy"] == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert scores["macro_precision"] == pytest.approx(0.5)  # conversation 1 predicts no edge: left out
    assert scores["macro_recall"] == pytest.approx(0.25)
    assert scores["macro_f1"] == pytest.approx(0.25)
    without_first = tree_reconstruction_scores(predictions, references, exclude_first_turn=True)
    assert without_first["accuracy"] == pytest.approx(1 / 3)
    assert without_first["recall"] == scores["recall"]


def test_tree_reconstruction_errors_name_the_conversation():
    with pytest.raises(ValueError, match="conversation 1"):
        tree_reconstruction_scores([[-1], [-1, 0]], [[-1], [-1, 0, 1]])
    with pytest.raises(ValueError, match="conversation 0: gold parent of turn 1"):
        tree_reconstruction_scores([[-1, 0]], [[-1, 1]])


# --- user simulation (ProMISe test split, Table 2 class counts) ------------------------------------------

def test_user_simulation_task1_majority_baseline_matches_paper():
    references = [0] * 1930 + [1] * 315
    scores = user_simulation_f1([0] * len(references), references, task="task1")
    assert round(100 * scores["micro_f1"], 2) == 85.97
    assert round(100 * scores["macro_f1"], 2) == 46.23
    assert scores["f1_satisfied"] == 0.0


def test_user_simulation_task2_sq1_baseline_matches_paper():
    references = [0] * 443 + [1] * 399 + [2] * 384 + [3] * 374 + [4] * 330
    scores = user_simulation_f1([0] * len(references), references, task="task2")
    assert round(100 * scores["micro_f1"], 2) == 22.95
    assert round(100 * scores["macro_f1"], 2) == 7.47
    assert {f"f1_{n}" for n in ("sq1", "sq2", "sq3", "sq4", "none")} <= set(scores)


def test_user_simulation_invalid_predictions_count_as_wrong():
    scores = user_simulation_f1([0, 0, 1, -1], [0, 1, 1, 0], task="task1")
    assert scores["micro_f1"] == pytest.approx(0.5)  # = accuracy: the -1 is wrong
    assert scores["f1_not_satisfied"] == pytest.approx(0.5)  # P 1/2, R 1/2
    assert scores["f1_satisfied"] == pytest.approx(2 / 3)  # P 1, R 1/2
    assert scores["invalid_rate"] == 0.25
    assert user_simulation_f1([5, None], [4, 4], task="task2")["micro_f1"] == 0.0
    with pytest.raises(ValueError, match="task"):
        user_simulation_f1([0], [0], task="task3")


# --- SQ quality ------------------------------------------------------------------------------------------

def test_sq_quality_hand_worked():
    assert ms_ttr(["a b a b"]) == 0.5  # shorter than a segment: whole-pool ratio
    words = [f"w{i}" for i in range(50)] + ["x"] * 50 + ["tail"]
    assert ms_ttr([" ".join(words)]) == pytest.approx((1.0 + 1 / 50) / 2)  # partial last segment dropped
    assert self_bleu(["only one"]) is None
    assert self_bleu(["the same question here", "the same question here"]) == pytest.approx(1.0)
    scores = sq_quality([["How much is a drone?", "How much is a drone?"], ["Which camera?"]],
                        ["How much is a drone?", "a camera"], with_bertscore=False)
    assert scores["self_bleu"] == pytest.approx(1.0)  # second turn has one SQ: skipped
    assert intent_bleu("How much is a drone?", ["How much is a drone?"]) == pytest.approx(1.0)
    assert scores["bleu"] == pytest.approx((1.0 + intent_bleu("a camera", ["Which camera?"])) / 2)
    assert intent_bleu("a camera", ["Which camera?"]) < 0.5
    assert "bertscore" not in scores


def test_sq_quality_bertscore_is_bert_score_on_the_bundled_minilm():
    from bert_score import score

    from convohub.metrics.sq_quality import BERTSCORE_LAYER, bertscore, default_bertscore_model

    turns, intents = [["buy a cheap drone", "drone prices under 100 dollars"], ["banana bread recipe"]], \
        ["buy a cheap drone", "buy a cheap drone"]
    scores = sq_quality(turns, intents)
    assert 0.0 < scores["bertscore"] < 1.0
    # the package's own function, pair by pair: turn means, then the mean over turns
    _, _, f1 = score([q for qs in turns for q in qs], ["buy a cheap drone"] * 3, model_type=default_bertscore_model(),
                     num_layers=BERTSCORE_LAYER, lang="en")
    assert scores["bertscore"] == pytest.approx(((float(f1[0]) + float(f1[1])) / 2 + float(f1[2])) / 2, abs=1e-5)
    assert float(f1[0]) == pytest.approx(1.0, abs=1e-5) and float(f1[2]) < float(f1[1])
    assert bertscore([["buy a cheap drone"]], ["buy a cheap drone"]) == pytest.approx(1.0, abs=1e-5)


# --- every evaluate module folder ------------------------------------------------------------------------

SAMPLE_INPUTS = {
    "ndcg": {"predictions": [[1, 0], []], "references": [[0.0, 1.0], [1.0, 1.0]], "k": [1]},
    "hit_at_1": {"predictions": ["1", None], "references": [["1"], ["2"]]},
    "tree_reconstruction": {"predictions": [[-1, 0]], "references": [[-1, 0]]},
    "user_simulation": {"predictions": [4, 0], "references": [4, 1], "task": "task2"},
    "sq_quality": {"predictions": [["a question", "another question"]], "references": ["an intent"],
                   "with_bertscore": False},
    # a callable: the LLM judge needs the tiny local model, built on first use rather than at collection
    "checklist_judge": lambda: {
        "predictions": ["short"], "references": ["long"], "histories": [[]], "queries": ["be brief"],
        "checklists": [["The answer is short."]], "judge_model": str(_tiny_causal()), "max_new_tokens": 4,
    },
}
#: Scores that are not fractions in [0, 1], per metric: key -> (low, high). NaN is allowed only here, for
#: rates over zero judged items (the tiny random judge never writes a parseable verdict).
SCORE_RANGES = {
    "checklist_judge": {"mean_reward": (-100.0, 100.0), "parse_failures": (0, math.inf),
                        "n_judged": (0, math.inf)},
}
CARD_KEYS = {"title", "emoji", "colorFrom", "colorTo", "sdk", "sdk_version", "app_file", "pinned", "tags",
             "description"}


def _tiny_causal() -> Path:
    from convohub.tiny import tiny_model

    return tiny_model("causal")


def _score_ok(metric: str, key: str, value: object) -> bool:
    if metric == "checklist_judge" and key in ("judge", "prompt_style"):  # every judged result names its judge
        return isinstance(value, str) and bool(value)
    if metric not in SCORE_RANGES:
        return isinstance(value, float) and 0.0 <= value <= 1.0
    low, high = SCORE_RANGES[metric].get(key, (0.0, 1.0))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isnan(value) or low <= value <= high


def test_every_metric_folder_has_sample_inputs():
    assert {p.name for p in METRIC_DIRS} == set(SAMPLE_INPUTS)


@pytest.mark.parametrize("folder", METRIC_DIRS, ids=[p.name for p in METRIC_DIRS])
def test_metric_folder(folder: Path, monkeypatch: pytest.MonkeyPatch):
    import evaluate
    import gradio

    monkeypatch.chdir(REPO)  # the doctests load "evaluation/<name>" like a user in a checkout
    metric = evaluate.load(str(folder))
    sample = SAMPLE_INPUTS[folder.name]
    scores = metric.compute(**(sample() if callable(sample) else sample))
    assert scores and all(_score_ok(folder.name, k, v) for k, v in scores.items()), scores

    module = sys.modules[type(metric).__module__]
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0, f"{folder.name}: {result}"

    text = (folder / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    card = yaml.safe_load(text.split("---\n")[1])
    assert set(card) >= CARD_KEYS
    assert card["sdk"] == "gradio" and card["app_file"] == "app.py" and card["pinned"] is False
    assert card["sdk_version"] == gradio.__version__
    assert {"evaluate", "metric"} <= set(card["tags"])
    for section in ("## Description", "### Inputs", "### Outputs", "## Reference implementation",
                    "Where convohub", "## Limitations", "## Citation"):
        assert section in text, f"{folder.name} card lacks {section}"
    assert not [r for r in (folder / "requirements.txt").read_text().splitlines() if r.startswith("convohub")]

    launched = []
    monkeypatch.setattr(gradio.Blocks, "launch", lambda *a, **k: launched.append(a))
    monkeypatch.syspath_prepend(str(folder))
    spec = importlib.util.spec_from_file_location(f"_space_{folder.name}", folder / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    assert isinstance(app.demo, gradio.Blocks)
    assert not launched


def test_readme_lists_every_metric_space():
    """The release table names one metric Space per ``evaluation/<name>/`` folder, none missing, none extra."""
    [row] = [line for line in (REPO / "README.md").read_text(encoding="utf-8").splitlines()
             if "metric Spaces" in line and line.startswith("|")]
    listed = re.search(r"spaces/convohub/\{([^}]*)\}", row).group(1).split(",")
    assert sorted(listed) == sorted(p.name for p in METRIC_DIRS)


def test_hit_at_1_module_takes_a_failed_run_first():
    """``evaluate`` type-checks only a column's first element and used to reject a leading None."""
    import evaluate

    metric = evaluate.load(str(REPO / "evaluation" / "hit_at_1"))
    assert metric.compute(predictions=[None, "42"], references=[["1"], ["42"]]) == {"hit@1": 0.5, "rlx_hit@1": 0.5}
    assert metric.compute(predictions=[None, None], references=[["null"], ["[]"]]) == {"hit@1": 0.0,
                                                                                        "rlx_hit@1": 0.0}
    metric.add(prediction=None, reference=["1"])
    metric.add(prediction="1", reference=["1"])
    assert metric.compute() == {"hit@1": 0.5, "rlx_hit@1": 0.5}
    for wrong in ([1, "42"], [["42"], "42"]):  # other types are still refused, first or not
        with pytest.raises(ValueError, match="expected format"):
            metric.compute(predictions=wrong, references=[["1"], ["42"]])


def test_tree_reconstruction_counts_like_sklearn():
    """The card names scikit-learn as the reference: micro P/R/F1 over the non-root labels, accuracy over all."""
    from sklearn.metrics import accuracy_score, precision_recall_fscore_support

    rng = np.random.default_rng(7)
    for _ in range(200):
        golds = [[-1] + [int(rng.integers(-1, t)) for t in range(1, int(rng.integers(1, 8)))]
                 for _ in range(int(rng.integers(1, 5)))]
        preds = [list(g) if rng.random() < 0.3 else [int(rng.integers(-1, len(g) + 2)) for _ in g] for g in golds]
        ours = tree_reconstruction_scores(preds, golds)
        gold, pred = np.concatenate(golds), np.concatenate(preds)
        labels = sorted(set(gold[gold >= 0]) | set(pred[pred >= 0])) or [0]
        p, r, f1, _ = precision_recall_fscore_support(gold, pred, labels=labels, average="micro", zero_division=0)
        assert (ours["precision"], ours["recall"], ours["f1"]) == pytest.approx((p, r, f1), abs=1e-12)
        assert ours["accuracy"] == pytest.approx(accuracy_score(gold, pred), abs=1e-12)


def test_metric_features_reject_wrong_shapes():
    import evaluate

    metric = evaluate.load(str(REPO / "evaluation" / "tree_reconstruction"))
    with pytest.raises((ValueError, TypeError)):
        metric.compute(predictions=[-1, 0], references=[-1, 0])  # flat lists instead of one per conversation
