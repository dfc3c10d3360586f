"""The two RETRIEVE cross-encoders in the release: training, evaluation and cards, declared by
:data:`PATTERNS` and :data:`EVENTS` (both cards are ``model_cards/reqap_retrieve.md``).

* training (``PATTERNS.train``, ``EVENTS.train``) launches
  training/reqap_retrieve_{task}/train_reqap_retrieve_{task}.py under ``accelerate launch`` with the
  profile's recipe on a built PerQA folder (:func:`convohub.training.runs.run_recipe`); each script is a
  thin ``main(argv)`` calling :func:`run` with its task. The steps follow sentence-transformers'
  cross-encoder training: a ``CrossEncoder`` with ``num_labels`` and ``id2label`` set (2 classes for events,
  3 for patterns) -> examples derived from PerQA by :mod:`convohub.reqap.data.retrieve` (train personas for
  training, dev personas held out) -> cross-entropy loss -> the held-out classification evaluator run on the
  base model -> ``CrossEncoderTrainer`` -> the same evaluator after training, so the gain is measured ->
  save;
* :func:`evaluate` measures held-out classification accuracy and macro-F1 on examples derived from the
  ``split`` personas (the test personas for the card: unseen in training) exactly as the training run
  derived them (its saved ``training_args.json``), and for the events model also the retrieval
  recall/precision of the whole :class:`~convohub.reqap.components.retrieve.CrossEncoderRetriever` against
  the oracle on that split's RETRIEVE calls, next to BM25 alone;
* :func:`card_values` gives the card those measured numbers.

Heavy imports happen inside functions.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convohub.hub import ModelCardInfo, atomic_write_text, dump_json
from convohub.model_spec import Block, CardInput, CardValues, Evaluate, ModelSpec, block, profile_recipes
from convohub.perqa.dataset import REQAP_CITATION
from convohub.reqap.components.retrieve import EVENT_LABELS, PATTERN_LABELS
from convohub.reqap.data.retrieve import Example, RetrieveDataConfig

__all__ = [
    "RetrieveArguments", "TASKS", "classification_metrics", "data_config", "load_examples",
    "make_evaluator", "make_parser", "run", "select_examples"
]

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
    from convohub.reqap.data.retrieve import derive_from_dataset

    if task not in TASKS:
        raise ValueError(f"unknown RETRIEVE task {task!r} (events, patterns)")
    data = derive_from_dataset(dataset_path, split, config, max_personas=max_personas)
    examples = data.events if task == "events" else data.patterns
    return select_examples(examples, limit, config.seed), data.stats


def to_dataset(examples: Sequence[Example]) -> Any:
    import datasets

    from convohub.reqap.data.retrieve import to_rows

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


DATASET_REPO = "perqa"


TASK_NAMES = ("events", "patterns")


def _check_task(task: str) -> str:
    if task not in TASK_NAMES:
        raise ValueError(f"unknown RETRIEVE task {task!r} (events, patterns)")
    return task


def _calls(dataset_dir: Path, split: str, max_personas: int | None) -> list[tuple[str, Any, Any, str]]:
    """(persona_id, store, oracle, query) of every RETRIEVE query of the split's gold trees."""
    from convohub.reqap.data.gold import OracleIndex, gold_tree_or_none
    from convohub.reqap.data.retrieve import decode_events, personas_with_questions, retrieve_queries
    from convohub.reqap.engine.events import EventStore

    out = []
    for persona_id, observable, canonical, questions in itertools.islice(
            personas_with_questions(dataset_dir, split), max_personas):
        queries: dict[str, None] = {}
        for q in questions:
            tree = gold_tree_or_none(q)
            if tree is not None:
                queries.update(dict.fromkeys(retrieve_queries(tree)))
        if not queries:
            continue
        store = EventStore.from_records(observable)
        oracle = OracleIndex(observable, decode_events(canonical))
        out += [(persona_id, store, oracle, query) for query in queries]
    return out


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


def retrieval_metrics(retriever: Any, dataset_dir: Path, split: str = "test", *, max_personas: int | None = None,
                      max_calls: int | None = None, max_classified: int | None = None,
                      seed: int = 0) -> dict[str, Any]:
    """Recall/precision (macro over RETRIEVE calls) of ``retriever`` (a :class:`CrossEncoderRetriever`) and of
    its first stage alone, against the oracle's gold ids, on the gold trees' calls of ``split``.

    ``max_calls``: a seeded sample of calls. ``max_classified``: when more candidates than this reach the event
    cross-encoder, a seeded sample stratified by gold/non-gold is classified and its acceptance rates are
    scaled to the whole group (the result counts such ``calls_estimated``); None classifies everything.
    """
    from convohub.perqa.vocab import derive_rng

    calls = _calls(dataset_dir, split, max_personas)
    total_calls = len(calls)
    rng = derive_rng(seed, "retrieve-eval", split)
    if max_calls is not None and len(calls) > max_calls:
        calls = [calls[i] for i in sorted(rng.sample(range(len(calls)), max_calls))]
    rows: list[dict[str, float]] = []
    estimated = classified = no_gold = 0
    for _persona_id, store, oracle, query in calls:
        gold = set(oracle.ids(query))
        if not gold:
            no_gold += 1
            continue
        retriever.traces.clear()
        plan = retriever.plan(query, store)
        cand = set(plan.candidates)
        bm25_tp = len(cand & gold)
        kept_tp = len(plan.kept & gold)
        rem_gold = [i for i in plan.remaining if i in gold]
        rem_other = [i for i in plan.remaining if i not in gold]
        if max_classified is not None and len(plan.remaining) > max_classified:
            estimated += 1
            k_gold = min(len(rem_gold), max(1, round(max_classified * len(rem_gold) / len(plan.remaining))))
            k_other = min(len(rem_other), max_classified - k_gold)
            sample_gold, sample_other = rng.sample(rem_gold, k_gold), rng.sample(rem_other, k_other)
        else:
            sample_gold, sample_other = rem_gold, rem_other
        accepted = retriever.classify_events(query, store, sample_gold + sample_other)
        classified += len(sample_gold) + len(sample_other)
        tp_ce = len(rem_gold) * (len(accepted & set(sample_gold)) / len(sample_gold)) if sample_gold else 0.0
        fp_ce = len(rem_other) * (len(accepted & set(sample_other)) / len(sample_other)) if sample_other else 0.0
        tp = kept_tp + tp_ce
        returned = len(plan.kept) + tp_ce + fp_ce
        rows.append({"bm25_recall": bm25_tp / len(gold), "bm25_precision": bm25_tp / len(cand) if cand else 0.0,
                     "pipeline_recall": tp / len(gold), "pipeline_precision": tp / returned if returned else 0.0,
                     "candidates": len(cand), "returned": returned, "gold": len(gold)})
    if not rows:
        raise ValueError(f"{dataset_dir}: no RETRIEVE call with gold events in split {split!r}")
    out: dict[str, Any] = {k: round(sum(r[k] for r in rows) / len(rows), 4) for k in rows[0]}
    out["bm25_f1"] = round(sum(_f1(r["bm25_precision"], r["bm25_recall"]) for r in rows) / len(rows), 4)
    out["pipeline_f1"] = round(sum(_f1(r["pipeline_precision"], r["pipeline_recall"]) for r in rows) / len(rows), 4)
    out |= {"calls": len(rows), "calls_in_split": total_calls, "calls_without_gold": no_gold,
            "calls_estimated": estimated, "classified_events": classified, "max_classified": max_classified}
    return out


def evaluate(model_dir: Path, dataset_dir: Path, split: str = "test", *, task: str,
             seed: int | None = None, pattern_model_dir: Path | None = None,
             max_examples: int | None = 1000, max_personas: int | None = None, max_calls: int | None = 30,
             max_classified: int | None = 100) -> dict[str, Any]:
    """Held-out accuracy/macro-F1 of a trained cross-encoder on ``split`` (personas unseen in training).

    Examples are derived like the training run's (its derivation settings and seed, read from the
    ``training_args.json`` it saved, so CLI overrides count; ``seed`` overrides the seed; a seeded sample of
    ``max_examples``). For ``task="events"`` the whole pipeline (``pattern_model_dir`` as its
    pattern step, else every pattern counts as partial) is also scored against the oracle with
    :func:`retrieval_metrics`, next to BM25 alone.
    """
    from sentence_transformers.cross_encoder import CrossEncoder

    from convohub.reqap.components.retrieve import CrossEncoderRetriever
    from convohub.training.runs import saved_arguments

    _check_task(task)
    arguments = saved_arguments(model_dir)
    seed = int(arguments["training"]["seed"]) if seed is None else seed
    config = data_config(arguments["script"], seed)
    examples, stats = load_examples(dataset_dir, split, task, config, max_personas, max_examples)
    model = CrossEncoder(str(model_dir))
    results: dict[str, Any] = {"task": task, "split": split, "labels": dict(model.config.id2label),
                               **classification_metrics(model, examples, TASKS[task]), "data": stats}
    if task == "events":
        retriever = CrossEncoderRetriever(model, pattern_model_dir, first_stage_threshold=config.first_stage_threshold,
                                          pattern_threshold=config.pattern_threshold, event_max_length=None,
                                          pattern_max_length=None)
        results["retrieval"] = retrieval_metrics(retriever, dataset_dir, split, max_personas=max_personas,
                                                 max_calls=max_calls, max_classified=max_classified, seed=seed)
        results["retrieval"]["pattern_model"] = pattern_model_dir is not None
    training = Path(model_dir) / "eval_results.json"
    if training.is_file():  # the training script's dev numbers, before and after training
        results["training"] = json.loads(training.read_text(encoding="utf-8"))
    return results


def _metric(results: Mapping[str, Any], dataset_id: str, metric: str, name: str, value: float,
            task_type: str = "text-classification") -> Any:
    from huggingface_hub import EvalResult

    return EvalResult(task_type=task_type, dataset_name=DATASET_REPO, dataset_type=dataset_id,
                      dataset_config="questions", dataset_split=results["split"], metric_type=metric,
                      metric_name=name, metric_value=value)


def card_results(results: Mapping[str, Any], dataset_id: str) -> list[Any]:
    """The model-index entries (``EvalResult``): exactly the measured numbers of ``results``."""
    task = results["task"]
    out = [_metric(results, dataset_id, "accuracy", f"Accuracy ({task})", results["accuracy"]),
           _metric(results, dataset_id, "f1", f"Macro-F1 ({task})", results["f1_macro"])]
    if "retrieval" in results:
        r = results["retrieval"]
        out += [_metric(results, dataset_id, "recall", "RETRIEVE recall vs oracle (pipeline)", r["pipeline_recall"],
                        task_type="text-retrieval"),
                _metric(results, dataset_id, "precision", "RETRIEVE precision vs oracle (pipeline)", r["pipeline_precision"],
                        task_type="text-retrieval"),
                _metric(results, dataset_id, "recall", "RETRIEVE recall vs oracle (BM25 alone)", r["bm25_recall"],
                        task_type="text-retrieval"),
                _metric(results, dataset_id, "precision", "RETRIEVE precision vs oracle (BM25 alone)", r["bm25_precision"],
                        task_type="text-retrieval")]
    return out


def card_values(card: CardInput) -> CardValues:
    """The card's metadata and values (the task is ``results["task"]``): the measured numbers, and the base
    model the run's saved arguments name."""
    from convohub.training.models import hub_id
    from convohub.training.runs import saved_arguments

    results = card.results
    task = _check_task(results["task"])
    base = str(saved_arguments(card.model_dir)["script"]["model_name_or_path"])
    base_model = hub_id(base) or base
    info = ModelCardInfo(
        license="mit",
        pipeline_tag="text-classification",
        base_model=base_model,
        datasets=(card.dataset_id,),
        tags=("convohub", "reqap", "perqa", "cross-encoder", "retrieval", task),
        library_name="sentence-transformers",
        results=tuple(card_results(results, card.dataset_id)),
    )
    labels = [results["labels"][k] for k in sorted(results["labels"], key=int)]
    train, r = results.get("training") or {}, results.get("retrieval")
    epochs = train.get("epochs", "?")
    values: dict[str, Any] = {
        "task": task, "what": Block(f"what_{task}"), "base_model": base_model, "labels": results["labels"],
        "predict": Block(f"predict_{task}"),
        **{f"{t}_repo_id": card.target.repo_id(SPECS[t].repo_name(card.profile)) for t in TASK_NAMES},
        **{k: results[k] for k in ("examples", "split", "accuracy", "f1_macro")},
        "class_rows": "\n".join(f"| {n} | {results.get(f'examples_{n}')} | {results.get(f'recall_{n}')} |"
                                 for n in labels),
        "training": block(bool(train), "training"),
        "epochs": format(epochs, "g") if isinstance(epochs, (int, float)) else epochs,
        "train_examples": train.get("train_examples", "?"),
        "retrieval": block(bool(r), "retrieval"),
        "limitations": block(card.tiny, "limitations_tiny", "limitations_paper"),
        "citation": REQAP_CITATION.strip(),
    }
    if train:
        values |= {"training_split": train["split"], "training_examples": train["after"]["examples"],
                   "accuracy_before": train["accuracy_before"], "accuracy_after": train["accuracy_after"],
                   "f1_macro_before": train["before"]["f1_macro"], "f1_macro_after": train["after"]["f1_macro"]}
    if r:
        values |= {k: r[k] for k in ("calls", "calls_in_split", "bm25_recall", "bm25_precision", "bm25_f1",
                                     "candidates", "pipeline_recall", "pipeline_precision", "pipeline_f1",
                                     "returned", "gold", "calls_estimated", "max_classified")}
        values |= {"pattern_step": block(r["pattern_model"], "with_patterns", "without_patterns"),
                   "estimated": block(bool(r["calls_estimated"]), "estimated")}
    return info, values


def _spec(task: str, evaluate_task: Evaluate, uses: tuple[str, ...] = ()) -> ModelSpec:
    folder = f"training/reqap_retrieve_{task}"
    return ModelSpec(
        name=f"reqap_retrieve_{task}",
        script=f"{folder}/train_reqap_retrieve_{task}.py",
        recipes=profile_recipes(folder, "tiny", "paper"),
        repos={"tiny": f"reqap-retrieve-{task}-tiny", "paper": f"reqap-retrieve-{task}-minilm-l12"},
        dataset=DATASET_REPO,
        template="reqap_retrieve",
        card_values=card_values,
        evaluate=evaluate_task,
        uses=uses,
        headline=("accuracy", "f1_macro"),
    )


#: The pattern model (3 classes); the event model (2 classes), evaluated in the whole RETRIEVE pipeline with
#: the pattern model the release trained as its pattern step.
PATTERNS = _spec("patterns", lambda model_dir, dataset_dir, _models: evaluate(model_dir, dataset_dir, "test",
                                                                              task="patterns"))


EVENTS = _spec("events", lambda model_dir, dataset_dir, models: evaluate(
    model_dir, dataset_dir, "test", task="events", pattern_model_dir=models.get(PATTERNS.name)),
    uses=(PATTERNS.name,))


SPECS = {"patterns": PATTERNS, "events": EVENTS}
