"""Fine-tune a causal LM on WildChat-format conversations.

This is WildChat-AQA's corpus fine-tuning baseline (method (c) of the paper: a causal LM trained on all
conversations, then asked aggregative questions with no context). Each conversation becomes one chat
(:func:`convohub.corpus.chat_format.conversation_to_messages`): a system line "Time: <date>, user <id> is
from <country>." and the user/assistant turns; the loss covers all tokens. LoRA adapters are merged
before saving, so the output folder loads with plain ``AutoModelForCausalLM.from_pretrained``.

Next to the model the script writes ``training_args.json`` (every argument group as resolved, like every
convohub script) and ``train_results.json``: what the run used (base model, data, max_length, evaluation
split and cap) and did (optimiser steps, examples, seconds, loss, LoRA or full). The evaluation (:func:`convohub.corpus.chat_lm.evaluate`: held-out perplexity of the base
and of the trained model) and the model card read that file, so command-line overrides reach them.

Offline (CPU, ~2 min), SmolLM2-135M-Instruct with LoRA r 16 on all linear layers:

    accelerate launch --config_file training/accelerate/cpu.yaml training/chat_lm/train_chat_lm.py \\
        --config training/chat_lm/tiny.yaml --dataset_path <hub>/datasets/convohub/wildchat-sample

Paper scale (Qwen3-8B, peak LR 1e-5, batch 8, linear decay, 1 epoch, fp16, max_length 8192), one node:

    accelerate launch --config_file training/accelerate/deepspeed_zero3.yaml \\
        training/chat_lm/train_chat_lm.py --config training/chat_lm/paper.yaml

LoRA instead of a full fine-tune: ``--use_peft --lora_r 16 --lora_alpha 32 --lora_target_modules
all-linear``; QLoRA: also ``--load_in_4bit``. Every SFTConfig / ModelConfig flag of trl works on the
command line and overrides the recipe.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ChatLMArguments:
    """Data arguments of this script (trainer and model arguments come from trl's dataclasses).

    ``eval_split``/``max_eval_samples`` are not used by training: they are recorded in
    ``train_results.json`` and name the held-out conversations the evaluation scores."""

    dataset_path: str = field(default="convohub/wildchat-sample",
                              metadata={"help": "dataset repo id or local folder (built by convohub)"})
    dataset_config: str = field(default="conversations", metadata={"help": "dataset config name"})
    train_split: str = field(default="train")
    eval_split: str = field(default="test", metadata={"help": "held-out split the evaluation scores"})
    max_train_samples: int | None = field(default=None, metadata={
        "help": "cap on training conversations (a seeded random subset, seed = data_seed or seed)"})
    max_eval_samples: int | None = field(default=200, metadata={
        "help": "cap on held-out conversations the evaluation scores (the first ones of eval_split)"})


def make_parser():
    """The script's parser: (script args, SFTConfig, ModelConfig), recipes parsed strictly."""
    from trl import ModelConfig, SFTConfig, TrlParser

    return TrlParser((ChatLMArguments, SFTConfig, ModelConfig))


def load_conversations(args: ChatLMArguments, split: str) -> Any:
    """One split of the ``conversations`` config from a local convohub folder or a Hub dataset id."""
    if Path(args.dataset_path).is_dir():  # a folder convohub wrote: read its Parquet directly (no stale cache)
        from convohub.hub import load_local

        return load_local(args.dataset_path, args.dataset_config, split)
    import datasets

    return datasets.load_dataset(args.dataset_path, args.dataset_config, split=split)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train, merge, save the model, ``training_args.json`` and ``train_results.json``, optionally push.
    Returns the training record (``train_results.json``)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTTrainer

    from convohub.corpus.chat_format import conversation_to_messages
    from convohub.corpus.chat_lm import TRAINING_RECORD_FILE
    from convohub.hub import atomic_write_text, dump_json
    from convohub.training.models import hub_id, model_init_kwargs, resolve_model
    from convohub.training.runs import save_arguments

    parser = make_parser()
    args, training_args, model_args = parser.parse_args_and_config(
        list(argv) if argv is not None else None, fail_with_unknown_args=True)
    torch.manual_seed(training_args.seed)

    # 1. data
    train = load_conversations(args, args.train_split)
    if args.max_train_samples is not None and args.max_train_samples < len(train):
        data_seed = training_args.data_seed if training_args.data_seed is not None else training_args.seed
        train = train.shuffle(seed=data_seed).select(range(args.max_train_samples))
    if len(train) == 0:
        raise SystemExit(f"no training conversations in {args.dataset_path} ({args.dataset_config}/{args.train_split})")
    train = train.map(lambda r: {"messages": conversation_to_messages(r)}, remove_columns=train.column_names)

    # 2. model
    model_path = resolve_model(model_args.model_name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path, **model_init_kwargs(model_args))

    # 3. train
    peft_config = None
    if model_args.use_peft:
        from trl import get_peft_config

        peft_config = get_peft_config(model_args)
    trainer = SFTTrainer(model=model, args=training_args, train_dataset=train, processing_class=tokenizer,
                         peft_config=peft_config)
    started = time.perf_counter()
    train_result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    seconds = time.perf_counter() - started

    # 4. save merged weights (+ tokenizer, via the trainer) and the resolved arguments
    if model_args.use_peft:
        trainer.model = trainer.accelerator.unwrap_model(trainer.model).merge_and_unload()
    out = Path(training_args.output_dir)
    trainer.save_model(str(out))
    record = {
        "model_name_or_path": model_args.model_name_or_path,
        "base_model": hub_id(model_args.model_name_or_path),
        "dataset_path": args.dataset_path,
        "dataset_config": args.dataset_config,
        "train_split": args.train_split,
        "eval_split": args.eval_split,
        "max_eval_samples": args.max_eval_samples,
        "max_length": training_args.max_length,
        "method": "lora" if model_args.use_peft else "full",
        "lora": ({"r": model_args.lora_r, "alpha": model_args.lora_alpha, "dropout": model_args.lora_dropout,
                  "target_modules": model_args.lora_target_modules} if model_args.use_peft else None),
        "learning_rate": training_args.learning_rate,
        "lr_scheduler_type": str(training_args.lr_scheduler_type.value
                                 if hasattr(training_args.lr_scheduler_type, "value")
                                 else training_args.lr_scheduler_type),
        "batch_size": training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps
        * training_args.world_size,
        "steps": int(trainer.state.global_step),
        "epochs": round(float(trainer.state.epoch or 0.0), 4),
        "train_examples": len(train),
        "train_loss": round(float(train_result.training_loss), 4),
        "train_seconds": round(seconds, 1),
        "seconds_per_step": round(seconds / max(trainer.state.global_step, 1), 2),
        "seed": training_args.seed,
    }
    if trainer.is_world_process_zero():
        save_arguments(out, script=args, training=training_args, model=model_args)
        atomic_write_text(out / TRAINING_RECORD_FILE, dump_json(record))
        print(json.dumps(record, indent=2, sort_keys=True))
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=args.dataset_path)
    return record


if __name__ == "__main__":
    main()
