"""Training of CRyCHIc's three models, shared by training/crychic_{ifqc,simplifier,judge}/ (each script is a
thin ``main(argv)`` calling :func:`run` with its task).

The steps follow the other convohub scripts: the model built with ``from_encoder`` (pretrained encoder, new
MLP head; ``minilm`` is the bundled all-MiniLM-L6-v2) -> rows of a built training-data folder
(:mod:`convohub.crychic.training_data`; ``train`` to train on, ``heldout`` held out) -> the held-out
measure on the untrained head -> ``transformers.Trainer`` (the models compute their own loss) -> the same
measure after training, so the gain over the untrained head is known -> ``trainer.save_model`` (the main
process writes model, tokenizer and the model code for ``trust_remote_code``) with the resolved arguments
and ``eval_results.json`` beside it -> ``push_to_hub`` when asked.

Inputs mirror what :mod:`convohub.crychic.components` feeds the trained models at reconstruction time: the
raw prompt (IFQC, truncated to ``max_length``), the packed sentences ``s1 [SEP] s2 [SEP] ...``
(simplifier), and for the judge the turn as the pair (prompt, response), each side cut to
``turn_max_tokens``, against the prompt (bi) or joined with it in one input (cross).

Held-out measures: accuracy and macro-F1 (the simplifier's per sentence); the judge also ROC AUC, with
its decisions taken at the paper's threshold (0.4; a tuned root threshold is reported apart).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convohub.hub import atomic_write_text, dump_json

TASKS = ("ifqc", "simplifier", "judge")
EVAL_FILE = "eval_results.json"


@dataclass
class CrychicArguments:
    """Data and model arguments of the three scripts (trainer arguments: transformers' TrainingArguments)."""

    dataset_path: str = field(default="outputs/crychic-training-data",
                              metadata={"help": "folder built by `convohub crychic training-data`"})
    train_split: str = field(default="train")
    eval_split: str = field(default="heldout")
    model_name_or_path: str = field(default="minilm",
                                    metadata={"help": "encoder: Hub id, local folder, or minilm (bundled "
                                                      "all-MiniLM-L6-v2)"})
    trust_remote_code: bool = field(default=False, metadata={"help": "needed by the gte encoders"})
    max_length: int | None = field(default=None, metadata={"help": "longest input in tokens (default: the "
                                                                    "model's: IFQC 64, others 512)"})
    head_hidden_sizes: list[int] | None = field(default=None, metadata={"help": "MLP head hidden sizes "
                                                                               "(default: the paper's)"})
    head_dropout: float = field(default=0.2)
    pooling: str = field(default="cls", metadata={"help": "IFQC and judge: how a text becomes one vector, cls "
                                                          "(first token, the paper's) or mean (over its tokens, "
                                                          "how sentence-transformers encoders were trained)"})
    architecture: str = field(default="bi", metadata={"help": "judge only: bi (paper) or cross"})
    turn_max_tokens: int = field(default=512, metadata={"help": "judge only: tokens kept of each side of a turn"})
    cosine_residual: bool = field(default=False, metadata={
        "help": "judge only (bi): add the MLP's logit to the encoder's cosine similarity, scaled and shifted by "
                "a logistic fit on the training pairs before training; the untrained judge is that calibrated "
                "cosine (the paper's judge: the MLP alone)"})
    tune_root_threshold: bool = field(default=False, metadata={
        "help": "judge only: after training, reconstruct the held-out conversations of the training data with the "
                "judge alone and store the root threshold that gets the most parents right as the config's "
                "root_threshold (the pipeline then uses it instead of the paper's 0.4)"})
    tune_implicit_threshold: bool = field(default=False, metadata={
        "help": "judge only: after the root threshold, reconstruct the same held-out conversations with the whole "
                "pipeline (the IFQC and simplifier of --pipeline_ifqc / --pipeline_simplifier) and store the IFQC "
                "threshold that gets the most parents right as the config's implicit_threshold (else the IFQC's "
                "argmax, 0.5)"})
    pipeline_ifqc: str | None = field(default=None, metadata={
        "help": "judge only: the trained IFQC folder the implicit threshold is tuned with"})
    pipeline_simplifier: str | None = field(default=None, metadata={
        "help": "judge only: the trained simplifier folder the implicit threshold is tuned with"})
    max_train_examples: int | None = field(default=None, metadata={"help": "cap on training rows (seeded)"})
    max_eval_examples: int | None = field(default=None, metadata={"help": "cap on held-out rows (seeded)"})
    gold_eval: bool = field(default=False, metadata={"help": "IFQC only: also score the hand-written follow-ups "
                                                             "of convohub/data/crychic_ifqc_gold.jsonl before and "
                                                             "after training"})


def make_parser() -> Any:
    """(CrychicArguments, TrainingArguments); recipes are parsed strictly."""
    from transformers import TrainingArguments
    from trl import TrlParser

    return TrlParser((CrychicArguments, TrainingArguments))


def _check_task(task: str) -> str:
    if task not in TASKS:
        raise ValueError(f"unknown CRyCHIc task {task!r}; known: {', '.join(TASKS)}")
    return task


# ------------------------------------------------------------------------------------------------ model
def build_model(task: str, args: CrychicArguments) -> tuple[Any, Any]:
    """(model with a fresh head, tokenizer) for ``task`` from the recipe's encoder."""
    from transformers import AutoTokenizer

    from convohub.crychic.models import CrychicFollowUpJudgeModel, CrychicIFQCModel, CrychicSimplifierModel
    from convohub.training.models import resolve_model

    _check_task(task)
    if task != "judge" and args.architecture != "bi":
        raise ValueError(f"architecture applies to the judge only; the {task} recipe must leave it at 'bi'")
    path = resolve_model(args.model_name_or_path)
    if task == "simplifier" and args.pooling != "cls":
        raise ValueError("pooling applies to the IFQC and the judge; the simplifier reads each sentence at its "
                         "separator, so its recipe must leave pooling at 'cls'")
    kwargs: dict[str, Any] = {"head_dropout": args.head_dropout, "pooling": args.pooling}
    if args.head_hidden_sizes is not None:
        kwargs["head_hidden_sizes"] = list(args.head_hidden_sizes)
    if args.max_length is not None:
        kwargs["max_length"] = args.max_length
    cls = {"ifqc": CrychicIFQCModel, "simplifier": CrychicSimplifierModel, "judge": CrychicFollowUpJudgeModel}[task]
    if task == "judge":
        kwargs |= {"architecture": args.architecture, "turn_max_tokens": args.turn_max_tokens,
                   "cosine_residual": args.cosine_residual}
    elif args.cosine_residual or args.tune_root_threshold or args.tune_implicit_threshold:
        raise ValueError(f"cosine_residual, tune_root_threshold and tune_implicit_threshold apply to the judge only; "
                         f"the {task} recipe must leave them off")
    model = cls.from_encoder(path, trust_remote_code=args.trust_remote_code, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=args.trust_remote_code)
    return model, tokenizer


# ------------------------------------------------------------------------------------------------ batches
class Collator:
    """Turns rows of one task into model inputs (module docstring: the same inputs as at reconstruction)."""

    def __init__(self, task: str, tokenizer: Any, config: Any) -> None:
        self.task, self.tokenizer, self.config = _check_task(task), tokenizer, config

    def __call__(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return getattr(self, f"_{self.task}")(rows)

    def _ifqc(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        import torch

        batch = self.tokenizer([r["text"] for r in rows], truncation=True, max_length=self.config.max_length,
                               padding=True, return_tensors="pt")
        batch["labels"] = torch.tensor([self.config.label2id[r["label"]] for r in rows])
        return dict(batch)

    def _simplifier(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        import torch

        from convohub.crychic.components import pad_rows
        from convohub.crychic.models import pack_sentences

        packed: list[tuple[list[int], list[int]]] = []
        for r in rows:
            ids = [self.config.label2id[label] for label in r["labels"]]
            for input_ids, members in pack_sentences(self.tokenizer, r["sentences"], self.config.max_length):
                packed.append((input_ids, [ids[m] for m in members]))
        most = max(len(labels) for _, labels in packed)
        return {**pad_rows([ids for ids, _ in packed], self.tokenizer.pad_token_id),
                "labels": torch.tensor([labels + [-100] * (most - len(labels)) for _, labels in packed])}

    def _judge(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        import torch

        from convohub.crychic.components import joined_turn, turn_texts

        limit, length = int(self.config.turn_max_tokens), int(self.config.max_length)
        turns = [turn_texts(self.tokenizer, r["history_prompt"], r["history_response"], limit) for r in rows]
        prompts = [r["prompt"] for r in rows]
        labels = torch.tensor([float(r["label"]) for r in rows])
        encode = self.tokenizer
        if self.config.architecture == "bi":
            prompt = encode(prompts, truncation=True, max_length=length, padding=True, return_tensors="pt")
            history = encode([p for p, _ in turns], [r for _, r in turns], truncation=True, max_length=length,
                             padding=True, return_tensors="pt")
            batch = dict(prompt)
            batch |= {f"history_{k}": v for k, v in history.items()}
        else:
            batch = dict(encode([joined_turn(*turn) for turn in turns], prompts, truncation=True, max_length=length,
                                padding=True, return_tensors="pt"))
        batch["labels"] = labels
        return batch


# ------------------------------------------------------------------------------------------------ calibrate
def calibrate_cosine(model: Any, tokenizer: Any, rows: Sequence[Mapping[str, Any]],
                     batch_size: int = 32) -> dict[str, Any]:
    """Fit the cosine-residual judge's scale and shift to the training pairs (a one-feature logistic
    regression of the label on the pair's cosine) and set them on ``model`` and its config, so the untrained
    judge is the encoder's similarity as a probability: the base the trained judge is measured against."""
    import numpy as np
    import torch
    from sklearn.linear_model import LogisticRegression

    if not model.config.cosine_residual:
        raise ValueError("calibrate_cosine needs a judge built with cosine_residual=True")
    labels = [int(r["label"]) for r in rows]
    if len(set(labels)) != 2:
        raise ValueError(f"calibrating the cosine needs parent and non-parent pairs; the {len(rows)} training "
                         f"rows have labels {sorted(set(labels))}")
    collate = Collator("judge", tokenizer, model.config)
    was_training = model.training
    model.eval()
    cosines: list[float] = []
    with torch.inference_mode():
        for start in range(0, len(rows), batch_size):
            batch = collate(rows[start:start + batch_size])
            history = model.embed(batch["history_input_ids"], batch["history_attention_mask"],
                                  batch.get("history_token_type_ids"))
            prompt = model.embed(batch["input_ids"], batch["attention_mask"], batch.get("token_type_ids"))
            cosines += torch.nn.functional.cosine_similarity(history, prompt, dim=-1).float().tolist()
    model.train(was_training)
    fit = LogisticRegression(C=1e4).fit(np.asarray(cosines).reshape(-1, 1), labels)
    scale, shift = float(fit.coef_[0, 0]), float(fit.intercept_[0])
    with torch.no_grad():
        model.cosine_scale.fill_(scale)
        model.cosine_shift.fill_(shift)
    model.config.cosine_scale, model.config.cosine_shift = scale, shift
    return {"pairs": len(rows), "scale": round(scale, 4), "shift": round(shift, 4),
            "mean_cosine_parent": round(float(np.mean([c for c, y in zip(cosines, labels, strict=True) if y])), 4),
            "mean_cosine_not_parent": round(float(np.mean([c for c, y in zip(cosines, labels, strict=True) if not y])), 4)}


# ------------------------------------------------------------------------------------------------ measure
def threshold_trees(args: CrychicArguments) -> list[dict[str, Any]] | None:
    """The held-out conversations the judge's root threshold is tuned on (None when the recipe does not tune
    it), read before training so that a data folder without them stops the run before any work is lost."""
    from convohub.crychic.judge_data import read_trees

    if args.tune_implicit_threshold:
        missing = [f"--{name}" for name in ("pipeline_ifqc", "pipeline_simplifier") if not getattr(args, name)]
        if missing:
            raise ValueError(f"tune_implicit_threshold needs the trained {' and '.join(missing)} folder(s) to "
                             "reconstruct with (the release passes them); or leave it off")
    if not (args.tune_root_threshold or args.tune_implicit_threshold):
        return None
    trees = read_trees(args.dataset_path)
    if not trees:
        raise ValueError(f"{args.dataset_path}: the judge data holds no held-out conversations to tune the root "
                         "threshold on; rebuild it with more users or leave tune_root_threshold off")
    return trees


def tune_threshold(model: Any, tokenizer: Any, trees: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Tune the trained judge's root threshold on ``trees`` (:mod:`convohub.crychic.threshold`) and write it
    into the model's config before it is saved."""
    from convohub.crychic.components import ModelParentJudge
    from convohub.crychic.threshold import tune_root_threshold

    result = tune_root_threshold(trees, ModelParentJudge.from_model(model, tokenizer))
    model.config.root_threshold = result["threshold"]
    return result


def tune_pipeline_threshold(model: Any, tokenizer: Any, trees: Sequence[Mapping[str, Any]],
                            args: CrychicArguments) -> dict[str, Any]:
    """Tune the IFQC threshold of the pipeline over the trained judge (its root threshold already set) and the
    named IFQC and simplifier on ``trees``, and write it into the judge's config before it is saved."""
    from convohub.crychic.components import ModelFollowUpClassifier, ModelParentJudge, ModelSentenceLabeller
    from convohub.crychic.threshold import tune_implicit_threshold

    result = tune_implicit_threshold(trees, ModelFollowUpClassifier(args.pipeline_ifqc),
                                     ModelSentenceLabeller(args.pipeline_simplifier),
                                     ModelParentJudge.from_model(model, tokenizer))
    model.config.implicit_threshold = result["threshold"]
    return result | {"ifqc": str(args.pipeline_ifqc), "simplifier": str(args.pipeline_simplifier)}


def evaluate_rows(task: str, model: Any, tokenizer: Any, rows: Sequence[Mapping[str, Any]],
                  batch_size: int = 32) -> dict[str, Any]:
    """Held-out accuracy and macro-F1 of ``model`` on ``rows`` (per sentence for the simplifier; the judge
    also ROC AUC, decisions at the paper's threshold 0.4), with per-class recall and counts."""
    import numpy as np
    import torch
    from sklearn.metrics import f1_score, roc_auc_score

    from convohub.crychic.reconstruct import THRESHOLD

    if not rows:
        raise ValueError(f"no {task} rows to evaluate on: is the held-out split empty?")
    collate = Collator(task, tokenizer, model.config)
    was_training = model.training
    model.eval()
    gold: list[int] = []
    pred: list[int] = []
    scores: list[float] = []
    with torch.inference_mode():
        for start in range(0, len(rows), batch_size):
            batch = collate(rows[start:start + batch_size])
            labels = batch.pop("labels")
            out = model(**batch)
            if task == "judge":
                probs = out.probabilities.float().tolist()
                scores += probs
                pred += [int(p > THRESHOLD) for p in probs]
                gold += [int(x) for x in labels.tolist()]
            elif task == "simplifier":
                width = min(labels.shape[1], out.logits.shape[1])
                keep = labels[:, :width] != -100
                pred += out.logits[:, :width].argmax(-1)[keep].tolist()
                gold += labels[:, :width][keep].tolist()
            else:
                pred += out.logits.argmax(-1).tolist()
                gold += labels.tolist()
    model.train(was_training)
    names = {int(k): v for k, v in model.config.id2label.items()} if task != "judge" else {0: "not_parent",
                                                                                         1: "parent"}
    g, p = np.asarray(gold), np.asarray(pred)
    result: dict[str, Any] = {
        "examples": len(rows), "units": len(gold), "accuracy": round(float((g == p).mean()), 4),
        "f1_macro": round(float(f1_score(g, p, labels=sorted(names), average="macro", zero_division=0)), 4)}
    for i, name in sorted(names.items()):
        mask = g == i
        result[f"recall_{name}"] = round(float((p[mask] == i).mean()), 4) if mask.any() else None
        result[f"units_{name}"] = int(mask.sum())
    if task == "judge":
        result["threshold"] = THRESHOLD
        result["auc"] = round(float(roc_auc_score(g, scores)), 4) if len(set(gold)) == 2 else None
    return result


def load_rows(dataset_path: str | Path, task: str, split: str, limit: int | None, seed: int) -> list[dict[str, Any]]:
    """A split's rows of a built training-data folder, a seeded sample of at most ``limit``."""
    from convohub.crychic.data_common import read_rows, seeded_sample

    rows = read_rows(dataset_path, task, split)
    return seeded_sample(rows, limit, f"{task}/{split}/{seed}") if limit is not None else rows


def gold_rows(task: str, args: CrychicArguments) -> list[dict[str, Any]] | None:
    """The hand-written test rows the recipe asks for (``gold_eval``), or None."""
    if not args.gold_eval:
        return None
    if task != "ifqc":
        raise ValueError(f"gold_eval: only the IFQC has a hand-written test set; the {task} recipe must leave it off")
    from convohub.crychic.ifqc_data import load_ifqc_gold

    return load_ifqc_gold()


def gold_scores(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The hand-written set's entry of the results: which file, scored before and after training."""
    from convohub.crychic.ifqc_data import GOLD_FILE

    return {"file": f"convohub/data/{GOLD_FILE}", "before": before, "after": after}


# ------------------------------------------------------------------------------------------------ run
def run(task: str, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train ``task``'s model on a built training-data folder, measuring the held-out split before and after.

    Returns (and writes to ``<output_dir>/eval_results.json``) the measured numbers; the resolved arguments go
    to ``<output_dir>/training_args.json`` (:func:`convohub.training.runs.save_arguments`).
    """
    import datasets
    from transformers import Trainer, set_seed

    from convohub.crychic.data_common import read_record
    from convohub.training.runs import save_arguments

    _check_task(task)
    parser = make_parser()
    args, training_args = parser.parse_args_and_config(list(argv) if argv is not None else None,
                                                       fail_with_unknown_args=True)
    # rows are raw text; the collator builds the inputs, so no column may be dropped before it sees them
    training_args.remove_unused_columns = False
    out = Path(training_args.output_dir)
    set_seed(training_args.seed)

    # 1. model: pretrained encoder, fresh head
    model, tokenizer = build_model(task, args)

    # 2. data
    train_rows = load_rows(args.dataset_path, task, args.train_split, args.max_train_examples, training_args.seed)
    eval_rows = load_rows(args.dataset_path, task, args.eval_split, args.max_eval_examples, training_args.seed)
    if not train_rows:
        raise ValueError(f"{args.dataset_path}: no {task} rows in split {args.train_split!r}")
    trees = threshold_trees(args) if task == "judge" else None
    print(f"{task}: {len(train_rows)} training rows, {len(eval_rows)} held-out ({args.eval_split})")

    # 3. the untrained head on the held-out rows (and the hand-written ones); a cosine-residual judge is first
    # calibrated on the training rows, so "before" is the encoder's own similarity as a probability
    batch = training_args.per_device_eval_batch_size
    calibration = calibrate_cosine(model, tokenizer, train_rows, batch) if args.cosine_residual else None
    before = evaluate_rows(task, model, tokenizer, eval_rows, batch)
    gold = gold_rows(task, args)
    gold_before = evaluate_rows(task, model, tokenizer, gold, batch) if gold else None

    # 4. train
    trainer = Trainer(model=model, args=training_args, train_dataset=datasets.Dataset.from_list(train_rows),
                      data_collator=Collator(task, tokenizer, model.config), processing_class=tokenizer)
    started = time.perf_counter()
    train_result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    seconds = time.perf_counter() - started

    # 5. measure again, 6. save (the main process writes)
    after = evaluate_rows(task, model, tokenizer, eval_rows, batch)
    gold_after = evaluate_rows(task, model, tokenizer, gold, batch) if gold else None
    root_threshold = tune_threshold(model, tokenizer, trees) if trees is not None and args.tune_root_threshold \
        else None
    implicit_threshold = tune_pipeline_threshold(model, tokenizer, trees, args) \
        if trees is not None and args.tune_implicit_threshold else None
    trainer.save_model(str(out))
    record = read_record(args.dataset_path).get(task, {})
    results: dict[str, Any] = {
        "task": task, "split": args.eval_split, "before": before, "after": after,
        "accuracy_before": before["accuracy"], "accuracy_after": after["accuracy"],
        "f1_macro_before": before["f1_macro"], "f1_macro_after": after["f1_macro"],
        "train_examples": len(train_rows), "train_loss": round(float(train_result.training_loss), 4),
        "train_seconds": round(seconds, 1), "epochs": float(training_args.num_train_epochs),
        "base_model": args.model_name_or_path, "data_produced_by": record.get("produced_by"),
    }
    if any("template" in r for r in train_rows):
        results["train_templates"] = dict(sorted(Counter(str(r.get("template")) for r in train_rows).items()))
    if task == "judge":
        results |= {"auc_before": before["auc"], "auc_after": after["auc"], "architecture": args.architecture,
                    "cosine_residual": args.cosine_residual}
        if calibration is not None:
            results["cosine_calibration"] = calibration
        if root_threshold is not None:
            results["root_threshold"] = root_threshold
        if implicit_threshold is not None:
            results["implicit_threshold"] = implicit_threshold
    if gold:
        results["gold"] = gold_scores(gold_before, gold_after)
    if task == "simplifier" and record.get("agreement"):
        results["labeller_agreement"] = record["agreement"]
    if trainer.is_world_process_zero():
        save_arguments(out, script=args, training=training_args)
        atomic_write_text(out / EVAL_FILE, dump_json(results))
    print(f"{task}: held-out accuracy {before['accuracy']:.4f} -> {after['accuracy']:.4f}, "
          f"macro-F1 {before['f1_macro']:.4f} -> {after['f1_macro']:.4f}"
          + (f", AUC {before['auc']} -> {after['auc']}" if task == "judge" else "")
          + f" ({seconds:.1f} s training)")
    if root_threshold is not None:
        print(f"{task}: root threshold {root_threshold['threshold']} (parent accuracy "
              f"{root_threshold['accuracy_at_reference']:.4f} at {root_threshold['reference_threshold']} -> "
              f"{root_threshold['accuracy']:.4f} on {root_threshold['turns']} turns of "
              f"{root_threshold['conversations']} held-out conversations)")
    if implicit_threshold is not None:
        print(f"{task}: IFQC threshold {implicit_threshold['threshold']} for the pipeline (parent accuracy "
              f"{implicit_threshold['accuracy_at_reference']:.4f} at {implicit_threshold['reference_threshold']} -> "
              f"{implicit_threshold['accuracy']:.4f}; implicit decisions {implicit_threshold['implicit_at_reference']}"
              f" -> {implicit_threshold['implicit']})")
    if gold:
        print(f"{task}: hand-written set accuracy {gold_before['accuracy']:.4f} -> {gold_after['accuracy']:.4f}, "
              f"macro-F1 {gold_before['f1_macro']:.4f} -> {gold_after['f1_macro']:.4f} ({len(gold)} rows)")
    if training_args.push_to_hub:  # pragma: no cover - needs the Hub
        trainer.push_to_hub()
    return results
