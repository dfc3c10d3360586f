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

from collections.abc import Sequence
from dataclasses import dataclass, field
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
    from convohub.hub import load_split

    return load_split(args.dataset_path, args.dataset_config, split)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train, merge, save the model, ``training_args.json`` and ``train_results.json``, optionally push.
    Returns the training record (``train_results.json``)."""
    from convohub.corpus.chat_format import conversation_to_messages
    from convohub.training.chat_sft import subsample, train_chats

    parser = make_parser()
    args, training_args, model_args = parser.parse_args_and_config(
        list(argv) if argv is not None else None, fail_with_unknown_args=True)

    # 1. data
    train = subsample(load_conversations(args, args.train_split), args.max_train_samples, training_args)
    if len(train) == 0:
        raise SystemExit(f"no training conversations in {args.dataset_path} ({args.dataset_config}/{args.train_split})")
    train = train.map(lambda r: {"messages": conversation_to_messages(r)}, remove_columns=train.column_names)

    # 2.-4. model, training, merged weights + the run's record (convohub.training.chat_sft)
    record = {"dataset_path": args.dataset_path, "dataset_config": args.dataset_config,
              "train_split": args.train_split, "eval_split": args.eval_split,
              "max_eval_samples": args.max_eval_samples}
    return train_chats(train, args, training_args, model_args, record=record, push_dataset=args.dataset_path)


if __name__ == "__main__":
    main()
