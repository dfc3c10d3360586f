"""ProMISe's published user simulators, declared once each (:class:`convohub.model_spec.ModelSpec`): the Task 1
and Task 2 encoders and the generative LoRA simulator. The release's train -> evaluate -> card steps come from
these.

* training launches ``training/promise_*/train_*.py`` under ``accelerate launch`` with the profile's recipe
  on the built ``promise`` folder (:mod:`convohub.promise.training`);
* :func:`evaluate_encoder` loads the saved classifier as a Hub user would and scores it on the test split with
  the user_simulation metric, beside the majority baseline; *before* is the fresh head the training run
  measured on the same items, and the run's 4-fold cross-validation on validation is reported too;
* :func:`evaluate_generator` generates the LoRA model's action for every test turn and scores both tasks
  (:mod:`convohub.promise.simulators`: the scoring rule for unparseable replies and ``done`` on Task 2);
  *before* is the base model zero-shot with the same prompt. Both are also read by likelihood (the most likely
  of the six replies, no invalid answer) and by calibrated likelihood (minus a content-free prompt's), from the
  same forward passes. With the two encoders trained in the same release it also scores every simulator side by
  side: the paper's Table 4 for this build, in the card.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from convohub.hub import ModelCardInfo, read_json
from convohub.model_spec import Block, CardInput, CardValues, ModelSpec, block, profile_recipes
from convohub.promise.simulators import DECODES
from convohub.promise.training import EVAL_FILE
from convohub.training.chat_sft import TRAINING_RECORD_FILE

DATASET_REPO = "promise"
TASK_NAMES = {"task1": "Task 1 (intent satisfaction)", "task2": "Task 2 (SQ selection)"}
#: the generative simulator's readings the card reports, the paper's (generation) first
READINGS = DECODES
_READING_NAMES = {"generate": "generated (the paper's reading)", "likelihood": "likelihood",
                  "calibrated": "calibrated likelihood"}


def _items(dataset_dir: Path) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    from convohub.promise.simulators import load_items

    return load_items(dataset_dir, "validation"), load_items(dataset_dir, "test")


# ------------------------------------------------------------------------------------------------ evaluation
def evaluate_encoder(task: str, model_dir: Path, dataset_dir: Path) -> dict[str, Any]:
    """Test scores of a trained encoder (loaded from its folder) beside the majority baseline; the training
    run's fresh-head scores (before) and cross-validation."""
    from convohub.promise.simulators import EncoderSimulator, MajorityBaseline, score

    validation, test = _items(dataset_dir)
    trained = read_json(Path(model_dir) / EVAL_FILE)
    after = score(EncoderSimulator({task: model_dir}), test, (task,))[task]
    majority = score(MajorityBaseline(validation), test, (task,))[task]
    return {"task": task, "split": "test", "items": len(test[task]), "before": trained["before"], "after": after,
            "majority": majority, "cv": trained["cv"], "training": trained}


def _action_counts(simulator: Any, items: list[dict[str, Any]]) -> dict[str, int]:
    return dict(sorted(Counter(str(a) for a in simulator.actions(items)).items()))


def evaluate_generator(model_dir: Path, dataset_dir: Path, models: Mapping[str, Path]) -> dict[str, Any]:
    """The LoRA simulator and its base model (zero-shot) on test, both tasks; with the encoders, Table 4."""
    from convohub.llm import make_backend
    from convohub.promise import simulators as sims
    from convohub.training.models import resolve_model
    from convohub.training.runs import saved_arguments

    validation, test = _items(dataset_dir)
    base = str(saved_arguments(model_dir)["model"]["model_name_or_path"])
    base_backend = make_backend("smollm2" if base == "smollm2" else f"local:{resolve_model(base)}", batch_size=32)
    trained_backend = make_backend(f"local:{model_dir}", batch_size=32)
    zero_shot = sims.GenerativeSimulator(base_backend, name=f"zero-shot:{base}")
    trained = sims.GenerativeSimulator(trained_backend, name="LoRA simulator")
    results: dict[str, Any] = {
        "split": "test", "items": {t: len(v) for t, v in test.items()}, "base_model": base,
        "before": sims.score(zero_shot, test), "after": sims.score(trained, test),
        "majority": sims.score(sims.MajorityBaseline(validation), test),
        "replies": {"before": _action_counts(zero_shot, test["task1"]), "after": _action_counts(trained, test["task1"])},
        "training": read_json(Path(model_dir) / TRAINING_RECORD_FILE)}
    for key, backend in (("before", base_backend), ("after", trained_backend)):
        likely = sims.GenerativeSimulator(backend, decode=sims.LIKELIHOOD)
        results.setdefault(sims.LIKELIHOOD, {})[key] = sims.score(likely, test)
        calibrated = sims.GenerativeSimulator(backend, decode=sims.CALIBRATED, replies=likely.replies)
        results.setdefault(sims.CALIBRATED, {})[key] = sims.score(calibrated, test)
    if "promise_task1_encoder" in models and "promise_task2_encoder" in models:
        encoders = sims.EncoderSimulator({"task1": models["promise_task1_encoder"], "task2": models["promise_task2_encoder"]})
        results["table"] = {"majority (validation)": results["majority"], f"zero-shot {base}": results["before"],
                            **{f"zero-shot {base}, {d}": results[d]["before"] for d in READINGS[1:]},
                            "encoders (task 1, task 2)": sims.score(encoders, test), "LoRA simulator": results["after"],
                            **{f"LoRA simulator, {d}": results[d]["after"] for d in READINGS[1:]}}
    return results


# ------------------------------------------------------------------------------------------------ card
def _metric(dataset_id: str, task: str, name: str, value: float) -> Any:
    from huggingface_hub import EvalResult

    from convohub.promise.dataset import TASK_CONFIG

    return EvalResult(task_type="text-classification", dataset_name=DATASET_REPO, dataset_type=dataset_id,
                      dataset_config=TASK_CONFIG[task], dataset_split="test", metric_type="f1", metric_name=name,
                      metric_value=value)


def _rows(before: Mapping[str, float], after: Mapping[str, float], majority: Mapping[str, float]) -> str:
    return "\n".join(f"| {k} | {100 * majority[k]:.2f} | {100 * before[k]:.2f} | {100 * after[k]:.2f} |"
                     for k in after if k != "invalid_rate") + \
        f"\n| invalid predictions | {100 * majority['invalid_rate']:.1f}% | {100 * before['invalid_rate']:.1f}% | " \
        f"{100 * after['invalid_rate']:.1f}% |"


def _beats(after: Mapping[str, float], other: Mapping[str, float]) -> bool:
    """Whether ``after`` has the higher macro-F1 (the paper's primary number) than ``other``, a baseline or the
    untrained base."""
    return after["macro_f1"] > other["macro_f1"]


def _base(card: CardInput) -> str:
    from convohub.training.models import hub_id
    from convohub.training.runs import saved_arguments

    saved = saved_arguments(card.model_dir)
    base = str((saved.get("model") or saved["script"])["model_name_or_path"])
    return hub_id(base) or base


def _common(card: CardInput) -> dict[str, Any]:
    from convohub.promise.dataset import DATASET_NAME

    return {"limitations": block(card.tiny, "limitations_tiny", "limitations_paper"),
            "dataset_repo": DATASET_NAME}


def encoder_card(card: CardInput) -> CardValues:
    """The encoder card's metadata and values (measured numbers, the base model the run's arguments name)."""
    from convohub.promise.simulators import NONE_OPTION, SEQUENCE

    r = card.results
    task, before, after, majority = r["task"], r["before"], r["after"], r["majority"]
    base_model = _base(card)
    info = ModelCardInfo(
        license="apache-2.0", pipeline_tag="text-classification", base_model=base_model,
        datasets=(card.dataset_id,), tags=("convohub", "promise", "user-simulation", task), library_name="transformers",
        results=(_metric(card.dataset_id, task, f"{TASK_NAMES[task]} macro-F1", after["macro_f1"]),
                 _metric(card.dataset_id, task, f"{TASK_NAMES[task]} micro-F1", after["micro_f1"])))
    cv = r["cv"].get("scores")
    training = r["training"]
    steps = int(training.get("max_steps", -1))
    head = str(training.get("head", SEQUENCE)).replace("-", "_")
    values = {
        **_common(card), "task": task, "task_name": TASK_NAMES[task], "what": Block(f"what_{task}"),
        "head": Block(f"head_{head}"), "usage": Block(f"usage_{head}"), "none_option": NONE_OPTION,
        "base_model": base_model, "items": r["items"], "before_after_rows": _rows(before, after, majority),
        "train_items": training["train_items"], "train_seconds": training["train_seconds"],
        "class_weighting": training["class_weighting"], "folds": r["cv"]["folds"],
        "cv": block(cv is not None, "cv"), "cv_macro": f"{100 * cv['macro_f1']:.2f}" if cv else "",
        "cv_micro": f"{100 * cv['micro_f1']:.2f}" if cv else "",
        "verdict": block(_beats(after, majority), "beats_majority", "below_majority"),
        "verdict_base": block(_beats(after, before), "beats_base", "below_base"),
        "after_macro": f"{100 * after['macro_f1']:.2f}", "majority_macro": f"{100 * majority['macro_f1']:.2f}",
        "before_macro": f"{100 * before['macro_f1']:.2f}",
        "steps": block(steps > 0, "smoke_steps"), "max_steps": steps,
    }
    return info, values


def _verdict(task: str, after: Mapping[str, float], before: Mapping[str, float], majority: Mapping[str, float],
             base_model: str) -> str:
    """One line of the card on a task's generated reading: above or below the majority baseline and the base."""
    def against(other: Mapping[str, float], what: str) -> str:
        value = f"{100 * other['macro_f1']:.2f}"
        return f"above {what} ({value})" if _beats(after, other) else f"**it does not beat {what}** ({value})"

    return (f"{TASK_NAMES[task]}, generated: macro-F1 {100 * after['macro_f1']:.2f}; "
            f"{against(majority, 'the majority baseline')}; {against(before, f'its base, `{base_model}` zero-shot')}.")


def _readings_table(results: Mapping[str, Any]) -> str:
    """Macro-F1 of the base and the LoRA model under each reading, and on which tasks the LoRA model is above."""
    from convohub.hub import markdown_table

    rows = []
    for reading in READINGS:
        pair = {"before": results["before"], "after": results["after"]} if reading == "generate" else results[reading]
        above = [TASK_NAMES[t].split(" (")[0] for t in ("task1", "task2") if _beats(pair["after"][t], pair["before"][t])]
        rows.append([_READING_NAMES[reading],
                     *(f"{100 * pair['before'][t]['macro_f1']:.2f} -> {100 * pair['after'][t]['macro_f1']:.2f}"
                       for t in ("task1", "task2")),
                     " and ".join(above) if above else "**neither**"])
    return markdown_table(["reading", "Task 1 macro-F1, base -> LoRA", "Task 2 macro-F1, base -> LoRA",
                           "LoRA above its base on"], rows)


def generator_card(card: CardInput) -> CardValues:
    """The generative simulator card's metadata and values, with Table 4 when the encoders were measured."""
    from convohub.hub import markdown_table
    from convohub.promise.simulators import score_table

    r = card.results
    before, after, majority = r["before"], r["after"], r["majority"]
    base_model = _base(card)
    info = ModelCardInfo(
        license="apache-2.0", pipeline_tag="text-generation", base_model=base_model, datasets=(card.dataset_id,),
        tags=("convohub", "promise", "user-simulation", "lora"), library_name="transformers",
        # task by task, as the model-index groups them: generated macro and micro, then the other readings' macro
        results=tuple(metric for t in ("task1", "task2") for metric in (
            *(_metric(card.dataset_id, t, f"{TASK_NAMES[t]} {k.replace('_f1', '-F1')}", after[t][k])
              for k in ("macro_f1", "micro_f1")),
            *(_metric(card.dataset_id, t, f"{TASK_NAMES[t]} macro-F1, {_READING_NAMES[d]}", r[d]["after"][t]["macro_f1"])
              for d in READINGS[1:]))))
    training = r["training"]
    lora = training.get("lora") or {}
    replies = r["replies"]
    values = {
        **_common(card), "base_model": base_model, "items_task1": r["items"]["task1"],
        "items_task2": r["items"]["task2"], "task1_rows": _rows(before["task1"], after["task1"], majority["task1"]),
        "task2_rows": _rows(before["task2"], after["task2"], majority["task2"]),
        "train_turns": training["train_turns"], "train_steps": training["steps"],
        "train_seconds": training["train_seconds"], "first_loss": training["first_loss"],
        "last_loss": training["last_loss"], "lora_r": lora.get("r"), "lora_alpha": lora.get("alpha"),
        "learning_rate": training["learning_rate"], "train_examples": training["train_examples"],
        "balance": block(training.get("action_balance") == "oversample", "oversampled"),
        "reply_counts": ", ".join(f"`{a}` {n}" for a, n in (training.get("reply_counts") or {}).items()),
        "replies_table": markdown_table(["model", *sorted(set(replies["before"]) | set(replies["after"]))],
                                        [[name, *(replies[key].get(a, 0) for a in sorted(set(replies["before"])
                                                                                        | set(replies["after"])))]
                                         for name, key in (("base, zero-shot", "before"), ("LoRA", "after"))]),
        "verdict": "\n\n".join(_verdict(t, after[t], before[t], majority[t], base_model) for t in ("task1", "task2")),
        "readings_table": _readings_table(r),
        "table": block("table" in r, "table"),
        "table4": score_table(r["table"]) if "table" in r else "",
    }
    return info, values


def _encoder_spec(task: str) -> ModelSpec:
    folder = f"training/promise_{task}_encoder"
    return ModelSpec(
        name=f"promise_{task}_encoder", script=f"{folder}/train_promise_{task}_encoder.py",
        recipes=profile_recipes(folder, "tiny", "paper"),
        repos={"tiny": f"promise-{task}-minilm-tiny", "paper": f"promise-{task}-bert-base"},
        dataset=DATASET_REPO, template="promise_encoder", card_values=encoder_card,
        evaluate=lambda model_dir, dataset_dir, _models: evaluate_encoder(task, model_dir, dataset_dir))


TASK1_ENCODER = _encoder_spec("task1")
TASK2_ENCODER = _encoder_spec("task2")
GENERATOR = ModelSpec(
    name="promise_lora_simulator", script="training/promise_lora_simulator/train_promise_lora_simulator.py",
    recipes=profile_recipes("training/promise_lora_simulator", "tiny", "paper"),
    repos={"tiny": "promise-simulator-smollm2-lora-tiny", "paper": "promise-simulator-llama-7b-lora"},
    dataset=DATASET_REPO, template="promise_lora_simulator", card_values=generator_card, evaluate=evaluate_generator,
    uses=("promise_task1_encoder", "promise_task2_encoder"))
#: In release order: the generative simulator's evaluation scores the two encoders trained before it.
MODELS = (TASK1_ENCODER, TASK2_ENCODER, GENERATOR)
