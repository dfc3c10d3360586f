"""The WildChat-AQA leaderboard: ``convohub evaluate wildchat-aqa SUBMISSION.jsonl [--dataset DIR]``.

A submission holds one line ``{"id": <question hash>, "prediction": [option indices, best first]}`` per
question of the built folder's ``questions`` config (split ``test``); it is scored with NDCG@1/3/5/10
against ``option_weights`` exactly as the authors' evaluation scores a ranking
(:func:`convohub.metrics.ndcg_at_k`): only the first ten entries count, an index past the last option is
skipped, a repeated index keeps the score of its last occurrence, unlisted options tie at 0, and an empty
list (what an unreadable answer becomes) scores every option 0. ``convohub aqa evaluate --predictions FILE``
writes such a file for any method.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from convohub.aqa.questions import DATASET_NAME
from convohub.scoring import Benchmark, SubmissionError


def _reference(row: Mapping[str, Any]) -> tuple[str, list[float]]:
    return str(row["hash"]), [float(w) for w in row["option_weights"]]


def _check(prediction: Any) -> str | None:
    bad = [v for v in prediction if not isinstance(v, int) or isinstance(v, bool)]
    if bad:
        return f"every entry must be an option index (an integer), got {bad[0]!r}"
    return None


def _score(predictions: list[Any], references: list[Any]) -> dict[str, float]:
    from convohub.metrics import ndcg_at_k

    for prediction, (question_id, weights) in zip(predictions, references, strict=True):
        low = [v for v in prediction[:10] if v < -len(weights)]
        if low:
            raise SubmissionError(f"prediction for id {question_id!r}: index {low[0]} is below -{len(weights)}; "
                                  f"give option indices 0..{len(weights) - 1}")
    return ndcg_at_k(predictions, [weights for _, weights in references])


#: ``convohub evaluate wildchat-aqa SUBMISSION.jsonl``: NDCG@1/3/5/10 of rankings (module doc).
BENCHMARK = Benchmark(
    name=DATASET_NAME,
    description="WildChat-AQA questions, option rankings scored with NDCG@1/3/5/10 (the authors' scoring)",
    dataset=DATASET_NAME, config="questions", split="test", id_field="hash", task_type="text-ranking",
    prediction_type=list, reference=_reference, score=_score, check=_check,
)
