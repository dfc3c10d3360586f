"""Scoring leaderboard submissions: ``convohub evaluate BENCHMARK SUBMISSION.jsonl``.

A submission is JSON Lines, one ``{"id": ..., "prediction": ...}`` object per gold item of the
benchmark's test split. It is validated completely before anything is scored: a line that is not a JSON
object, lacks a field, has the wrong type, repeats an id or names an unknown id is an error that names
the line; missing ids are an error that names how many and the first few. A partial submission never
gets a silent partial score. The scores come from the same plain metric functions the ``evaluate``
modules wrap, and a ``model-index`` fragment is written for the submitter's model card.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convohub.jsonlines import jsonl_records


class ScoringError(ValueError):
    """A scoring request that cannot run as given (e.g. a judged benchmark without a named judge)."""


class SubmissionError(ScoringError):
    """A malformed submission; the message names the file and line at fault and what to do."""


@dataclass(frozen=True)
class Benchmark:
    """A benchmark a system registers: where its gold lives and how predictions are scored."""

    name: str
    description: str
    dataset: str  # dataset repo name (under the namespace), e.g. "perqa"
    config: str
    split: str
    id_field: str
    task_type: str  # model-index task type
    #: expected Python type(s) of one prediction, checked per line (e.g. ``str`` or ``list``)
    prediction_type: type | tuple[type, ...]
    #: one gold row -> the reference the metric takes for it
    reference: Callable[[Mapping[str, Any]], Any]
    #: (predictions, references) in gold order -> flat dict of scores
    score: Callable[[list[Any], list[Any]], dict[str, float]]
    #: optional extra validation of one prediction; returns an error message or None
    check: Callable[[Any], str | None] | None = None
    #: judged benchmarks: turns the user's judge choice (a spec, or None) into the judge passed to
    #: ``score(..., judge=...)``; raises ValueError (naming the options) when no judge is named
    judge: Callable[[str | None], Any] | None = None


def read_submission(path: Path, benchmark: Benchmark) -> dict[str, Any]:
    """Parse and validate a JSONL submission into {id: prediction}."""
    predictions: dict[str, Any] = {}
    try:
        records = jsonl_records(path, error=SubmissionError, expected="one JSON object")
    except OSError as exc:
        raise SubmissionError(f"{path}: cannot read the submission ({exc})") from exc
    for where, obj in records:
        if not isinstance(obj, dict) or "id" not in obj or "prediction" not in obj:
            raise SubmissionError(f'{where}: each line must be an object with "id" and "prediction"')
        item_id = obj["id"]
        if not isinstance(item_id, (str, int)) or isinstance(item_id, bool):
            raise SubmissionError(f"{where}: id must be a string, got {type(item_id).__name__}")
        item_id = str(item_id)
        if item_id in predictions:
            raise SubmissionError(f"{where}: duplicate id {item_id!r}; submit one prediction per id")
        prediction = obj["prediction"]
        if not isinstance(prediction, benchmark.prediction_type) or isinstance(prediction, bool) and \
                bool not in _as_tuple(benchmark.prediction_type):
            expected = " or ".join(t.__name__ for t in _as_tuple(benchmark.prediction_type))
            raise SubmissionError(f"{where}: prediction for id {item_id!r} must be {expected}, "
                                  f"got {type(prediction).__name__}")
        if benchmark.check is not None:
            problem = benchmark.check(prediction)
            if problem:
                raise SubmissionError(f"{where}: prediction for id {item_id!r}: {problem}")
        predictions[item_id] = prediction
    if not predictions:
        raise SubmissionError(f"{path}: the submission is empty")
    return predictions


def _as_tuple(t: type | tuple[type, ...]) -> tuple[type, ...]:
    return t if isinstance(t, tuple) else (t,)


def align(predictions: Mapping[str, Any], gold_ids: Sequence[str], path: Path | str) -> list[Any]:
    """Predictions in gold order; unknown or missing ids are errors."""
    gold = set(gold_ids)
    unknown = [i for i in predictions if i not in gold]
    if unknown:
        raise SubmissionError(f"{path}: {len(unknown)} id(s) not in the benchmark, e.g. {unknown[:3]}")
    missing = [i for i in gold_ids if i not in predictions]
    if missing:
        raise SubmissionError(f"{path}: {len(missing)} of {len(gold_ids)} gold id(s) have no prediction, "
                              f"e.g. {missing[:3]}; a partial submission is not scored")
    return [predictions[i] for i in gold_ids]


def score_submission(benchmark: Benchmark, dataset_dir: Path, submission: Path, *,
                     judge: str | None = None) -> dict[str, Any]:
    """Load the gold split from a built dataset folder and score a submission against it.

    A judged benchmark refuses (ScoringError) unless a judge is named (``judge``, or what its resolver
    accepts from the environment); the judge is resolved before the submission is read."""
    from convohub.hub import load_local

    options: dict[str, Any] = {}
    if benchmark.judge is not None:
        try:
            options["judge"] = benchmark.judge(judge)
        except ValueError as exc:
            raise ScoringError(f"{benchmark.name} is scored by an LLM judge: {exc}") from exc
    elif judge is not None:
        raise ScoringError(f"{benchmark.name} is not judged by an LLM; drop --judge")
    if not Path(dataset_dir).is_dir():
        raise FileNotFoundError(f"dataset folder {dataset_dir} not found; build it with "
                                f"`convohub datasets build {benchmark.dataset}` or pass --dataset DIR")
    gold = load_local(dataset_dir, benchmark.config, benchmark.split)
    gold_ids = [str(i) for i in gold[benchmark.id_field]]
    ordered = align(read_submission(submission, benchmark), gold_ids, submission)
    references = [benchmark.reference(row) for row in gold]
    return benchmark.score(ordered, references, **options)


def model_index_fragment(benchmark: Benchmark, scores: Mapping[str, float], dataset_id: str) -> list[dict[str, Any]]:
    """The ``results`` entries of a model card's ``model-index`` for these scores; a judged benchmark's
    ``judge`` (the model that judged) goes into every metric's name, so scores made with different
    judges never read as the same metric."""
    judge = scores.get("judge")
    suffix = f" (judge: {judge})" if isinstance(judge, str) and judge else ""
    return [{
        "task": {"type": benchmark.task_type},
        "dataset": {"name": benchmark.name, "type": dataset_id, "config": benchmark.config,
                    "split": benchmark.split},
        "metrics": [{"type": key, "value": round(float(value), 6), **({"name": key + suffix} if suffix else {})}
                    for key, value in scores.items() if isinstance(value, (int, float)) and not isinstance(value, bool)],
        "source": {"name": "convohub evaluate", "url": f"https://huggingface.co/datasets/{dataset_id}"},
    }]


def registered_benchmarks() -> dict[str, Benchmark]:
    """Benchmarks of every registered system, by name."""
    from convohub.registry import load_systems

    out: dict[str, Benchmark] = {}
    for system in load_systems().values():
        for bench in system.benchmarks:
            out[bench.name] = bench
    return out
