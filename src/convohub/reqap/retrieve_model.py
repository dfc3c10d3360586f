"""Train, evaluate and publish ReQAP's two RETRIEVE cross-encoders (release helpers; the release steps
wire them). Mirrors :mod:`convohub.reqap.extract_model`.

* :func:`train` launches training/reqap_retrieve_{task}/train_reqap_retrieve_{task}.py under ``accelerate
  launch`` with the profile's recipe on a built PerQA folder (:func:`convohub.training.runs.run_recipe`);
* :func:`evaluate` measures held-out classification accuracy and macro-F1 on examples derived from the
  ``split`` personas (the test personas for the card: unseen in training) exactly as the training run derived
  them (its saved ``training_args.json``),
  and for the events model also the retrieval recall/precision of the whole :class:`CrossEncoderRetriever`
  against the oracle on that split's RETRIEVE calls, next to BM25 alone;
* :func:`publish` writes the model repo with a card carrying those measured numbers.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from convohub.hub import HubTarget, MetricResult, ModelCardInfo, write_model
from convohub.perqa.dataset import REQAP_CITATION

DATASET_REPO = "perqa"
TASK_NAMES = ("events", "patterns")


def _check_task(task: str) -> str:
    if task not in TASK_NAMES:
        raise ValueError(f"unknown RETRIEVE task {task!r} (events, patterns)")
    return task


def script_path(task: str) -> Path:
    return Path("training") / f"reqap_retrieve_{_check_task(task)}" / f"train_reqap_retrieve_{task}.py"


def model_name(profile: str, task: str) -> str:
    return f"reqap-retrieve-{_check_task(task)}-" + ("tiny" if profile == "tiny" else "minilm-l12")


def recipe_path(repo: Path, profile: str, task: str) -> Path:
    return Path(repo) / "training" / f"reqap_retrieve_{_check_task(task)}" / f"{profile}.yaml"


def train(repo: Path, profile: str, dataset_dir: Path, output_dir: Path, seed: int, task: str, *,
          recipe: Path | None = None, extra: tuple[str, ...] = ()) -> Path:
    """Launch the task's training script with the profile's recipe (or ``recipe``; ``extra``: more CLI
    overrides) on the built PerQA folder; returns the trained model folder (with the script's
    ``eval_results.json`` and ``training_args.json``)."""
    from convohub.training.runs import run_recipe

    config = recipe if recipe is not None else recipe_path(repo, profile, task)
    return run_recipe(Path(repo) / script_path(task), config, Path(dataset_dir), Path(output_dir), seed,
                      profile=profile, extra=extra)


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


def _metric(results: dict[str, Any], dataset_id: str, metric: str, name: str, value: float,
            task_type: str = "text-classification") -> MetricResult:
    return MetricResult(task_type=task_type, dataset_name="perqa", dataset_type=dataset_id,
                        dataset_config="questions", dataset_split=results["split"], metric_type=metric,
                        metric_name=name, value=value)


def card_results(results: dict[str, Any], dataset_id: str) -> list[MetricResult]:
    """The model-index entries: exactly the measured numbers of ``results``."""
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


def _evaluation_text(results: dict[str, Any]) -> str:
    task = results["task"]
    labels = [results["labels"][k] for k in sorted(results["labels"], key=int)]
    per_class = " ".join(f"| {n} | {results.get(f'examples_{n}')} | {results.get(f'recall_{n}')} |" + "\n"
                         for n in labels)
    text = (f"Measured by `convohub.reqap.retrieve_model.evaluate` on {results['examples']} {task} examples "
            f"derived from the `{results['split']}` personas (unseen in training): accuracy "
            f"**{results['accuracy']}**, macro-F1 **{results['f1_macro']}**.\n\n"
            f"| class | examples | recall |\n|---|---|---|\n{per_class}")
    train = results.get("training")
    if train:
        text += (f"\nDuring training (`{train['split']}` personas, {train['after']['examples']} examples): "
                 f"accuracy {train['accuracy_before']} before -> {train['accuracy_after']} after, macro-F1 "
                 f"{train['before']['f1_macro']} -> {train['after']['f1_macro']} "
                 f"({train['train_examples']} training examples, {train['epochs']:g} epoch(s)).\n")
    r = results.get("retrieval")
    if r:
        note = (f" On {r['calls_estimated']} calls more than {r['max_classified']} candidates reached the event "
                "cross-encoder; there a seeded sample stratified by gold/non-gold was classified and its "
                "acceptance rates scaled to the whole group.") if r["calls_estimated"] else ""
        pattern = ("with the pattern cross-encoder as step 3" if r["pattern_model"] else
                   "without a pattern model (every pattern partial)")
        text += (f"\nWhole RETRIEVE pipeline ({pattern}) against the oracle's gold events on {r['calls']} RETRIEVE "
                 f"calls of the gold trees (of {r['calls_in_split']}), macro-averaged per call:\n\n"
                 "| retriever | recall | precision | F1 | events returned (mean) |\n|---|---|---|---|---|\n"
                 f"| BM25 alone (first stage) | {r['bm25_recall']} | {r['bm25_precision']} | {r['bm25_f1']} | "
                 f"{r['candidates']} |\n"
                 f"| BM25 + patterns + event cross-encoder | {r['pipeline_recall']} | {r['pipeline_precision']} | "
                 f"{r['pipeline_f1']} | {r['returned']} |\n\nMean gold events per call: {r['gold']}.{note}")
    return text


def publish(target: HubTarget, profile: str, model_dir: Path, results: dict[str, Any], recipe: Path) -> Path:
    """Write the model repo (the task is ``results["task"]``) with a card carrying the measured numbers."""
    task = _check_task(results["task"])
    name = model_name(profile, task)
    dataset_id = target.repo_id(DATASET_REPO)
    from convohub.training.models import hub_id
    from convohub.training.runs import saved_arguments

    base = str(saved_arguments(model_dir)["script"]["model_name_or_path"])
    base_model = hub_id(base) or base
    what = ("whether one candidate event (its `key: json(value)` lines) matches a RETRIEVE query: 2 classes, "
            "irrelevant / relevant" if task == "events" else
            "whether a key-value pattern of the candidate pool (`source: calendar, summary: ...`, or a whole "
            "source) is relevant, irrelevant or partially relevant to a RETRIEVE query: 3 classes")
    description = (
        f"The {task} cross-encoder of ReQAP's RETRIEVE operator (*Recursive Question Understanding for Complex "
        "Question Answering over Heterogeneous Personal Data*): it classifies " + what + ". Trained on examples "
        f"derived from the gold operator trees of [`{dataset_id}`](https://huggingface.co/datasets/{dataset_id}) "
        "(train personas) by `convohub.reqap.retrieve_data`: per RETRIEVE call with BM25 recall >= 0.5, gold "
        "events from the oracle as positives, hard (BM25) and random (inverse source frequency) negatives, and "
        "frequent key-value patterns plus source patterns labelled by all events they match. Base model: "
        f"`{base_model}` with a new classification head. Trained by `{script_path(task).as_posix()}` with the "
        f"`{recipe.name}` recipe (sentence-transformers `CrossEncoderTrainer`, cross-entropy)."
    )
    usage = (
        "```python\nfrom sentence_transformers.cross_encoder import CrossEncoder\n"
        "from convohub.reqap import EventStore, Executor\n"
        "from convohub.reqap.retrieve_pipeline import CrossEncoderRetriever\n\n"
        f'model = CrossEncoder("{target.repo_id(name)}")  # id2label: {results["labels"]}\n'
        + ('print(model.predict([("I did a workout", "source: \\"workout\\"\\nworkout_type: \\"running\\"")]))\n'
           if task == "events" else 'print(model.predict([("I did a workout", "source: workout")]))\n')
        + f'retriever = CrossEncoderRetriever(event_model="{target.repo_id(model_name(profile, "events"))}",\n'
        f'                                  pattern_model="{target.repo_id(model_name(profile, "patterns"))}")\n'
        "# Executor(EventStore.from_records(events), retriever=retriever).execute(tree)\n```"
    )
    limitations = (
        f"The tiny profile demonstrates the pipeline: {results['training'].get('epochs', '?')} epoch(s) of CPU "
        f"training on {results['training'].get('train_examples', '?')} examples from all-MiniLM-L6-v2 (not a "
        "cross-encoder checkpoint); its classifications are weak (see the measured numbers above)."
        if profile == "tiny"
        else "Trained on synthetic personas and convohub's gold trees' query wording; real personal data and "
             "other query phrasings may behave differently.")
    card = ModelCardInfo(
        license="mit",
        description=description,
        pipeline_tag="text-classification",
        base_model=base_model,
        datasets=(dataset_id,),
        tags=("convohub", "reqap", "perqa", "cross-encoder", "retrieval", task),
        library_name="sentence-transformers",
        results=tuple(card_results(results, dataset_id)),
        citation=REQAP_CITATION,
        sections={"Usage": usage, "Evaluation": _evaluation_text(results),
                  "Training recipe": f"```yaml\n{Path(recipe).read_text(encoding='utf-8')}```",
                  "Data licence": f"The training data, [`{dataset_id}`](https://huggingface.co/datasets/"
                                  f"{dataset_id}), is CC BY 4.0; the code and this model are MIT.",
                  "Limitations": limitations},
    )
    return write_model(target, name, Path(model_dir), card)
