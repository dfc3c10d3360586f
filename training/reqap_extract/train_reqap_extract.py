"""Fine-tune ReQAP's EXTRACT model: a model that reads one attribute value off one event.

Input ``"Attribute: {key}, Event: {key: json(value) lines}"``, output the value or ``null``. Training pairs
are derived from a built PerQA dataset by :mod:`convohub.reqap.data.extract` (train personas -> train
pairs, dev personas -> held-out pairs; positives, null negatives, key aliases with weight 0.2). After
training the held-out exact match (greedy decoding) is measured and written to
``<output_dir>/eval_results.json``; the resolved arguments (recipe + CLI overrides) to
``<output_dir>/training_args.json``, which evaluation reads.

Two architectures, chosen by the recipe's ``architecture`` (or ``--architecture``):

* ``seq2seq`` (the paper: BART, T5): the loss weights each pair
  (:class:`convohub.reqap.release.extract.WeightedSeq2SeqTrainer`); trainer arguments are
  Seq2SeqTrainingArguments.
* ``causal`` (the offline profile: SmolLM2-135M-Instruct with LoRA): each pair is a prompt/completion chat
  (:func:`convohub.reqap.components.extract.extraction_messages`, loss on the value only), alias pairs kept
  at their weight's rate, trained by trl's ``SFTTrainer`` through :func:`convohub.training.chat_sft.train_chats`
  (SFTConfig and ModelConfig arguments, LoRA merged into the saved weights)::

    convohub train training/reqap_extract/tiny.yaml --dataset_path /tmp/hub/datasets/convohub/perqa

A plumbing recipe with no pretrained base (CPU, about a minute): a BART of 2+2 layers built from scratch whose
BPE tokenizer is trained on the generated pairs (``convohub-tiny:seq2seq`` + ``train_tokenizer_on_data:
true``):

    convohub datasets build perqa --out /tmp/hub      # or any folder holding the perqa dataset
    convohub train training/reqap_extract/tiny_bart.yaml --dataset_path /tmp/hub/datasets/convohub/perqa

Paper scale (facebook/bart-base, 3 epochs, lr 1e-4, batch 16 x accumulation 8, weight decay 0.01, max
length 512, best checkpoint by held-out exact match, greedy decoding with no_repeat_ngram_size 3):

    accelerate launch --config_file training/accelerate/single_gpu.yaml \\
        training/reqap_extract/train_reqap_extract.py --config training/reqap_extract/paper.yaml

Size variants of the paper (same recipe, override the model): M ``--model_name_or_path
lucadiliello/bart-small``, S ``google/t5-efficient-mini``, XS ``google/t5-efficient-tiny`` (the paper's L is
bart-base). Every Seq2SeqTrainingArguments flag works on the command line and overrides the recipe.

no_repeat_ngram_size: a reference whose token ids repeat an n-gram can never be generated under the ban
(lists whose elements share a surname, times like 00:00:00). The script counts such held-out references
(``references_blocked_by_no_repeat``) and measures exact match with and without the ban; see README.md.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convohub.hub import atomic_write_text, dump_json


@dataclass
class ExtractDataArguments:
    """Pair derivation, lengths and the held-out measurement: what the seq2seq and the causal recipes share."""

    architecture: str = field(default="seq2seq", metadata={
        "help": "seq2seq (BART, T5: the paper; Seq2SeqTrainingArguments) or causal (a chat LM such as smollm2, "
                "fine-tuned on the pairs as chats; trl's SFTConfig and ModelConfig, LoRA included)"})
    dataset_path: str = field(default="convohub/perqa",
                              metadata={"help": "PerQA dataset repo id or local folder (built by convohub)"})
    train_split: str = field(default="train")
    eval_split: str = field(default="dev")
    max_train_pairs: int = field(default=100_000, metadata={"help": "cap on training pairs (seeded sample)"})
    max_eval_pairs: int = field(default=10_000, metadata={"help": "cap on held-out pairs (seeded sample)"})
    max_events_per_source: int | None = field(default=None, metadata={
        "help": "keep at most this many events per persona and source (None: all)"})
    max_final_eval_pairs: int | None = field(default=1000, metadata={
        "help": "held-out pairs for the final exact match written to eval_results.json"})
    alias_weight: float = field(default=0.2, metadata={
        "help": "weight of key-alias pairs: their loss weight (seq2seq), the share of them kept (causal)"})
    with_persona_names: bool = field(default=False, metadata={"help": "append the persona's names to inputs"})
    max_source_length: int = field(default=512, metadata={"help": "longest input in tokens"})
    max_target_length: int = field(default=64, metadata={"help": "longest value in tokens (new tokens generated)"})


@dataclass
class ExtractArguments(ExtractDataArguments):
    """The seq2seq model's arguments (trainer arguments: Seq2SeqTrainingArguments)."""

    model_name_or_path: str = field(default="facebook/bart-base",
                                    metadata={"help": "Hub id, local folder or convohub-tiny:seq2seq"})
    train_tokenizer_on_data: bool = field(default=False, metadata={
        "help": "with convohub-tiny:seq2seq: build the tiny BART with a tokenizer trained on the pairs"})
    tokenizer_vocab_size: int = field(default=2048, metadata={"help": "vocabulary of the tiny tokenizer"})
    tiny_d_model: int = field(default=64, metadata={"help": "width of the data-built tiny BART"})
    tiny_layers: int = field(default=2, metadata={"help": "encoder and decoder layers of the tiny BART"})
    use_sample_weights: bool = field(default=True, metadata={"help": "weight the loss per pair (aliases)"})
    no_repeat_ngram_size: int = field(default=3, metadata={"help": "decoding n-gram ban (saved)"})


ARCHITECTURES = ("seq2seq", "causal")


def architecture(argv: Sequence[str] | None) -> str:
    """The run's architecture: ``--architecture`` on the command line, else the recipe's, else seq2seq."""
    import argparse
    import sys

    import yaml

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config")
    pre.add_argument("--architecture")
    known, _ = pre.parse_known_args(list(argv) if argv is not None else sys.argv[1:])
    chosen = known.architecture
    if chosen is None and known.config:
        chosen = (yaml.safe_load(Path(known.config).read_text(encoding="utf-8")) or {}).get("architecture")
    chosen = chosen or "seq2seq"
    if chosen not in ARCHITECTURES:
        raise ValueError(f"architecture must be one of {ARCHITECTURES}, got {chosen!r}")
    return chosen


def make_parser(arch: str = "seq2seq") -> Any:
    """The script's parser, recipes parsed strictly: seq2seq (script args, Seq2SeqTrainingArguments) or causal
    (data args, trl's SFTConfig, ModelConfig)."""
    from trl import TrlParser

    if arch == "causal":
        from trl import ModelConfig, SFTConfig

        return TrlParser((ExtractDataArguments, SFTConfig, ModelConfig))
    from transformers import Seq2SeqTrainingArguments

    return TrlParser((ExtractArguments, Seq2SeqTrainingArguments))


def derive_pairs(args: ExtractDataArguments, seed: int) -> tuple[list[Any], list[Any]]:
    """(train pairs of the train personas, held-out pairs of the eval personas), with the recipe's settings."""
    from convohub.reqap.data.extract import PairConfig, pairs_from_dataset

    config = PairConfig(seed=seed, alias_weight=args.alias_weight, with_persona_names=args.with_persona_names,
                        max_events_per_source=args.max_events_per_source)
    train_pairs = pairs_from_dataset(args.dataset_path, args.train_split, config, args.max_train_pairs)
    eval_pairs = pairs_from_dataset(args.dataset_path, args.eval_split, config, args.max_eval_pairs)
    print(f"pairs: {len(train_pairs)} train, {len(eval_pairs)} held-out ({args.eval_split})")
    return train_pairs, eval_pairs


def main_causal(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The causal variant: the pairs as prompt/completion chats (loss on the value only; alias pairs kept at
    their weight's rate, since trl's SFT has no per-example weight), LoRA SFT through
    :func:`convohub.training.chat_sft.train_chats`, then the held-out exact match of the merged model."""
    import datasets

    from convohub.reqap.components.extract import load_extract_model
    from convohub.reqap.release.extract import causal_rows, exact_match, select_eval_pairs, summarise
    from convohub.training.chat_sft import train_chats

    args, training_args, model_args = make_parser("causal").parse_args_and_config(
        list(argv) if argv is not None else None, fail_with_unknown_args=True)
    out = Path(training_args.output_dir)
    train_pairs, eval_pairs = derive_pairs(args, training_args.seed)
    rows = causal_rows(train_pairs, args.alias_weight, training_args.seed)
    run = train_chats(datasets.Dataset.from_list(rows), args, training_args, model_args,
                      record={"architecture": "causal", "train_pairs": len(train_pairs), "train_chats": len(rows)},
                      push_dataset=args.dataset_path)
    tokenizer, model = load_extract_model(out)
    final = select_eval_pairs(eval_pairs, args.max_final_eval_pairs, training_args.seed)
    results: dict[str, Any] = {"split": args.eval_split, **exact_match(
        model, tokenizer, final, batch_size=training_args.per_device_eval_batch_size,
        max_source_length=args.max_source_length, max_new_tokens=args.max_target_length)}
    results |= {"train_loss": run["train_loss"], "train_pairs": len(train_pairs), "train_chats": len(rows),
                "train_seconds": run["train_seconds"], "epochs": run["epochs"], "steps": run["steps"],
                "base_model": model_args.model_name_or_path}
    if training_args.process_index == 0:
        atomic_write_text(out / "eval_results.json", dump_json(results))
    print(summarise(results))
    return results


def build_model(args: ExtractArguments, texts: Sequence[str], out_dir: Path, seed: int) -> str:
    """The model folder to start from: the data-built tiny BART, else ``resolve_model``'s answer."""
    from convohub.training.models import TINY_PREFIX, resolve_model

    if args.train_tokenizer_on_data:
        if args.model_name_or_path != f"{TINY_PREFIX}seq2seq":
            raise ValueError("train_tokenizer_on_data needs model_name_or_path: convohub-tiny:seq2seq")
        from convohub.tiny import build_tiny_seq2seq

        return str(build_tiny_seq2seq(out_dir, texts=texts, vocab_size=args.tokenizer_vocab_size,
                                      d_model=args.tiny_d_model, layers=args.tiny_layers, seed=seed))
    return resolve_model(args.model_name_or_path)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Derive pairs, train, save, measure held-out exact match. Returns the eval results."""
    if architecture(argv) == "causal":
        return main_causal(argv)
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from convohub.reqap.release.extract import (
        WeightedCollator,
        exact_match,
        make_compute_metrics,
        select_eval_pairs,
        summarise,
        tokenize_pairs,
        weighted_trainer_class,
    )
    from convohub.training.runs import save_arguments

    parser = make_parser()
    args, training_args = parser.parse_args_and_config(list(argv) if argv is not None else None,
                                                       fail_with_unknown_args=True)
    torch.manual_seed(training_args.seed)
    out = Path(training_args.output_dir)

    # 1. pairs: train personas -> train pairs, held-out personas -> eval pairs
    train_pairs, eval_pairs = derive_pairs(args, training_args.seed)

    # 2. model and tokenizer
    sample = select_eval_pairs(train_pairs, 20_000, training_args.seed)  # tokenizer training texts
    texts = [t for p in sample for t in (p.input, p.output)]
    with tempfile.TemporaryDirectory() as tmp:  # a data-built base model is not part of the output
        model_path = build_model(args, texts, Path(tmp), training_args.seed)
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        model = AutoModelForSeq2SeqLM.from_pretrained(model_path)
    gen = model.generation_config
    gen.do_sample, gen.num_beams = False, 1
    gen.no_repeat_ngram_size = args.no_repeat_ngram_size
    gen.max_new_tokens = args.max_target_length

    # 3. train (the dataset holds only model inputs + weight, so unused-column removal must stay off)
    training_args.remove_unused_columns = False
    kw = {"max_source_length": args.max_source_length, "max_target_length": args.max_target_length}
    train_ds = tokenize_pairs(train_pairs, tokenizer, with_weights=args.use_sample_weights, **kw)
    eval_ds = tokenize_pairs(eval_pairs, tokenizer, with_weights=False, **kw)
    trainer = weighted_trainer_class()(
        model=model, args=training_args, train_dataset=train_ds,
        eval_dataset=eval_ds if training_args.eval_strategy != "no" else None,
        processing_class=tokenizer, data_collator=WeightedCollator(tokenizer, model),
        compute_metrics=make_compute_metrics(tokenizer) if training_args.predict_with_generate else None)
    started = time.perf_counter()
    train_result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    train_seconds = time.perf_counter() - started

    # 4. save, 5. measure held-out exact match with and without the n-gram ban (+ push)
    trained = trainer.model
    trainer.save_model(str(out))  # model, generation config and tokenizer (main process only)
    final = select_eval_pairs(eval_pairs, args.max_final_eval_pairs, training_args.seed)
    gen_kw = {"batch_size": training_args.per_device_eval_batch_size,
              "max_source_length": args.max_source_length, "max_new_tokens": args.max_target_length}
    results: dict[str, Any] = {"split": args.eval_split,
                               **exact_match(trained, tokenizer, final, **gen_kw)}
    if args.no_repeat_ngram_size > 0:
        results["exact_match_without_no_repeat"] = exact_match(
            trained, tokenizer, final, no_repeat_ngram_size=0, **gen_kw)["exact_match"]
    results |= {"train_loss": round(float(train_result.training_loss), 4), "train_pairs": len(train_pairs),
                "train_seconds": round(train_seconds, 1), "epochs": float(training_args.num_train_epochs),
                "base_model": args.model_name_or_path}
    if trainer.is_world_process_zero():  # evaluation reads the run's own arguments, not the recipe
        save_arguments(out, script=args, training=training_args)
        atomic_write_text(out / "eval_results.json", dump_json(results))
    print(summarise(results))
    print(json.dumps(results, indent=2, sort_keys=True))
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=args.dataset_path)
    return results


if __name__ == "__main__":
    main()
