"""Train, evaluate and publish the causal LM fine-tuned on the WildChat-format corpus.

Training launches ``training/chat_lm/train_chat_lm.py`` with the profile's recipe (``tiny.yaml``:
SmolLM2-135M-Instruct with LoRA on CPU; ``paper.yaml``: Qwen3-8B on GPUs) through ``accelerate launch``
(:func:`convohub.training.launch.run_script`). The script saves merged weights, the resolved arguments
(``training_args.json``, :func:`convohub.training.runs.save_arguments`, as every convohub script) and
``train_results.json``: what the run used and did (base model, data, steps, loss, time). Evaluation and
the card read that record, never the recipe, so command-line overrides are what they report. Evaluation measures the held-out
perplexity of the base model and of the trained model on the same texts with
:func:`convohub.training.perplexity.perplexity`; the card reports exactly those measured numbers.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from convohub.hub import HubTarget, MetricResult, ModelCardInfo, read_json, write_model

DATASET_REPO = "wildchat-sample"
#: Written by the training script next to the model; read by :func:`evaluate` and :func:`publish`.
TRAINING_RECORD_FILE = "train_results.json"
SCRIPT = Path("training") / "chat_lm" / "train_chat_lm.py"


def model_name(profile: str) -> str:
    return "wildchat-chat-lm-tiny" if profile == "tiny" else "wildchat-chat-lm-qwen3-8b"


def recipe_path(repo: Path, profile: str) -> Path:
    return repo / "training" / "chat_lm" / f"{profile}.yaml"


def train(repo: Path, profile: str, dataset_dir: Path, output_dir: Path, seed: int, *,
          overrides: Sequence[str] = (), log_file: Path | None = None) -> Path:
    """Run the training script (a subprocess under ``accelerate launch``) on the built dataset; returns
    the trained model folder. ``overrides`` are extra ``--flag value`` arguments that override the
    recipe. Raises :class:`convohub.training.launch.TrainingFailed` with the command to re-run when the
    script fails."""
    from convohub.training.launch import run_script

    run_script(repo / SCRIPT, recipe_path(repo, profile),
               ["--dataset_path", str(dataset_dir), "--output_dir", str(output_dir),
                "--seed", str(seed), "--data_seed", str(seed), *overrides], profile=profile, log_file=log_file)
    return output_dir


def read_training_record(model_dir: Path) -> dict[str, Any]:
    """What the training run used and did (data, base model, steps, loss), saved next to the model."""
    path = Path(model_dir) / TRAINING_RECORD_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: {model_dir} was not written by {SCRIPT} "
                                "(re-run the training step, or `convohub train training/chat_lm/<profile>.yaml`)")
    return read_json(path)


def _held_out_rows(args: Mapping[str, Any], dataset_dir: Path | None, limit: int | None) -> list[dict[str, Any]]:
    """The first ``limit`` conversations of the evaluation split training recorded."""
    source = str(dataset_dir) if dataset_dir is not None else str(args["dataset_path"])
    if Path(source).is_dir():
        from convohub.hub import load_local

        rows = load_local(source, args["dataset_config"], args["eval_split"])
    else:  # a Hub dataset id (paper profile)
        import datasets

        rows = datasets.load_dataset(source, args["dataset_config"], split=args["eval_split"])
    count = len(rows) if limit is None else min(limit, len(rows))
    if count == 0:
        raise ValueError(f"no conversations in split {args['eval_split']!r} of {source}")
    return [rows[i] for i in range(count)]


def evaluate(model_dir: Path, dataset_dir: Path | None = None, *,
             max_conversations: int | None = None) -> dict[str, Any]:
    """Held-out perplexity of the base model and of the trained model on the same texts.

    Base model, dataset config, split, text length and number of conversations come from the
    ``train_results.json`` training saved (``max_conversations`` overrides the recorded cap;
    ``dataset_dir`` the recorded dataset location). Both models score the same rendered texts,
    truncated to the same ``max_length``.
    """
    import gc

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from convohub.corpus.chat_format import chat_texts
    from convohub.training.models import resolve_model
    from convohub.training.perplexity import perplexity

    args = read_training_record(model_dir)
    limit = max_conversations if max_conversations is not None else args.get("max_eval_samples")
    rows = _held_out_rows(args, dataset_dir, limit)
    max_length = int(args["max_length"] or 1024)
    results: dict[str, Any] = {"split": args["eval_split"], "conversations": len(rows), "max_length": max_length,
                               "base_model": args["model_name_or_path"]}
    for key, path in (("base", resolve_model(args["model_name_or_path"])), ("trained", str(model_dir))):
        started = time.perf_counter()
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype="auto")
        texts = sorted(chat_texts(tokenizer, rows), key=len)  # similar lengths per batch: less padding
        results[f"perplexity_{key}"] = round(perplexity(model, tokenizer, texts, max_length=max_length), 4)
        results[f"seconds_{key}"] = round(time.perf_counter() - started, 1)
        del model
        gc.collect()
    return results


def _training_table(args: Mapping[str, Any]) -> str:
    lora = args.get("lora")
    method = (f"LoRA r {lora['r']}, alpha {lora['alpha']}, dropout {lora['dropout']}, on "
              f"`{lora['target_modules']}` modules, merged into the base weights" if lora else "full fine-tuning")
    rows = [("method", method), ("optimiser steps", args["steps"]),
            ("training conversations", f"{args['train_examples']} of split `{args['train_split']}`"),
            ("epochs", args["epochs"]), ("batch size", args["batch_size"]),
            ("max_length (tokens)", args["max_length"]),
            ("learning rate", f"{args['learning_rate']} ({args['lr_scheduler_type']} schedule)"),
            ("training loss", args["train_loss"]),
            ("training time", f"{args['train_seconds']} s ({args['seconds_per_step']} s per step)"),
            ("seed", args["seed"])]
    return "| | |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)


def publish(target: HubTarget, profile: str, model_dir: Path, results: dict[str, Any], recipe: Path) -> Path:
    """Write the model repo with a card carrying the measured perplexities and what training did."""
    args = read_training_record(model_dir)
    name = model_name(profile)
    dataset_id = target.repo_id(DATASET_REPO)
    base_model = args.get("base_model")
    base_note = (f"[`{base_model}`](https://huggingface.co/{base_model})" if base_model else
                 f"`{args['model_name_or_path']}` (a randomly initialised plumbing-test model, no Hub id)")
    description = (
        f"A causal language model fine-tuned on the conversations of [`{dataset_id}`]"
        f"(https://huggingface.co/datasets/{dataset_id}) (train split): the corpus fine-tuning baseline (method "
        "(c)) of *From Chat Logs to Collective Insights: Aggregative Question Answering*. Each conversation "
        "is one chat whose system line gives the date, the user and the country. Base model: "
        f"{base_note}. Trained by `training/chat_lm/train_chat_lm.py` with the `{recipe.name}` recipe; the "
        "weights are complete (any adapter is merged), so `AutoModelForCausalLM.from_pretrained` loads them "
        "as they are. Tokenizer and chat template are the base model's."
    )
    usage = (
        "```python\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n\n"
        f'tok = AutoTokenizer.from_pretrained("{target.repo_id(name)}")\n'
        f'model = AutoModelForCausalLM.from_pretrained("{target.repo_id(name)}")\n'
        'messages = [{"role": "system", "content": "Time: 2023-05-01, user u1 is from France."},\n'
        '            {"role": "user", "content": "How do I reverse a list in Python?"}]\n'
        "inputs = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors=\"pt\",\n"
        "                                 return_dict=True)\n"
        "out = model.generate(**inputs, max_new_tokens=40, do_sample=False)\n"
        "print(tok.decode(out[0, inputs[\"input_ids\"].shape[1]:], skip_special_tokens=True))\n```"
    )
    evaluation = (
        f"Token-level perplexity on the first {results['conversations']} conversations of the "
        f"`{results['split']}` split (users unseen in training), each rendered with the chat template and "
        f"truncated to {results['max_length']} tokens, measured by `convohub.training.perplexity` on the base "
        f"model and on this model (same texts, same tokenizer):\n\n"
        f"| model | perplexity |\n|---|---|\n| base (before fine-tuning) | {results['perplexity_base']} |\n"
        f"| this model | {results['perplexity_trained']} |"
    )
    limitations = (
        f"The tiny profile trains for {args['steps']} steps on {args['train_examples']} synthetic "
        "conversations: the model takes on the corpus' format and phrasing (lower perplexity), it learns no "
        "new facts, and a 135M-parameter model gives short, often shallow answers." if profile == "tiny" else
        "Trained on real user conversations; it can reproduce their content, including toxic text.")
    card = ModelCardInfo(
        license="apache-2.0",
        description=description,
        pipeline_tag="text-generation",
        base_model=base_model,
        datasets=(dataset_id,),
        tags=("convohub", "wildchat", "trl", "sft", *(("lora",) if args.get("lora") else ())),
        results=(MetricResult(task_type="text-generation", dataset_name="wildchat-sample",
                              dataset_type=dataset_id, dataset_config="conversations",
                              dataset_split=results["split"], metric_type="perplexity",
                              metric_name="Perplexity", value=results["perplexity_trained"]),),
        citation=AQA_CITATION,
        sections={"Usage": usage, "Evaluation": evaluation, "Training": _training_table(args),
                  "Training recipe": f"```yaml\n{recipe.read_text(encoding='utf-8')}```",
                  "Limitations": limitations},
    )
    return write_model(target, name, model_dir, card)


AQA_CITATION = """@inproceedings{zhang2025aqa,
  title     = {From Chat Logs to Collective Insights: Aggregative Question Answering},
  author    = {Wentao Zhang and Woojeong Kim and Yuntian Deng},
  booktitle = {Proceedings of the 2025 Conference on Empirical Methods in Natural Language Processing},
  year      = {2025}
}"""
