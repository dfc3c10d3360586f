"""Fine-tune a causal LM on WildChat-format conversations.

This is WildChat-AQA's corpus fine-tuning baseline (method (c) of the paper: a causal LM trained on all
conversations, then asked aggregative questions with no context). Each conversation becomes one chat:
a system line "Time: <date>, user <id> is from <country>." and the user/assistant turns; the loss covers
all tokens. The model's held-out perplexity on the test split is measured before and after training and
written to ``<output_dir>/eval_results.json`` (the model card reads it from there).

Offline (CPU, seconds), a tiny Llama-style model with a locally trained tokenizer:

    convohub train training/chat_lm/tiny.yaml --dataset_path hub_release/datasets/convohub/wildchat-sample

Paper scale (Qwen3-8B, peak LR 1e-5, batch 8, linear decay, 1 epoch, fp16, max_length 8192), one node:

    accelerate launch --config_file training/accelerate/deepspeed_zero3.yaml \\
        training/chat_lm/train_chat_lm.py --config training/chat_lm/paper.yaml

LoRA instead of a full fine-tune: add ``--use_peft --lora_r 16 --lora_alpha 32``; QLoRA: also
``--load_in_4bit``. Every SFTConfig / ModelConfig flag of trl works on the command line and overrides the
recipe.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convohub.hub import atomic_write_text, dump_json


@dataclass
class ChatLMArguments:
    """Data arguments of this script (trainer and model arguments come from trl's dataclasses)."""

    dataset_path: str = field(default="convohub/wildchat-sample",
                              metadata={"help": "dataset repo id or local folder (built by convohub)"})
    dataset_config: str = field(default="conversations", metadata={"help": "dataset config name"})
    train_split: str = field(default="train")
    eval_split: str = field(default="test")
    max_train_samples: int | None = field(default=None, metadata={"help": "cap on training conversations"})
    max_eval_samples: int | None = field(default=200, metadata={"help": "cap on held-out conversations"})


def make_parser():
    """The script's parser: (script args, SFTConfig, ModelConfig), recipes parsed strictly."""
    from trl import ModelConfig, SFTConfig, TrlParser

    return TrlParser((ChatLMArguments, SFTConfig, ModelConfig))


def conversation_to_messages(row: dict[str, Any]) -> list[dict[str, str]]:
    """One dataset row -> chat messages in the format of the paper's fine-tuning baseline."""
    day = str(row.get("timestamp") or "")[:10] or "unknown"
    system = f"Time: {day}, user {row.get('user_id', 'unknown')} is from {row.get('country') or 'unknown'}."
    messages = [{"role": "system", "content": system}]
    for turn in row["turns"]:
        role = "assistant" if turn["role"] == "assistant" else "user"
        messages.append({"role": role, "content": turn["content"]})
    return messages


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Train, save, measure perplexity before/after, optionally push. Returns the eval results."""
    import datasets
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTTrainer

    from convohub.training.models import model_init_kwargs, resolve_model
    from convohub.training.perplexity import perplexity

    parser = make_parser()
    script_args, training_args, model_args = parser.parse_args_and_config(
        list(argv) if argv is not None else None, fail_with_unknown_args=True)
    torch.manual_seed(training_args.seed)

    # 1. data
    source = script_args.dataset_path
    if Path(source).is_dir():  # a folder convohub wrote: read its Parquet directly (no stale cache)
        from convohub.hub import load_local

        ds = load_local(source, script_args.dataset_config)
    else:  # a Hub dataset id
        ds = datasets.load_dataset(source, script_args.dataset_config)
    train, held_out = ds[script_args.train_split], ds[script_args.eval_split]
    if script_args.max_train_samples:
        train = train.select(range(min(script_args.max_train_samples, len(train))))
    if script_args.max_eval_samples:
        held_out = held_out.select(range(min(script_args.max_eval_samples, len(held_out))))
    train = train.map(lambda r: {"messages": conversation_to_messages(r)}, remove_columns=train.column_names)
    eval_messages = [conversation_to_messages(r) for r in held_out]

    # 2. model
    model_path = resolve_model(model_args.model_name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path, **model_init_kwargs(model_args))
    eval_texts = [tokenizer.apply_chat_template(m, tokenize=False) for m in eval_messages]
    ppl_before = perplexity(model, tokenizer, eval_texts, max_length=training_args.max_length or 512)

    # 3. train
    peft_config = None
    if model_args.use_peft:
        from trl import get_peft_config

        peft_config = get_peft_config(model_args)
    trainer = SFTTrainer(model=model, args=training_args, train_dataset=train, processing_class=tokenizer,
                         peft_config=peft_config)
    checkpoint = training_args.resume_from_checkpoint
    train_result = trainer.train(resume_from_checkpoint=checkpoint)

    # 4. evaluate, 5. save (+ push)
    trained = trainer.model
    if model_args.use_peft:
        trained = trained.merge_and_unload()
    ppl_after = perplexity(trained, tokenizer, eval_texts, max_length=training_args.max_length or 512)
    results = {
        "perplexity_before": round(ppl_before, 4),
        "perplexity_after": round(ppl_after, 4),
        "train_loss": round(float(train_result.training_loss), 4),
        "train_samples": len(train),
        "eval_samples": len(eval_texts),
        "epochs": float(training_args.num_train_epochs),
    }
    out = Path(training_args.output_dir)
    trained.save_pretrained(out)
    tokenizer.save_pretrained(out)
    atomic_write_text(out / "eval_results.json", dump_json(results))
    print(json.dumps(results, indent=2, sort_keys=True))
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=script_args.dataset_path)
    return results


if __name__ == "__main__":
    main()
