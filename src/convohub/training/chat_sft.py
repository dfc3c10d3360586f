"""The fine-tuning core the causal-LM chat scripts share: SFT on chats, merge, save, record the run.

``training/chat_lm/`` (the WildChat-format corpus), ``training/aqa_causal_lm/`` (WildChat-AQA's corpus in
the authors' chat format) and ``training/promise_lora_simulator/`` (ProMISe's user turns as prompt/completion
chats) differ only in which rows become which chats. Each hands a dataset in one of trl's conversational
formats (``messages``, or ``prompt`` and ``completion``) to :func:`train_chats`, which loads the recipe's
model (``smollm2``, a tiny plumbing model or a Hub id, :func:`convohub.training.models.resolve_model`),
trains with trl's ``SFTTrainer`` (loss on every token of a ``messages`` chat, on the completion only of a
prompt/completion one; LoRA when the recipe asks), merges a LoRA adapter (into the unquantised base after
QLoRA, :mod:`convohub.training.merge`) so the folder loads with plain
``AutoModelForCausalLM.from_pretrained``, saves it with ``trainer.save_model`` (only the main process
writes), and writes ``training_args.json`` plus the run's record (``train_results.json``: what the run
used and did), which evaluation and the card read instead of the recipe.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Written next to the model by :func:`train_chats`; read by evaluations and cards.
TRAINING_RECORD_FILE = "train_results.json"


def train_chats(train: Any, script_args: Any, training_args: Any, model_args: Any, *,
                record: Mapping[str, Any], push_dataset: str | None = None) -> dict[str, Any]:
    """Fine-tune on ``train`` (a ``datasets.Dataset`` with ``messages``, or ``prompt`` and ``completion``: then
    the loss is on the completion only), save, and return the run's record:
    ``record`` (the script's own fields: data, splits, caps) followed by what training used and did."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTTrainer

    from convohub.hub import atomic_write_text, dump_json
    from convohub.training.lm_head import score_label_positions_only
    from convohub.training.merge import merged_for_publishing
    from convohub.training.models import check_mixed_precision, hub_id, model_init_kwargs, resolve_model
    from convohub.training.runs import save_arguments

    check_mixed_precision(model_args, training_args)
    torch.manual_seed(training_args.seed)
    model_path = resolve_model(model_args.model_name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path, **model_init_kwargs(model_args))
    peft_config = None
    if model_args.use_peft:
        from trl import get_peft_config

        peft_config = get_peft_config(model_args)
    score_label_positions_only()  # trl's fused head then projects only the labelled positions on CPU too
    trainer = SFTTrainer(model=model, args=training_args, train_dataset=train, processing_class=tokenizer,
                         peft_config=peft_config)
    started = time.perf_counter()
    result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    seconds = time.perf_counter() - started

    if model_args.use_peft:
        trainer.model = merged_for_publishing(trainer.accelerator.unwrap_model(trainer.model), model_path, model_args)
    out = Path(training_args.output_dir)
    trainer.save_model(str(out))
    scheduler = training_args.lr_scheduler_type
    steps = int(trainer.state.global_step)
    losses = [round(float(e["loss"]), 4) for e in trainer.state.log_history if "loss" in e]
    full = {
        "model_name_or_path": model_args.model_name_or_path,
        "base_model": hub_id(model_args.model_name_or_path),
        **record,
        "max_length": training_args.max_length,
        "method": "lora" if model_args.use_peft else "full",
        "lora": ({"r": model_args.lora_r, "alpha": model_args.lora_alpha, "dropout": model_args.lora_dropout,
                  "target_modules": model_args.lora_target_modules} if model_args.use_peft else None),
        "learning_rate": training_args.learning_rate,
        "lr_scheduler_type": str(scheduler.value if hasattr(scheduler, "value") else scheduler),
        "batch_size": training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps
        * training_args.world_size,
        "steps": steps,
        "epochs": round(float(trainer.state.epoch or 0.0), 4),
        "train_examples": len(train),
        "train_loss": round(float(result.training_loss), 4),
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "train_seconds": round(seconds, 1),
        "seconds_per_step": round(seconds / max(steps, 1), 2),
        "seed": training_args.seed,
    }
    if trainer.is_world_process_zero():
        save_arguments(out, script=script_args, training=training_args, model=model_args)
        atomic_write_text(out / TRAINING_RECORD_FILE, dump_json(full))
        print(json.dumps(full, indent=2, sort_keys=True))
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=push_dataset)
    return full


def subset_seed(training_args: Any) -> int:
    """The seed of :func:`subsample`'s subset: ``data_seed``, else ``seed``."""
    return training_args.data_seed if training_args.data_seed is not None else training_args.seed


def subsample(rows: Any, cap: int | None, training_args: Any) -> Any:
    """At most ``cap`` rows, a seeded random subset (seed :func:`subset_seed`)."""
    if cap is None or cap >= len(rows):
        return rows
    return rows.shuffle(seed=subset_seed(training_args)).select(range(cap))


def held_out(rows: Any, cap: int | None, seed: int, n: int) -> Any:
    """Up to ``n`` rows that :func:`subsample` with ``cap`` and ``seed`` left out (none when it kept every
    row): the same permutation, read past the subset."""
    if cap is None or cap >= len(rows):
        return rows.select([])
    return rows.shuffle(seed=seed).select(range(cap, min(len(rows), cap + n)))


def card_training_values(record: Mapping[str, Any], *extra: str) -> dict[str, Any]:
    """The card template values every chat-SFT model shares, from its run's record: the base model (block
    ``hub_base`` or ``unnamed_base``), the method (block ``lora`` with its settings, or ``full``) and what
    training did; ``extra`` names more record keys to pass through."""
    from convohub.model_spec import block

    lora = record.get("lora")
    keys = ("steps", "train_examples", "epochs", "batch_size", "learning_rate", "lr_scheduler_type", "train_loss",
            "train_seconds", "seconds_per_step", "seed", *extra)
    return {"base_note": block(bool(record.get("base_model")), "hub_base", "unnamed_base"),
            "base_model": record.get("base_model"), "model_name_or_path": record["model_name_or_path"],
            "method": block(bool(lora), "lora", "full"),
            **({f"lora_{k}": lora[k] for k in ("r", "alpha", "dropout", "target_modules")} if lora else {}),
            **{k: record[k] for k in keys}, "train_max_length": record["max_length"]}
