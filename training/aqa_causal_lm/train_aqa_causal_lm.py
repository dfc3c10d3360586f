"""Fine-tune a causal LM on WildChat-AQA's corpus: the fine-tuning baseline (method (c)) of *From Chat Logs to
Collective Insights: Aggregative Question Answering*.

Every conversation of the built ``wildchat-aqa`` folder (``--context raw``: config ``conversations``) or its
summary (``--context summary``: config ``summaries``) becomes one chat in the authors' format
(:func:`convohub.aqa.chat_format.aqa_messages`): a system line "Time: <time>, user <name> is from
<country>." and the turns as "User <name>: ..." / "Assistant: ...". The loss covers all tokens. The model is
then asked the aggregative questions with no context (:func:`convohub.aqa.model_specs.evaluate`: NDCG@k of
the base and of the trained model on the same questions, and the perplexity of chats held out of training).
LoRA adapters are merged before saving, so the folder loads with plain ``AutoModelForCausalLM.from_pretrained``;
``training_args.json`` and ``train_results.json`` record what the run used and did
(:mod:`convohub.training.chat_sft`).

Offline (CPU, about a minute), SmolLM2-135M-Instruct with LoRA r 16 on all linear layers, summaries:

    accelerate launch --config_file training/accelerate/cpu.yaml training/aqa_causal_lm/train_aqa_causal_lm.py \\
        --config training/aqa_causal_lm/tiny.yaml --dataset_path <hub>/datasets/convohub/wildchat-aqa

Paper scale (Qwen/Qwen3-8B, peak LR 1e-5, batch 8, linear decay, 1 epoch, fp16, max_length 8192, raw
conversations; ``--context summary`` for the summary row of Table 3):

    accelerate launch --config_file training/accelerate/deepspeed_zero3.yaml \\
        training/aqa_causal_lm/train_aqa_causal_lm.py --config training/aqa_causal_lm/paper.yaml

Every trl ``SFTConfig`` / ``ModelConfig`` flag works on the command line and overrides the recipe.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class AQACausalLMArguments:
    """Data arguments of this script (trainer and model arguments come from trl's dataclasses)."""

    dataset_path: str = field(default="convohub/wildchat-aqa",
                              metadata={"help": "wildchat-aqa repo id or local folder (built by convohub)"})
    context: str = field(default="raw", metadata={
        "help": "raw: train on the conversations; summary: on their summaries", "choices": ["raw", "summary"]})
    max_train_samples: int | None = field(default=None, metadata={
        "help": "cap on training conversations (a seeded random subset, seed = data_seed or seed); the "
                "evaluation measures perplexity on conversations outside it"})
    max_eval_questions: int | None = field(default=None, metadata={
        "help": "cap on the questions the evaluation asks (recorded for it; all by default)"})


def make_parser():
    """The script's parser: (script args, SFTConfig, ModelConfig), recipes parsed strictly."""
    from trl import ModelConfig, SFTConfig, TrlParser

    return TrlParser((AQACausalLMArguments, SFTConfig, ModelConfig))


def load_corpus(dataset_path: str, context: str) -> Any:
    """The ``conversations`` or ``summaries`` config (split ``train``) of a local folder or a Hub dataset."""
    from convohub.hub import load_split

    return load_split(dataset_path, "conversations" if context == "raw" else "summaries", "train")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Train, merge, save the model, ``training_args.json`` and ``train_results.json``, optionally push."""
    from convohub.aqa.chat_format import aqa_messages
    from convohub.training.chat_sft import subsample, subset_seed, train_chats

    parser = make_parser()
    args, training_args, model_args = parser.parse_args_and_config(
        list(argv) if argv is not None else None, fail_with_unknown_args=True)
    if args.context not in ("raw", "summary"):
        raise SystemExit(f"--context must be raw or summary, got {args.context!r}")

    # 1. data: every conversation (or summary) as one chat in the authors' format
    corpus = load_corpus(args.dataset_path, args.context)
    train = subsample(corpus, args.max_train_samples, training_args)
    if len(train) == 0:
        raise SystemExit(f"no conversations in {args.dataset_path} ({args.context})")
    train = train.map(lambda r: {"messages": aqa_messages(r, args.context)}, remove_columns=train.column_names)

    # 2.-4. model, training, merged weights + the run's record (convohub.training.chat_sft)
    record = {"dataset_path": args.dataset_path, "context": args.context, "corpus_size": len(corpus),
              "max_train_samples": args.max_train_samples, "data_seed": subset_seed(training_args),
              "max_eval_questions": args.max_eval_questions}
    return train_chats(train, args, training_args, model_args, record=record, push_dataset=args.dataset_path)


if __name__ == "__main__":
    main()
