"""CRyCHIc's three published models, declared once each (:class:`convohub.model_spec.ModelSpec`): the IFQC,
the prompt simplifier and the follow-up judge. The release's train -> evaluate -> card steps come from these.

* training launches training/crychic_{task}/train_crychic_{task}.py under ``accelerate launch`` with the
  profile's recipe on the release's training-data folder (:mod:`convohub.crychic.release_data`);
* :func:`evaluate_heldout` measures each model on the rows its run held out, *before* training (the recipe's
  encoder with a fresh head, initialised from the run's seed exactly as the script does) and *after* (the
  saved folder, loaded with ``from_pretrained(..., trust_remote_code=True)`` as a Hub user would), with
  :func:`convohub.crychic.training.evaluate_rows`;
* the judge's evaluation also reconstructs the WildChatTree test split with the release's three models
  (:func:`evaluate_reconstruction`): CRyCHIc, the two ablations and the Non-Reconstructing baseline, scored
  by the tree-reconstruction metric (the same as ``evaluation/tree_reconstruction``). The judge is the
  model that decides every instruction's parent, so its card carries the system-level table, as ReQAP's event
  cross-encoder card carries the whole RETRIEVE pipeline's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from convohub.hub import ModelCardInfo, markdown_table
from convohub.model_spec import Block, CardInput, CardValues, ModelSpec, block, profile_recipes

DATASET_REPO = "wildchat-tree"
TASKS = ("ifqc", "simplifier", "judge")
#: ``CONVOHUB_CRYCHIC_EVAL_CONVERSATIONS=N``: reconstruct only the first N test conversations (smoke tests;
#: the card then says how many it used).
EVAL_CONVERSATIONS_ENV = "CONVOHUB_CRYCHIC_EVAL_CONVERSATIONS"
#: Table 1's rows that the release measures, in the paper's order (the LLM baselines are not run offline).
SYSTEMS = ("Non-Reconstructing", "CRyCHIc w/o PS", "CRyCHIc w/o IFQC", "CRyCHIc")
METRICS = ("accuracy", "precision", "recall", "f1")
TRAINING_FILE = "eval_results.json"


def _check_task(task: str) -> str:
    if task not in TASKS:
        raise ValueError(f"unknown CRyCHIc task {task!r}; known: {', '.join(TASKS)}")
    return task


# ------------------------------------------------------------------------------------------------ evaluation
def load_trained(model_dir: Path) -> tuple[Any, Any]:
    """(tokenizer, model) of a trained folder, loaded with its own saved code as from the Hub."""
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(model_dir), trust_remote_code=True)
    return AutoTokenizer.from_pretrained(str(model_dir)), model.eval()


def evaluate_heldout(task: str, model_dir: Path) -> dict[str, Any]:
    """Held-out accuracy/macro-F1 (judge: also AUC) before and after training, on the rows the run held out
    (its saved ``training_args.json`` names the folder, split, cap and seed)."""
    from transformers import set_seed

    from convohub.crychic.training import CrychicArguments, build_model, evaluate_rows, load_rows
    from convohub.training.runs import saved_arguments

    _check_task(task)
    saved = saved_arguments(model_dir)
    script, training = saved["script"], saved["training"]
    seed = int(training["seed"])
    rows = load_rows(script["dataset_path"], task, script["eval_split"], script["max_eval_examples"], seed)
    batch = int(training.get("per_device_eval_batch_size") or 32)
    known = set(CrychicArguments.__dataclass_fields__)
    set_seed(seed)  # the script seeds before building the model: the same fresh head
    fresh, tokenizer = build_model(task, CrychicArguments(**{k: v for k, v in script.items() if k in known}))
    before = evaluate_rows(task, fresh, tokenizer, rows, batch)
    tokenizer, trained = load_trained(model_dir)
    after = evaluate_rows(task, trained, tokenizer, rows, batch)
    results: dict[str, Any] = {"task": task, "split": script["eval_split"], "before": before, "after": after,
                               "base_model": script["model_name_or_path"],
                               "max_steps": int(training.get("max_steps") or -1)}
    path = Path(model_dir) / TRAINING_FILE
    if path.is_file():  # what the training run itself measured (same rows), for the record
        results["training"] = json.loads(path.read_text(encoding="utf-8"))
    return results


def _conversation_cap() -> int | None:
    value = os.environ.get(EVAL_CONVERSATIONS_ENV)
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{EVAL_CONVERSATIONS_ENV} must be a positive integer, got {value!r}")
    return int(value)


def evaluate_reconstruction(tree_dir: Path, ifqc_dir: Path, simplifier_dir: Path, judge_dir: Path, *,
                            max_conversations: int | None = None) -> dict[str, Any]:
    """Table 1's measured rows on the WildChatTree test split: per system the scores over all turns and
    without first turns (micro and per-conversation macro), how many turns each rule decided, and the time."""
    import time

    import torch

    from convohub.crychic.components import load_components
    from convohub.crychic.evaluate import evaluate_trees, load_trees
    from convohub.crychic.reconstruct import Crychic, NonReconstructing

    trees = load_trees(tree_dir)
    total = len(trees)
    trees = trees[:max_conversations] if max_conversations else trees
    ifqc, simplifier, judge = load_components(ifqc_dir, simplifier_dir, judge_dir)
    makers = {
        "Non-Reconstructing": NonReconstructing,
        "CRyCHIc w/o PS": lambda: Crychic(ifqc=ifqc, simplifier=None, judge=judge),
        "CRyCHIc w/o IFQC": lambda: Crychic(ifqc=None, simplifier=simplifier, judge=judge),
        "CRyCHIc": lambda: Crychic(ifqc=ifqc, simplifier=simplifier, judge=judge),
    }
    systems: dict[str, Any] = {}
    # one turn at a time through small encoders: a second torch thread only waits for a shared core (the tiny
    # models' tests ran 75 times slower with two threads on a busy 2-core machine, see tests/_crychic_tiny.py)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for name, make in makers.items():
            started = time.perf_counter()
            result = evaluate_trees(trees, make)
            systems[name] = {"scores": result["scores"], "rules": result["rules"],
                             "seconds": round(time.perf_counter() - started, 1)}
    finally:
        torch.set_num_threads(threads)
    return {"split": "test", "conversations": len(trees), "conversations_in_split": total,
            "turns": sum(len(t["turns"]) for t in trees), "judge_architecture": judge.architecture,
            "systems": systems}


def evaluate_judge(model_dir: Path, tree_dir: Path, models: Mapping[str, Path]) -> dict[str, Any]:
    """The judge's held-out numbers, and the reconstruction table when the release trained the other two."""
    results = evaluate_heldout("judge", model_dir)
    if IFQC.name in models and SIMPLIFIER.name in models:
        results["reconstruction"] = evaluate_reconstruction(
            tree_dir, models[IFQC.name], models[SIMPLIFIER.name], model_dir, max_conversations=_conversation_cap())
    return results


# ------------------------------------------------------------------------------------------------ card
def _metric(dataset_name: str, dataset_id: str, config: str, split: str, metric: str, name: str, value: float,
            task_type: str) -> Any:
    from huggingface_hub import EvalResult

    return EvalResult(task_type=task_type, dataset_name=dataset_name, dataset_type=dataset_id,
                      dataset_config=config, dataset_split=split, metric_type=metric, metric_name=name,
                      metric_value=value)


def card_results(results: Mapping[str, Any], dataset_id: str) -> list[Any]:
    """The model-index entries: the trained model's held-out numbers, and CRyCHIc's reconstruction scores."""
    task, after = results["task"], results["after"]
    kind = "text-classification"
    heldout = ("crychic-training-data", f"{dataset_id}-training-data", task, results["split"])
    out = [_metric(*heldout, "accuracy", f"Held-out accuracy ({task})", after["accuracy"], kind),
           _metric(*heldout, "f1", f"Held-out macro-F1 ({task})", after["f1_macro"], kind)]
    recon = results.get("reconstruction")
    if recon:
        scores = recon["systems"]["CRyCHIc"]["scores"]["all_turns"]
        out += [_metric(DATASET_REPO, dataset_id, "trees", recon["split"], m, f"CRyCHIc parent {m} (micro)",
                        scores[m], "other") for m in METRICS]
    return out


def _score_rows(recon: Mapping[str, Any], turns: str, prefix: str = "") -> str:
    lines = []
    for name in SYSTEMS:
        scores = recon["systems"][name]["scores"][turns]
        lines.append(f"| {name} | " + " | ".join(f"{scores[prefix + m]:.3f}" for m in METRICS) + " |")
    return "\n".join(lines)


def _before_after_rows(results: Mapping[str, Any]) -> str:
    before, after = results["before"], results["after"]
    keys = ["accuracy", "f1_macro"] + (["auc"] if results["task"] == "judge" else [])
    keys += sorted(k for k in after if k.startswith("recall_"))
    return "\n".join(f"| {k} | {before.get(k)} | {after.get(k)} |" for k in keys)


def card_values(card: CardInput) -> CardValues:
    """The card's metadata and values: the measured numbers, the base model the run's arguments name."""
    from convohub.training.models import hub_id
    from convohub.training.runs import saved_arguments

    results = card.results
    task = _check_task(results["task"])
    saved = saved_arguments(card.model_dir)
    base = str(saved["script"]["model_name_or_path"])
    base_model = hub_id(base) or base
    info = ModelCardInfo(
        license="mit", pipeline_tag="text-classification", base_model=base_model, datasets=(card.dataset_id,),
        tags=("convohub", "crychic", "wildchat-tree", "chat-tree-reconstruction", task), library_name="transformers",
        results=tuple(card_results(results, card.dataset_id)))
    train = results.get("training") or {}
    steps = results.get("max_steps", -1)
    values: dict[str, Any] = {
        "task": task, "what": Block(f"what_{task}"), "base_model": base_model,
        "split": results["split"], "units": results["after"]["units"], "examples": results["after"]["examples"],
        "before_after_rows": _before_after_rows(results),
        "train_examples": train.get("train_examples", "?"), "train_seconds": train.get("train_seconds", "?"),
        "data_produced_by": train.get("data_produced_by") or "?",
        "steps": block(steps > 0, "smoke_steps"), "max_steps": steps,
        "reconstruction": block("reconstruction" in results, "reconstruction"),
        "limitations": block(card.tiny, "limitations_tiny", "limitations_paper"),
        "ifqc_repo_id": card.target.repo_id(IFQC.repo_name(card.profile)),
        "simplifier_repo_id": card.target.repo_id(SIMPLIFIER.repo_name(card.profile)),
        "judge_repo_id": card.target.repo_id(JUDGE.repo_name(card.profile)),
    }
    recon = results.get("reconstruction")
    if recon:
        values |= {"conversations": recon["conversations"], "conversations_in_split": recon["conversations_in_split"],
                   "turns": recon["turns"], "judge_architecture": recon["judge_architecture"],
                   "recon_all_micro": _score_rows(recon, "all_turns"),
                   "recon_all_macro": _score_rows(recon, "all_turns", "macro_"),
                   "recon_later_micro": _score_rows(recon, "without_first_turns"),
                   "recon_table": markdown_table(["system", "seconds"],
                                                 [[n, recon["systems"][n]["seconds"]] for n in SYSTEMS])}
    return info, values


def _spec(task: str, paper_repo: str) -> ModelSpec:
    folder = f"training/crychic_{task}"
    return ModelSpec(
        name=f"crychic_{task}",
        script=f"{folder}/train_crychic_{task}.py",
        recipes=profile_recipes(folder, "tiny", "paper"),
        repos={"tiny": f"crychic-{task}-tiny", "paper": paper_repo},
        dataset=DATASET_REPO,
        template="crychic",
        card_values=card_values,
        evaluate=(lambda model_dir, _dataset_dir, _models: evaluate_heldout(task, model_dir)) if task != "judge"
        else evaluate_judge,
        uses=("crychic_ifqc", "crychic_simplifier") if task == "judge" else (),
    )


IFQC = _spec("ifqc", "crychic-ifqc-roberta-base")
SIMPLIFIER = _spec("simplifier", "crychic-simplifier-gte-base")
JUDGE = _spec("judge", "crychic-judge-gte-large")
#: In release order: the judge's evaluation reconstructs trees with the two models trained before it.
MODELS = (IFQC, SIMPLIFIER, JUDGE)
