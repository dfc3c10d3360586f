"""Evaluate and publish ReQAP's two RETRIEVE cross-encoders, declared by :data:`PATTERNS` and :data:`EVENTS`
(the release steps come from them; both cards are ``model_cards/reqap_retrieve.md``).

* training (``PATTERNS.train``, ``EVENTS.train``) launches
  training/reqap_retrieve_{task}/train_reqap_retrieve_{task}.py under ``accelerate launch`` with the profile's
  recipe on a built PerQA folder (:func:`convohub.training.runs.run_recipe`);
* :func:`evaluate` measures held-out classification accuracy and macro-F1 on examples derived from the
  ``split`` personas (the test personas for the card: unseen in training) exactly as the training run derived
  them (its saved ``training_args.json``),
  and for the events model also the retrieval recall/precision of the whole :class:`CrossEncoderRetriever`
  against the oracle on that split's RETRIEVE calls, next to BM25 alone;
* :func:`card_values` gives the card those measured numbers.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from convohub.hub import ModelCardInfo
from convohub.model_spec import Block, CardInput, CardValues, Evaluate, ModelSpec, block, profile_recipes
from convohub.perqa.dataset import REQAP_CITATION

DATASET_REPO = "perqa"
TASK_NAMES = ("events", "patterns")


def _check_task(task: str) -> str:
    if task not in TASK_NAMES:
        raise ValueError(f"unknown RETRIEVE task {task!r} (events, patterns)")
    return task


def _calls(dataset_dir: Path, split: str, max_personas: int | None) -> list[tuple[str, Any, Any, str]]:
    """(persona_id, store, oracle, query) of every RETRIEVE query of the split's gold trees."""
    from convohub.reqap.events import EventStore
    from convohub.reqap.gold_trees import OracleIndex, gold_tree_or_none
    from convohub.reqap.retrieve_data import decode_events, personas_with_questions, retrieve_queries

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

    from convohub.reqap.retrieve_pipeline import CrossEncoderRetriever
    from convohub.reqap.retrieve_training import TASKS, classification_metrics, data_config, load_examples
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
