"""Evaluate and publish the causal LM fine-tuned on the WildChat-format corpus (declared by :data:`SPEC`).

Training launches ``training/chat_lm/train_chat_lm.py`` with the profile's recipe (``tiny.yaml``:
SmolLM2-135M-Instruct with LoRA on CPU; ``paper.yaml``: Qwen3-8B on GPUs) through ``accelerate launch``
(``SPEC.train``, :class:`convohub.model_spec.ModelSpec`). The script saves merged weights, the resolved
arguments (``training_args.json``, :func:`convohub.training.runs.save_arguments`, as every convohub script) and
``train_results.json``: what the run used and did (base model, data, steps, loss, time). Evaluation and
the card read that record, never the recipe, so command-line overrides are what they report. Evaluation
measures the held-out perplexity of the base model and of the trained model on the same texts with
:func:`convohub.training.perplexity.perplexity`; the card (``model_cards/wildchat_chat_lm.md``) reports
exactly those measured numbers.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from convohub.hub import ModelCardInfo, load_split, read_json
from convohub.model_spec import CardInput, CardValues, ModelSpec, block, profile_recipes
from convohub.registry import positive_int_setting
from convohub.training.chat_sft import TRAINING_RECORD_FILE, card_training_values

DATASET_REPO = "wildchat-sample"
#: ``CONVOHUB_CHAT_LM_EVAL_CONVERSATIONS=N``: the release measures both perplexities on the first N held-out
#: conversations instead of the number the training run recorded (smoke tests; the card states the count)
EVAL_CONVERSATIONS_ENV = "CONVOHUB_CHAT_LM_EVAL_CONVERSATIONS"


def read_training_record(model_dir: Path) -> dict[str, Any]:
    """What the training run used and did (data, base model, steps, loss), saved next to the model."""
    path = Path(model_dir) / TRAINING_RECORD_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: {model_dir} was not written by {SPEC.script} "
                                "(re-run the training step, or `convohub train training/chat_lm/<profile>.yaml`)")
    return read_json(path)


def _held_out_rows(args: Mapping[str, Any], dataset_dir: Path | None, limit: int | None) -> list[dict[str, Any]]:
    """The first ``limit`` conversations of the evaluation split training recorded."""
    source = str(dataset_dir) if dataset_dir is not None else str(args["dataset_path"])
    rows = load_split(source, args["dataset_config"], args["eval_split"])
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


def card_values(card: CardInput) -> CardValues:
    """The card's metadata and values: the measured perplexities and what the training run recorded."""
    from huggingface_hub import EvalResult

    args, results = read_training_record(card.model_dir), card.results
    base_model, lora = args.get("base_model"), args.get("lora")
    info = ModelCardInfo(
        license="apache-2.0",
        pipeline_tag="text-generation",
        base_model=base_model,
        datasets=(card.dataset_id,),
        tags=("convohub", "wildchat", "trl", "sft", *(("lora",) if lora else ())),
        results=(EvalResult(task_type="text-generation", dataset_name=DATASET_REPO, dataset_type=card.dataset_id,
                            dataset_config="conversations", dataset_split=results["split"], metric_type="perplexity",
                            metric_name="Perplexity", metric_value=results["perplexity_trained"]),),
    )
    values = {
        **card_training_values(args, "train_split"),
        **{k: results[k] for k in ("conversations", "split", "max_length", "perplexity_base", "perplexity_trained")},
        "limitations": block(card.tiny, "limitations_tiny", "limitations_paper"),
    }
    return info, values


SPEC = ModelSpec(
    name="chat_lm",
    script="training/chat_lm/train_chat_lm.py",
    recipes=profile_recipes("training/chat_lm", "tiny", "paper"),
    repos={"tiny": "wildchat-chat-lm-tiny", "paper": "wildchat-chat-lm-qwen3-8b"},
    dataset=DATASET_REPO,
    template="wildchat_chat_lm",
    card_values=card_values,
    evaluate=lambda model_dir, dataset_dir, _models: evaluate(
        model_dir, dataset_dir, max_conversations=positive_int_setting(EVAL_CONVERSATIONS_ENV)),
    headline=("perplexity_base", "perplexity_trained"),
    eval_settings=(EVAL_CONVERSATIONS_ENV,),
)
