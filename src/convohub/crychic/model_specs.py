"""CRyCHIc's three published models, declared once each (:class:`convohub.model_spec.ModelSpec`): the IFQC,
the prompt simplifier and the follow-up judge. The release's train -> evaluate -> card steps come from these.

* training launches training/crychic_{task}/train_crychic_{task}.py under ``accelerate launch`` with the
  profile's recipe on the release's training-data folder (:mod:`convohub.crychic.release_data`);
* :func:`evaluate_heldout` reports each model on the rows its run held out, *before* training (the recipe's
  encoder with a fresh head, initialised from the run's seed) and *after*, as the training run scored them
  (once, with :func:`convohub.crychic.training.evaluate_rows`), and checks that the saved folder reloads
  with ``from_pretrained(..., trust_remote_code=True)`` as a Hub user would;
* the judge's evaluation also reconstructs the WildChatTree test split with the release's three models
  (:func:`evaluate_reconstruction`): CRyCHIc, the two ablations and the Non-Reconstructing baseline, scored
  by the tree-reconstruction metric (the same as ``evaluation/tree_reconstruction``). The judge is the
  model that decides every instruction's parent, so its card carries the system-level table, as ReQAP's event
  cross-encoder card carries the whole RETRIEVE pipeline's;
* the paper's LLM baseline runs in a step of its own through the release's LLM
  (:func:`evaluate_llm_baseline`, on the first test conversations: an LLM turn by turn is slow), and its row
  joins the judge card's table with CRyCHIc's scores on the same conversations beside it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from convohub.hub import ModelCardInfo, markdown_table
from convohub.model_spec import Block, CardInput, CardValues, ModelSpec, block, profile_recipes
from convohub.registry import positive_int_setting

DATASET_REPO = "wildchat-tree"
TASKS = ("ifqc", "simplifier", "judge")
#: ``CONVOHUB_CRYCHIC_EVAL_CONVERSATIONS=N``: reconstruct only the first N test conversations (smoke tests;
#: the card then says how many it used).
EVAL_CONVERSATIONS_ENV = "CONVOHUB_CRYCHIC_EVAL_CONVERSATIONS"
#: Table 1's rows that the release measures on every test conversation, in the paper's order (the LLM
#: baseline comes first, on a subset: :func:`evaluate_llm_baseline`).
SYSTEMS = ("Non-Reconstructing", "CRyCHIc w/o PS", "CRyCHIc w/o IFQC", "CRyCHIc")
#: ``CONVOHUB_CRYCHIC_LLM_CONVERSATIONS=N``: test conversations the LLM baseline reconstructs (default
#: :data:`LLM_CONVERSATIONS`, what fits the release's time budget with the offline SmolLM2 on 2 CPU cores: the
#: first 32 of the tiny build's 100 hold 265 turns, 54.8 s on one thread, 2026-12-01; the first 8 hold 62,
#: too few to compare the baseline with CRyCHIc; all 100 would add about 3.5 minutes to the release's side that
#: runs CRyCHIc, which it does not have)
LLM_CONVERSATIONS_ENV = "CONVOHUB_CRYCHIC_LLM_CONVERSATIONS"
LLM_CONVERSATIONS = 32
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
    # the tokenizer loader reads config.json too: without trust_remote_code it would stop to ask in a terminal
    return AutoTokenizer.from_pretrained(str(model_dir), trust_remote_code=True), model.eval()


def check_reload(model_dir: Path) -> dict[str, Any]:
    """Load a trained folder as a Hub user would (``from_pretrained(..., trust_remote_code=True)``) and check
    that every saved weight found its place: a missing or unexpected key (a class that saved what it cannot
    load) stops the release here, before a card is published for it."""
    from transformers import AutoModel

    model, info = AutoModel.from_pretrained(str(model_dir), trust_remote_code=True, output_loading_info=True)
    record = {"class": type(model).__name__, "trust_remote_code": True,
              "missing_keys": sorted(info.get("missing_keys") or []),
              "unexpected_keys": sorted(info.get("unexpected_keys") or []),
              "mismatched_keys": sorted(str(k) for k in info.get("mismatched_keys") or []),
              "tensors": len(model.state_dict())}
    if record["missing_keys"] or record["unexpected_keys"] or record["mismatched_keys"]:
        raise RuntimeError(f"{model_dir}: reloading the saved model left weights out (missing "
                           f"{record['missing_keys']}, unexpected {record['unexpected_keys']}, mismatched "
                           f"{record['mismatched_keys']}); its model class does not load what it saves")
    return record


def evaluate_heldout(task: str, model_dir: Path) -> dict[str, Any]:
    """Held-out accuracy/macro-F1 (judge: also AUC) before and after training, on the rows the run held out.

    The training run scores those rows before and after training (``eval_results.json``, the same rows and
    seed), so they are scored once: this takes its numbers and checks that the saved folder reloads as a Hub
    user loads it (:func:`check_reload`). A folder trained elsewhere, without that file, is scored here: the
    recipe's encoder with the run's fresh head (its saved ``training_args.json`` names folder, split, cap and
    seed) and the saved model."""
    from convohub.training.runs import saved_arguments

    _check_task(task)
    saved = saved_arguments(model_dir)
    script, training = saved["script"], saved["training"]
    results: dict[str, Any] = {"task": task, "split": script["eval_split"], "base_model": script["model_name_or_path"],
                               "max_steps": int(training.get("max_steps") or -1)}
    path = Path(model_dir) / TRAINING_FILE
    measured = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    if "before" in measured and "after" in measured:
        results |= {"before": measured["before"], "after": measured["after"], "scored_by": "training run",
                    "reload": check_reload(model_dir)}
        if measured.get("gold"):
            results["gold"] = measured["gold"]
    else:
        results |= _score_heldout(task, model_dir, script, training)
    if measured:
        results["training"] = measured
    return results


def _score_heldout(task: str, model_dir: Path, script: Mapping[str, Any], training: Mapping[str, Any]
                   ) -> dict[str, Any]:
    """Before (the recipe's encoder, fresh head from the run's seed, a cosine-residual judge calibrated on the
    run's training rows) and after (the saved folder) on the rows the run held out."""
    from transformers import set_seed

    from convohub.crychic.training import (
        CrychicArguments,
        build_model,
        calibrate_cosine,
        evaluate_rows,
        gold_rows,
        gold_scores,
        load_rows,
    )

    seed = int(training["seed"])
    rows = load_rows(script["dataset_path"], task, script["eval_split"], script["max_eval_examples"], seed)
    batch = int(training.get("per_device_eval_batch_size") or 32)
    known = set(CrychicArguments.__dataclass_fields__)
    args = CrychicArguments(**{k: v for k, v in script.items() if k in known})
    set_seed(seed)  # the script seeds before building the model: the same fresh head
    fresh, tokenizer = build_model(task, args)
    if args.cosine_residual:  # as the script does: the untrained judge is the cosine fitted to the training pairs
        train_rows = load_rows(args.dataset_path, task, args.train_split, args.max_train_examples, seed)
        calibrate_cosine(fresh, tokenizer, train_rows, batch)
    gold = gold_rows(task, args)
    before = evaluate_rows(task, fresh, tokenizer, rows, batch)
    gold_before = evaluate_rows(task, fresh, tokenizer, gold, batch) if gold else None
    tokenizer, trained = load_trained(model_dir)
    out = {"before": before, "after": evaluate_rows(task, trained, tokenizer, rows, batch), "scored_by": "evaluation"}
    if gold:
        out["gold"] = gold_scores(gold_before, evaluate_rows(task, trained, tokenizer, gold, batch))
    return out


def _conversation_cap() -> int | None:
    return positive_int_setting(EVAL_CONVERSATIONS_ENV)


def evaluate_reconstruction(tree_dir: Path, ifqc_dir: Path, simplifier_dir: Path, judge_dir: Path, *,
                            max_conversations: int | None = None) -> dict[str, Any]:
    """Table 1's measured rows on the WildChatTree test split: per system the scores over all turns and
    without first turns (micro and per-conversation macro), how many turns each rule decided, and the time."""
    import time

    import torch

    from convohub.crychic.components import load_components
    from convohub.crychic.evaluate import evaluate_trees, load_trees
    from convohub.crychic.reconstruct import (
        Crychic,
        NonReconstructing,
        resolve_implicit_threshold,
        resolve_threshold,
    )

    trees = load_trees(tree_dir)
    total = len(trees)
    trees = trees[:max_conversations] if max_conversations else trees
    ifqc, simplifier, judge = load_components(ifqc_dir, simplifier_dir, judge_dir)
    threshold, origin = resolve_threshold(judge)
    implicit, implicit_origin = resolve_implicit_threshold(judge)
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
            "threshold": threshold, "threshold_origin": origin, "implicit_threshold": implicit,
            "implicit_threshold_origin": implicit_origin, "systems": systems}


def llm_conversation_cap() -> int:
    """How many test conversations the release's LLM baseline reconstructs (:data:`LLM_CONVERSATIONS_ENV`,
    else :data:`LLM_CONVERSATIONS`), never more than the reconstruction's own cap."""
    cap = positive_int_setting(LLM_CONVERSATIONS_ENV, LLM_CONVERSATIONS)
    return min(cap, _conversation_cap() or cap)


def evaluate_llm_baseline(tree_dir: Path, folders: Mapping[str, Path], llm: Any, *,
                          max_conversations: int) -> dict[str, Any]:
    """The paper's LLM baseline (:mod:`convohub.crychic.llm_baseline`) on the first ``max_conversations`` test
    conversations through ``llm``, and CRyCHIc on the same conversations for a fair comparison; answers read
    by likelihood for a local model, else generated."""
    import time

    import torch

    from convohub.crychic.components import pipeline_factory
    from convohub.crychic.evaluate import evaluate_trees, load_trees
    from convohub.crychic.llm_baseline import default_scoring, llm_baseline_factory

    trees = load_trees(tree_dir)
    total = len(trees)
    trees = trees[:max_conversations]
    scoring = default_scoring(llm)
    make = llm_baseline_factory(llm, scoring)
    started = time.perf_counter()
    result = evaluate_trees(trees, make)
    seconds = time.perf_counter() - started
    make_crychic = pipeline_factory({"ifqc": folders[IFQC.name], "simplifier": folders[SIMPLIFIER.name],
                                     "judge": folders[JUDGE.name]})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as evaluate_reconstruction: small encoders, one turn at a time
    try:
        started_crychic = time.perf_counter()
        crychic = evaluate_trees(trees, make_crychic)
        crychic_seconds = time.perf_counter() - started_crychic
    finally:
        torch.set_num_threads(threads)
    turns = result["turns"]
    return {"llm": llm.model_id, "backend": llm.name, "scoring": scoring, "calibrated": bool(make.calibrated),
            "split": "test", "conversations": len(trees), "conversations_in_split": total, "turns": turns,
            "scores": result["scores"], "rules": result["rules"], "unparsed": dict(make.unparsed),
            "seconds": round(seconds, 1), "ms_per_turn": round(1000 * seconds / max(turns, 1), 1),
            "crychic": {"scores": crychic["scores"], "seconds": round(crychic_seconds, 2)}}


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


def _row(name: str, scores: Mapping[str, float], prefix: str = "") -> str:
    return f"| {name} | " + " | ".join(f"{scores[prefix + m]:.3f}" for m in METRICS) + " |"


def llm_row_name(llm: Mapping[str, Any]) -> str:
    """The LLM baseline's row in Table 1's layout: the model named, how its answers were read, the dagger
    pointing at the note on its conversation subset."""
    how = llm["scoring"] + (", calibrated" if llm.get("calibrated") else "")
    return f"LLM baseline: {llm['llm']} ({how})†"


def _score_rows(recon: Mapping[str, Any], turns: str, prefix: str = "", llm: Mapping[str, Any] | None = None) -> str:
    """Table 1's rows in the paper's order: the LLM baseline (when measured) first, then the measured systems."""
    lines = [_row(llm_row_name(llm), llm["scores"][turns], prefix)] if llm else []
    lines += [_row(name, recon["systems"][name]["scores"][turns], prefix) for name in SYSTEMS]
    return "\n".join(lines)


def _llm_values(llm: Mapping[str, Any] | None) -> dict[str, Any]:
    """The LLM baseline paragraph's values (or the note saying why it did not run)."""
    if not llm or "scores" not in llm:
        reason = (llm or {}).get("skipped") or "this release ran no LLM baseline step"
        return {"llm_note": Block("llm_baseline_absent"), "llm_absent_reason": reason}
    same = llm["crychic"]["scores"]["all_turns"]
    unparsed = llm.get("unparsed") or {}
    return {"llm_note": Block("llm_baseline"), "llm_model": llm["llm"],
            "llm_scoring": {"likelihood": "likelihood over the allowed answers" + (
                " (calibrated against the content-free answer)" if llm.get("calibrated") else ""),
                "generate": "generation (the first allowed label or digit of the written answer)"}[llm["scoring"]],
            "llm_conversations": llm["conversations"], "llm_turns": llm["turns"], "llm_seconds": llm["seconds"],
            "llm_ms_per_turn": llm["ms_per_turn"],
            "llm_crychic_row": " / ".join(f"{same[m]:.3f}" for m in METRICS),
            "llm_unparsed_labels": unparsed.get("label", 0), "llm_unparsed_scores": unparsed.get("score", 0)}


def _before_after_rows(results: Mapping[str, Any]) -> str:
    return _rows(results["task"], results["before"], results["after"])


def _rows(task: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    keys = ["accuracy", "f1_macro"] + (["auc"] if task == "judge" else [])
    keys += sorted(k for k in after if k.startswith("recall_"))
    return "\n".join(f"| {k} | {before.get(k)} | {after.get(k)} |" for k in keys)


def _judge_head_values(train: Mapping[str, Any]) -> dict[str, Any]:
    """How the judge turns two embeddings into a logit: the paper's MLP, or the cosine residual with the
    calibration its training run fitted."""
    calibration = train.get("cosine_calibration")
    if not train.get("cosine_residual") or not calibration:
        return {"judge_head": Block("judge_head_paper")}
    return {"judge_head": Block("judge_head_residual"), "cosine_scale": calibration["scale"],
            "cosine_shift": calibration["shift"], "cosine_parent": calibration["mean_cosine_parent"],
            "cosine_not_parent": calibration["mean_cosine_not_parent"]}


def _threshold_values(train: Mapping[str, Any]) -> dict[str, Any]:
    """The judge's root threshold: the paper's, or the one its training run tuned, with the tuning's figures."""
    from convohub.crychic.reconstruct import THRESHOLD

    implicit = train.get("implicit_threshold")
    values: dict[str, Any] = {"implicit_note": block(bool(implicit), "implicit_tuned")}
    if implicit:
        values |= {"implicit_threshold": implicit["threshold"], "implicit_accuracy": implicit["accuracy"],
                   "implicit_accuracy_reference": implicit["accuracy_at_reference"],
                   "implicit_decisions": implicit["implicit"],
                   "implicit_decisions_reference": implicit["implicit_at_reference"],
                   "implicit_grid": f"{implicit['grid'][0]}-{implicit['grid'][1]}"}
    tuned = train.get("root_threshold")
    if not tuned:
        return values | {"root_threshold": THRESHOLD, "threshold_note": Block("threshold_paper")}
    return values | {"root_threshold": tuned["threshold"], "threshold_note": Block("threshold_tuned"),
            "tune_conversations": tuned["conversations"], "tune_turns": tuned["turns"],
            "tune_grid": f"{tuned['grid'][0]}-{tuned['grid'][1]}", "tune_accuracy": tuned["accuracy"],
            "tune_accuracy_reference": tuned["accuracy_at_reference"], "tune_roots": tuned["roots"],
            "tune_roots_reference": tuned["roots_at_reference"], "tune_gold_roots": tuned["gold_roots"]}


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
        "scored_note": block(results.get("scored_by") == "training run", "scored_by_training", "scored_by_evaluation"),
        "reload_tensors": (results.get("reload") or {}).get("tensors", "?"),
        "train_examples": train.get("train_examples", "?"), "train_seconds": train.get("train_seconds", "?"),
        "data_produced_by": train.get("data_produced_by") or "?",
        "train_templates": ", ".join(f"{n} {name}" for name, n in (train.get("train_templates") or {}).items()) or "?",
        "steps": block(steps > 0, "smoke_steps"), "max_steps": steps,
        "reconstruction": block("reconstruction" in results, "reconstruction"),
        **_judge_head_values(train),
        **_threshold_values(train),
        "gold_set": block(bool(results.get("gold")), "gold_set"),
        "limitations": block(card.tiny, "limitations_tiny", "limitations_paper"),
        "ifqc_repo_id": card.target.repo_id(IFQC.repo_name(card.profile)),
        "simplifier_repo_id": card.target.repo_id(SIMPLIFIER.repo_name(card.profile)),
        "judge_repo_id": card.target.repo_id(JUDGE.repo_name(card.profile)),
    }
    gold = results.get("gold")
    if gold:
        values |= {"gold_file": gold["file"], "gold_examples": gold["after"]["examples"],
                   "gold_rows": _rows(task, gold["before"], gold["after"])}
    recon = results.get("reconstruction")
    if recon:
        llm = results.get("llm_baseline")
        measured = llm if llm and "scores" in llm else None
        times = [[n, f'{recon["systems"][n]["seconds"]:.1f}'] for n in SYSTEMS]
        if measured:
            times.insert(0, [llm_row_name(measured), f'{measured["seconds"]:.1f}'])
        values |= {"conversations": recon["conversations"], "conversations_in_split": recon["conversations_in_split"],
                   "turns": recon["turns"], "judge_architecture": recon["judge_architecture"],
                   "recon_threshold": recon["threshold"],
                   "recon_threshold_origin": recon["threshold_origin"],
                   "recon_implicit_threshold": recon.get("implicit_threshold", 0.5),
                   "recon_implicit_origin": recon.get("implicit_threshold_origin", "the IFQC's argmax"),
                   "recon_all_micro": _score_rows(recon, "all_turns", llm=measured),
                   "recon_all_macro": _score_rows(recon, "all_turns", "macro_", llm=measured),
                   "recon_later_micro": _score_rows(recon, "without_first_turns", llm=measured),
                   "recon_table": markdown_table(["system", "seconds"], times), **_llm_values(llm)}
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
