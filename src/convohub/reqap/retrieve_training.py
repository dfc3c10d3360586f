"""Training of ReQAP's two RETRIEVE cross-encoders, shared by training/reqap_retrieve_events/ and
training/reqap_retrieve_patterns/ (each script is a thin ``main(argv)`` calling :func:`run` with its task).

The steps follow sentence-transformers' cross-encoder training: a ``CrossEncoder`` with ``num_labels`` and
``id2label`` set (2 classes for events, 3 for patterns) -> examples derived from PerQA by
:mod:`convohub.reqap.retrieve_data` (train personas for training, dev personas held out) -> cross-entropy
loss -> the held-out classification evaluator run on the base model -> ``CrossEncoderTrainer`` -> the same
evaluator after training, so the gain is measured -> save. Heavy imports happen inside functions.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convohub.hub import atomic_write_text, dump_json
from convohub.reqap.retrieve_data import EVENT_LABELS, PATTERN_LABELS, Example, RetrieveDataConfig

__all__ = ["TASKS", "RetrieveArguments", "classification_metrics", "data_config", "load_examples",
           "make_evaluator", "make_parser", "run", "select_examples"]

#: task -> class names by id (the saved model's id2label).
TASKS: dict[str, dict[int, str]] = {"events": EVENT_LABELS, "patterns": PATTERN_LABELS}
EVALUATOR_NAME = "heldout"


@dataclass
class RetrieveArguments:
    """Data and model arguments of both scripts (trainer arguments: CrossEncoderTrainingArguments)."""

    dataset_path: str = field(default="convohub/perqa",
                              metadata={"help": "PerQA dataset repo id or local folder (built by convohub)"})
    train_split: str = field(default="train")
    eval_split: str = field(default="dev")
    model_name_or_path: str = field(default="cross-encoder/ms-marco-MiniLM-L-12-v2",
                                    metadata={"help": "Hub id, local folder, or minilm (bundled all-MiniLM-L6-v2)"})
    max_length: int = field(default=512, metadata={"help": "max tokens of (query, text): 512 events, 50 patterns"})
    max_personas: int | None = field(default=None, metadata={"help": "use the first N personas of each split"})
    max_train_examples: int | None = field(default=None, metadata={"help": "cap on training examples (seeded)"})
    max_eval_examples: int | None = field(default=None, metadata={"help": "cap on held-out examples (seeded)"})
    min_recall: float = field(default=0.5, metadata={"help": "skip RETRIEVE calls with lower BM25 recall"})
    first_stage_threshold: float = field(default=0.0, metadata={"help": "BM25 score a candidate must exceed"})
    pattern_threshold: int = field(default=100, metadata={"help": "candidates a key-value pattern must match"})
    hard_negative_pool: int = field(default=50, metadata={"help": "hard negatives come from the top-N non-gold"})


def make_parser() -> Any:
    """(RetrieveArguments, CrossEncoderTrainingArguments); recipes are parsed strictly."""
    from sentence_transformers.cross_encoder import CrossEncoderTrainingArguments
    from trl import TrlParser

    return TrlParser((RetrieveArguments, CrossEncoderTrainingArguments))


def data_config(args: Any, seed: int) -> RetrieveDataConfig:
    """The derivation settings of a recipe (``args`` is a RetrieveArguments or the recipe mapping)."""
    get = args.get if isinstance(args, Mapping) else lambda k, d: getattr(args, k, d)
    return RetrieveDataConfig(seed=seed, min_recall=float(get("min_recall", 0.5)),
                              first_stage_threshold=float(get("first_stage_threshold", 0.0)),
                              pattern_threshold=int(get("pattern_threshold", 100)),
                              hard_negative_pool=int(get("hard_negative_pool", 50)))


def select_examples(examples: Sequence[Example], limit: int | None, seed: int) -> list[Example]:
    """A seeded, order-keeping sample of at most ``limit`` examples (all of them for None)."""
    if limit is None or len(examples) <= limit:
        return list(examples)
    from convohub.perqa.vocab import derive_rng

    rng = derive_rng(seed, "retrieve-examples", len(examples))
    return [examples[i] for i in sorted(rng.sample(range(len(examples)), limit))]


def load_examples(dataset_path: str | Path, split: str, task: str, config: RetrieveDataConfig,
                  max_personas: int | None = None, limit: int | None = None) -> tuple[list[Example], dict[str, Any]]:
    """One task's examples of one split (capped) and the derivation statistics."""
    from convohub.reqap.retrieve_data import derive_from_dataset

    if task not in TASKS:
        raise ValueError(f"unknown RETRIEVE task {task!r} (events, patterns)")
    data = derive_from_dataset(dataset_path, split, config, max_personas=max_personas)
    examples = data.events if task == "events" else data.patterns
    return select_examples(examples, limit, config.seed), data.stats


def to_dataset(examples: Sequence[Example]) -> Any:
    import datasets

    from convohub.reqap.retrieve_data import to_rows

    return datasets.Dataset.from_dict(to_rows(examples))


def classification_metrics(model: Any, examples: Sequence[Example], labels: Mapping[int, str],
                           batch_size: int = 64) -> dict[str, Any]:
    """Accuracy, macro-F1 and per-class recall of a cross-encoder's argmax on labelled examples."""
    import numpy as np
    from sklearn.metrics import f1_score

    if not examples:
        raise ValueError("no examples to evaluate on: is the split empty or every RETRIEVE call skipped?")
    logits = model.predict([[e.query, e.text] for e in examples], batch_size=batch_size,
                           convert_to_numpy=True, show_progress_bar=False)
    pred = np.asarray(logits).reshape(len(examples), -1).argmax(axis=1)
    gold = np.asarray([e.label for e in examples])
    out: dict[str, Any] = {
        "accuracy": round(float((pred == gold).mean()), 4),
        "f1_macro": round(float(f1_score(gold, pred, average="macro", labels=sorted(labels), zero_division=0)), 4),
        "examples": len(examples),
    }
    for i, name in sorted(labels.items()):
        mask = gold == i
        out[f"recall_{name}"] = round(float((pred[mask] == i).mean()), 4) if mask.any() else None
        out[f"examples_{name}"] = int(mask.sum())
    return out


def make_evaluator(examples: Sequence[Example], batch_size: int = 64) -> Any:
    """sentence-transformers' classification evaluator on held-out examples, also reporting ``accuracy``
    (equal to micro-F1 for single-label classes), which ``metric_for_best_model`` selects on."""
    from sentence_transformers.cross_encoder.evaluation import CrossEncoderClassificationEvaluator

    class HeldoutEvaluator(CrossEncoderClassificationEvaluator):
        def __call__(self, model: Any, output_path: str | None = None, epoch: int = -1,
                     steps: int = -1) -> dict[str, float]:
            metrics = super().__call__(model, output_path, epoch, steps)
            micro = metrics.get(f"{self.name}_f1_micro")
            if micro is not None:
                metrics[f"{self.name}_accuracy"] = micro
            return metrics

    return HeldoutEvaluator([[e.query, e.text] for e in examples], [e.label for e in examples],
                            name=EVALUATOR_NAME, batch_size=batch_size, write_csv=False)


def build_model(model_name_or_path: str, task: str, max_length: int) -> Any:
    """A CrossEncoder with a fresh classification head of the task's classes and names."""
    from sentence_transformers.cross_encoder import CrossEncoder, CrossEncoderModelCardData

    from convohub.training.models import resolve_model

    labels = TASKS[task]
    return CrossEncoder(
        resolve_model(model_name_or_path), num_labels=len(labels), max_length=max_length,
        config_kwargs={"id2label": dict(labels), "label2id": {v: k for k, v in labels.items()}},
        model_kwargs={"ignore_mismatched_sizes": True},  # ms-marco checkpoints carry a 1-logit head
        model_card_data=CrossEncoderModelCardData(language="en", license="mit",
                                                  model_name=f"ReQAP RETRIEVE {task} cross-encoder",
                                                  generate_widget_examples=False))


def run(task: str, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Derive examples, train the task's cross-encoder, measure held-out accuracy before and after, save.

    Returns (and writes to ``<output_dir>/eval_results.json``) the measured numbers; the resolved arguments go
    to ``<output_dir>/training_args.json`` (:func:`convohub.training.runs.save_arguments`) for evaluation.
    """
    from sentence_transformers.cross_encoder import CrossEncoderTrainer
    from sentence_transformers.cross_encoder.losses import CrossEntropyLoss
    from transformers import set_seed

    from convohub.training.runs import save_arguments

    parser = make_parser()
    args, training_args = parser.parse_args_and_config(list(argv) if argv is not None else None,
                                                       fail_with_unknown_args=True)
    labels = TASKS[task]
    out = Path(training_args.output_dir)
    set_seed(training_args.seed)

    # 1. model: fresh head with the task's classes (id2label saved with the model)
    model = build_model(args.model_name_or_path, task, args.max_length)

    # 2. data: train personas -> training examples, dev personas -> held-out examples
    config = data_config(args, training_args.seed)
    train_ex, train_stats = load_examples(args.dataset_path, args.train_split, task, config, args.max_personas,
                                          args.max_train_examples)
    eval_ex, eval_stats = load_examples(args.dataset_path, args.eval_split, task, config, args.max_personas,
                                        args.max_eval_examples)
    if not train_ex:
        raise ValueError(f"{args.dataset_path}: no {task} examples in split {args.train_split!r} "
                         f"(stats {train_stats}); lower pattern_threshold or min_recall")
    print(f"{task} examples: {len(train_ex)} train, {len(eval_ex)} held-out ({args.eval_split})")

    # 3. loss, 4. evaluator on the base model
    loss = CrossEntropyLoss(model)
    evaluator = make_evaluator(eval_ex, training_args.per_device_eval_batch_size)
    before = classification_metrics(model, eval_ex, labels, training_args.per_device_eval_batch_size)

    # 5. train
    trainer = CrossEncoderTrainer(
        model=model, args=training_args, train_dataset=to_dataset(train_ex),
        eval_dataset=to_dataset(eval_ex) if training_args.eval_strategy != "no" else None,
        loss=loss, evaluator=evaluator)
    started = time.perf_counter()
    train_result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    seconds = time.perf_counter() - started

    # 6. evaluate the (best) model again, 7. save
    after = classification_metrics(model, eval_ex, labels, training_args.per_device_eval_batch_size)
    trainer.save_model(str(out))  # the main process writes; the resolved arguments and results beside it
    results: dict[str, Any] = {
        "task": task, "split": args.eval_split, "labels": {str(k): v for k, v in labels.items()},
        "before": before, "after": after, "accuracy_before": before["accuracy"],
        "accuracy_after": after["accuracy"], "train_examples": len(train_ex),
        "train_loss": round(float(train_result.training_loss), 4), "train_seconds": round(seconds, 1),
        "epochs": float(training_args.num_train_epochs), "base_model": args.model_name_or_path,
        "max_length": args.max_length, "data_train": train_stats, "data_heldout": eval_stats,
    }
    if trainer.is_world_process_zero():
        save_arguments(out, script=args, training=training_args)
        atomic_write_text(out / "eval_results.json", dump_json(results))
    print(f"{task}: held-out accuracy {before['accuracy']:.4f} -> {after['accuracy']:.4f}, "
          f"macro-F1 {before['f1_macro']:.4f} -> {after['f1_macro']:.4f}")
    if training_args.push_to_hub:  # pragma: no cover - needs the Hub
        trainer.push_to_hub()
    return results
