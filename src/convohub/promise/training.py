"""Training of ProMISe's user simulators, shared by the scripts of training/promise_* (each a thin ``main``).

* Encoders (``training/promise_task1_encoder``, ``training/promise_task2_encoder``): a sequence classifier
  on the text pair (intent, context and candidates; :func:`convohub.promise.simulators.encoder_text`), as the
  paper fine-tunes BERT, RoBERTa and DeBERTa-v2-xlarge; or, for Task 2 (``--head multiple-choice``), one
  score per option (:func:`convohub.promise.simulators.option_pairs`) with the weights shared across the five
  options, so that every item teaches the one scorer and a label's position carries no weight of its own: with
  a few dozen items the 5-way classifier has about six examples per class. The paper has no train split: the
  models train on validation with 4-fold cross-validation, 3 epochs. Here the folds are grouped by dialogue
  (no dialogue on both sides); each fold's model predicts its held-out fold, and the pooled predictions give
  the cross-validated scores; then the published model trains on all of validation and is measured on test
  before (the fresh head) and after training.
* The generative simulator (``training/promise_lora_simulator``): LoRA SFT (trl) of a chat model on the
  validation turns, prompt = the user prompt of :mod:`convohub.promise.prompts`, completion = the action
  (``1``-``4``, ``none``, ``done``); the adapter is merged into the saved model. The paper: QLoRA rank 64,
  alpha 16, 300 steps on LLaMA-7B and Vicuna-7B. Its test scores are measured by the release's evaluation
  (generation), not here.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from convohub.hub import atomic_write_text, dump_json
from convohub.promise.records import label_names
from convohub.promise.simulators import HEADS, MULTIPLE_CHOICE, SEQUENCE

EVAL_FILE = "eval_results.json"


@dataclass
class EncoderArguments:
    """Data and model arguments of the encoder scripts (trainer arguments: transformers' TrainingArguments)."""

    dataset_path: str = field(default="hub_release/datasets/convohub/promise",
                              metadata={"help": "a built promise dataset folder"})
    model_name_or_path: str = field(default="minilm", metadata={
        "help": "encoder: Hub id, local folder, or minilm (the bundled all-MiniLM-L6-v2)"})
    max_length: int = field(default=256, metadata={"help": "longest input pair in tokens"})
    folds: int = field(default=4, metadata={"help": "cross-validation folds on validation (paper: 4; 1 = none)"})
    head: str = field(default=SEQUENCE, metadata={
        "help": "'sequence': a classifier over one text pair (the paper's); 'multiple-choice' (Task 2 only): one "
                "score per option, the four suggestions and 'none'"})
    class_weighting: str = field(default="none", metadata={
        "help": "'balanced': cross-entropy weighted by inverse class frequency (for macro-F1); 'none'"})
    train_split: str = field(default="validation")
    eval_split: str = field(default="test")


def make_encoder_parser() -> Any:
    from transformers import TrainingArguments
    from trl import TrlParser

    return TrlParser((EncoderArguments, TrainingArguments))


def _encode(tokenizer: Any, items: Sequence[Mapping[str, Any]], max_length: int, head: str) -> Any:
    """Tokenized items with their labels; a multiple-choice item holds one row per option (options x length)."""
    import datasets

    from convohub.promise.simulators import encoder_text, option_pairs

    labels = [int(i["label"]) for i in items]
    if head == MULTIPLE_CHOICE:
        rows = []
        for item, label in zip(items, labels, strict=True):
            pairs = option_pairs(item)
            enc = tokenizer([a for a, _ in pairs], [b for _, b in pairs], truncation=True, max_length=max_length)
            rows.append({**enc, "labels": label})
        return datasets.Dataset.from_list(rows)
    pairs = [encoder_text(i) for i in items]
    enc = tokenizer([a for a, _ in pairs], [b for _, b in pairs], truncation=True, max_length=max_length)
    return datasets.Dataset.from_dict({**enc, "labels": labels})


def check_head(task: str, head: str) -> None:
    """Reject a head the task cannot have, naming the choices."""
    if head not in HEADS:
        raise ValueError(f"head must be one of {', '.join(HEADS)}, got {head!r}")
    if head == MULTIPLE_CHOICE and task != "task2":
        raise ValueError(f"the multiple-choice head scores Task 2's options; {task} has none: use head 'sequence'")


def fresh_classifier(task: str, path: str, head: str = SEQUENCE) -> Any:
    """An encoder for ``task`` with a new (untrained) head and the task's labels (``head``: see
    :data:`convohub.promise.simulators.HEADS`; the config records it as ``promise_head``)."""
    from convohub.promise.simulators import encoder_class

    check_head(task, head)
    names = label_names(task)
    model = encoder_class(head).from_pretrained(
        path, num_labels=len(names), id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)})
    model.config.promise_head = head
    return model


def _weights(items: Sequence[Mapping[str, Any]], n: int, mode: str) -> Any:
    import torch

    if mode == "none":
        return None
    if mode != "balanced":
        raise ValueError(f"class_weighting must be 'balanced' or 'none', got {mode!r}")
    counts = torch.bincount(torch.tensor([int(i["label"]) for i in items]), minlength=n).float()
    return torch.where(counts > 0, counts.sum() / (n * counts.clamp(min=1)), torch.zeros_like(counts))


def _train(task: str, args: EncoderArguments, training_args: Any, items: Sequence[Mapping[str, Any]],
           output_dir: str, tokenizer: Any, model: Any = None) -> tuple[Any, Any]:
    """``model`` (default: a fresh classifier, seeded) trained on ``items`` (returns model, trainer)."""
    import copy

    import torch
    from transformers import DataCollatorForMultipleChoice, DataCollatorWithPadding, Trainer, set_seed

    from convohub.training.models import resolve_model

    if model is None:
        set_seed(training_args.seed)
        model = fresh_classifier(task, resolve_model(args.model_name_or_path), args.head)
    model.train()
    weights = _weights(items, len(label_names(task)), args.class_weighting)

    def loss(outputs: Any, labels: Any, num_items_in_batch: Any = None) -> Any:
        return torch.nn.functional.cross_entropy(outputs.logits.float(), labels, weight=weights)

    fold_args = copy.deepcopy(training_args)
    fold_args.output_dir = output_dir
    collator = DataCollatorForMultipleChoice(tokenizer) if args.head == MULTIPLE_CHOICE else \
        DataCollatorWithPadding(tokenizer)
    trainer = Trainer(model=model, args=fold_args, train_dataset=_encode(tokenizer, items, args.max_length, args.head),
                      data_collator=collator, processing_class=tokenizer, compute_loss_func=loss)
    trainer.train()
    return model.eval(), trainer


def _predict(model: Any, tokenizer: Any, items: Sequence[Mapping[str, Any]], max_length: int) -> list[int]:
    from convohub.promise.simulators import argmax, class_probabilities

    return [argmax(p) for p in class_probabilities(model, tokenizer, items, max_length)]


def run_encoder(task: str, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Cross-validate on the train split, train the published model on all of it, measure the eval split
    before and after; saves the model, ``training_args.json`` and ``eval_results.json``."""
    import tempfile

    from transformers import AutoTokenizer, set_seed

    from convohub.metrics import user_simulation_f1
    from convohub.promise.simulators import load_items
    from convohub.training.models import resolve_model
    from convohub.training.runs import save_arguments

    args, training_args = make_encoder_parser().parse_args_and_config(
        list(argv) if argv is not None else None, fail_with_unknown_args=True)
    if args.folds < 1:
        raise ValueError(f"folds must be >= 1, got {args.folds}")
    check_head(task, args.head)
    out = Path(training_args.output_dir)
    train = load_items(args.dataset_path, args.train_split)[task]
    test = load_items(args.dataset_path, args.eval_split)[task]
    labels = [int(i["label"]) for i in train]
    print(f"{task}: {len(train)} {args.train_split} items, {len(test)} {args.eval_split} items")
    path = resolve_model(args.model_name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    started = time.perf_counter()

    # 1. k-fold cross-validation on the train split, grouped by dialogue
    cv: dict[str, Any] = {"folds": args.folds}
    if args.folds > 1:
        from sklearn.model_selection import GroupKFold

        groups = [i["dialogue_id"] for i in train]
        if len(set(groups)) < args.folds:
            raise ValueError(f"{args.folds}-fold cross-validation needs at least {args.folds} dialogues in "
                             f"{args.train_split}, found {len(set(groups))}; lower --folds")
        splitter = GroupKFold(n_splits=args.folds, shuffle=True, random_state=training_args.seed)
        predicted, sizes = [-1] * len(train), []
        with tempfile.TemporaryDirectory() as tmp:
            for k, (inside, held) in enumerate(splitter.split(train, labels, groups)):
                model, _ = _train(task, args, training_args, [train[n] for n in inside], f"{tmp}/fold{k}",
                                  tokenizer)
                for n, p in zip(held, _predict(model, tokenizer, [train[n] for n in held], args.max_length),
                                strict=True):
                    predicted[n] = p
                sizes.append(len(held))
        cv |= {"scores": user_simulation_f1(predicted, labels, task=task), "fold_sizes": sizes}

    # 2. the published model: the fresh head on the eval split, training on the whole train split, again
    set_seed(training_args.seed)
    fresh = fresh_classifier(task, path, args.head).eval()
    gold = [int(i["label"]) for i in test]
    before = user_simulation_f1(_predict(fresh, tokenizer, test, args.max_length), gold, task=task)
    model, trainer = _train(task, args, training_args, train, str(out), tokenizer, fresh)
    after = user_simulation_f1(_predict(model, tokenizer, test, args.max_length), gold, task=task)
    seconds = time.perf_counter() - started

    # 3. save (main process), with the arguments and the measured numbers
    model.config.promise_max_length = args.max_length
    trainer.save_model(str(out))
    results = {"task": task, "split": args.eval_split, "before": before, "after": after, "cv": cv,
               "train_items": len(train), "eval_items": len(test), "train_split": args.train_split,
               "base_model": args.model_name_or_path, "head": args.head, "class_weighting": args.class_weighting,
               "epochs": float(training_args.num_train_epochs), "max_steps": int(training_args.max_steps),
               "train_seconds": round(seconds, 1)}
    if trainer.is_world_process_zero():
        save_arguments(out, script=args, training=training_args)
        atomic_write_text(out / EVAL_FILE, dump_json(results))
    cv_text = f"{args.folds}-fold CV macro-F1 {cv['scores']['macro_f1']:.4f}, " if "scores" in cv else ""
    print(f"{task}: {cv_text}{args.eval_split} macro-F1 {before['macro_f1']:.4f} -> {after['macro_f1']:.4f} "
          f"({seconds:.1f} s)")
    if training_args.push_to_hub:  # pragma: no cover - needs the Hub
        trainer.push_to_hub()
    return results


# ------------------------------------------------------------------------------------------------ LoRA
#: the generative simulator's ways of balancing its training turns across actions (the parser offers them)
ActionBalance = Literal["none", "oversample"]
ACTION_BALANCES: tuple[str, ...] = get_args(ActionBalance)


@dataclass
class SimulatorArguments:
    """Data arguments of the generative simulator script (also: trl's SFTConfig and ModelConfig)."""

    dataset_path: str = field(default="hub_release/datasets/convohub/promise",
                              metadata={"help": "a built promise dataset folder"})
    train_split: str = field(default="validation")
    max_train_examples: int | None = field(default=None, metadata={"help": "cap on training turns (seeded)"})
    action_balance: ActionBalance = field(default="none", metadata={
        "help": "'oversample': repeat turns (seeded, with replacement) until every action of the train split is as "
                "frequent as the most frequent one, the generative counterpart of the encoders' balanced class "
                "weighting (for macro-F1); 'none': the turns as they are"})


def reply_of(row: Mapping[str, Any]) -> str:
    """The reply a prompt/completion row of :func:`action_rows` teaches (``1``-``4``, ``none`` or ``done``)."""
    return str(row["completion"][0]["content"])


def balance_actions(rows: Sequence[Mapping[str, Any]], mode: str, seed: int) -> list[Mapping[str, Any]]:
    """``rows`` of :func:`action_rows` with every reply's rows (:func:`reply_of`) drawn again, seeded and with
    replacement, up to the count of the most frequent reply (``mode`` 'oversample'), then shuffled so that no step
    sees one reply only; ``mode`` 'none' returns them unchanged. A LoRA simulator trained on a few dozen turns
    otherwise learns one reply and answers it to every turn."""
    import random

    if mode not in ACTION_BALANCES:
        raise ValueError(f"action_balance must be one of {', '.join(ACTION_BALANCES)}, got {mode!r}")
    if mode == "none" or not rows:
        return list(rows)
    rng = random.Random(seed)
    by_reply: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_reply.setdefault(reply_of(row), []).append(row)
    most = max(len(v) for v in by_reply.values())
    out = [r for reply in sorted(by_reply) for r in
           by_reply[reply] + rng.choices(by_reply[reply], k=most - len(by_reply[reply]))]
    rng.shuffle(out)
    return out


def make_lora_parser() -> Any:
    from trl import ModelConfig, SFTConfig, TrlParser

    return TrlParser((SimulatorArguments, SFTConfig, ModelConfig))


def action_rows(dialogues: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One prompt/completion chat per turn: the user prompt, and the action as the simulator must reply it."""
    from convohub.promise.prompts import USER_INSTRUCTION, completion_text, user_prompt
    from convohub.promise.records import context_questions

    rows = []
    for d in dialogues:
        for turn in d["turns"]:
            asked = context_questions(d, int(turn["turn_index"]))
            candidates = [qa["question"] for qa in turn["suggested_qas"]]
            rows.append({"prompt": [{"role": "system", "content": USER_INSTRUCTION},
                                    {"role": "user", "content": user_prompt(d["intent"], asked, candidates)}],
                         "completion": [{"role": "assistant", "content": completion_text(turn["action"])}]})
    return rows


def run_lora(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """LoRA SFT on the train split's turns (:func:`convohub.training.chat_sft.train_chats`): the merged model,
    ``training_args.json`` and the run's record (``train_results.json``; the test scores come from the release's
    evaluation) go to ``output_dir``."""
    import random
    from collections import Counter

    import datasets

    from convohub.hub import load_split
    from convohub.training.chat_sft import train_chats

    args, training_args, model_args = make_lora_parser().parse_args_and_config(
        list(argv) if argv is not None else None, fail_with_unknown_args=True)
    rows = action_rows([dict(d) for d in load_split(args.dataset_path, "dialogues", args.train_split)])
    if args.max_train_examples is not None and len(rows) > args.max_train_examples:
        rows = random.Random(training_args.seed).sample(rows, args.max_train_examples)
    replies = Counter(map(reply_of, rows))
    balanced = balance_actions(rows, args.action_balance, training_args.seed)
    print(f"generative simulator: {len(rows)} training turns from {args.train_split}"
          + (f", {len(balanced)} rows after {args.action_balance} across {len(replies)} replies"
             if args.action_balance != "none" else ""))
    results = train_chats(datasets.Dataset.from_list(balanced), args, training_args, model_args,
                          record={"stage": "sft", "train_split": args.train_split, "train_turns": len(rows),
                                  "action_balance": args.action_balance, "reply_counts": dict(sorted(replies.items()))})
    print(f"generative simulator: {results['steps']} steps in {results['train_seconds']} s, loss "
          f"{results['first_loss']} -> {results['last_loss']}")
    return results
