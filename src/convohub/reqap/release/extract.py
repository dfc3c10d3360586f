"""The EXTRACT model in the release: training pieces, evaluation and card, declared by :data:`SPEC`.

Training (``SPEC.train``) launches training/reqap_extract/train_reqap_extract.py under ``accelerate launch``
with the profile's recipe (``tiny.yaml`` offline, ``paper.yaml`` at paper scale) on a built PerQA dataset
folder (:func:`convohub.training.runs.run_recipe`); the script builds its trainer from the pieces here:

* :func:`weighted_trainer_class`: ``Seq2SeqTrainer`` whose loss weights each example (alias pairs 0.2),
  because the paper down-weights synonyms instead of dropping them; :class:`WeightedCollator` pads like
  ``DataCollatorForSeq2Seq`` and carries the ``weight`` column;
* :func:`exact_match`: the held-out measure of the card; :func:`blocked_by_no_repeat`: whether
  ``no_repeat_ngram_size`` makes a reference impossible to generate (a reference whose token ids repeat an
  n-gram cannot be produced when that n-gram is banned).

Evaluation derives the held-out pairs of one split (the test personas for the card) with the pair settings
the run itself used -- read from the ``training_args.json`` the script saved next to the model, so CLI
overrides count -- and measures greedy exact match; the card (``model_cards/reqap_extract.md``) reports
those measured numbers. Heavy imports (torch, transformers) happen inside functions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from convohub.hub import ModelCardInfo
from convohub.model_spec import CardInput, CardValues, ModelSpec, block, profile_recipes
from convohub.perqa.dataset import REQAP_CITATION
from convohub.reqap.components.extract import generate_values, normalise
from convohub.reqap.data.extract import ExtractPair


def tokenize_pairs(pairs: Sequence[ExtractPair], tokenizer: Any, *, max_source_length: int = 512,
                   max_target_length: int = 64, with_weights: bool = True) -> Any:
    """A ``datasets.Dataset`` with exactly the model inputs (input_ids, attention_mask, labels[, weight])."""
    import datasets

    enc = tokenizer([p.input for p in pairs], max_length=max_source_length, truncation=True)
    labels = tokenizer(text_target=[p.output for p in pairs], max_length=max_target_length, truncation=True)
    cols: dict[str, Any] = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
                            "labels": labels["input_ids"]}
    if with_weights:
        cols["weight"] = [float(p.weight) for p in pairs]
    return datasets.Dataset.from_dict(cols)


class WeightedCollator:
    """``DataCollatorForSeq2Seq`` plus a float ``weight`` tensor (absent weights mean 1.0)."""

    def __init__(self, tokenizer: Any, model: Any = None) -> None:
        from transformers import DataCollatorForSeq2Seq

        self.inner = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100)

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        weights = [float(f.get("weight", 1.0)) for f in features]
        batch = self.inner([{k: v for k, v in f.items() if k != "weight"} for f in features])
        batch["weight"] = torch.tensor(weights, dtype=torch.float32)
        return batch


def weighted_loss(logits: Any, labels: Any, weights: Any) -> Any:
    """Mean over the batch of ``weight * mean token cross-entropy`` of each example.

    Normalised by the batch size, not by the sum of weights: an alias example then really counts 0.2 of
    an ordinary one, whatever the batch holds.
    """
    import torch

    token_loss = torch.nn.functional.cross_entropy(logits.float().transpose(1, 2), labels, ignore_index=-100,
                                                   reduction="none")
    mask = (labels != -100).float()
    per_example = (token_loss * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
    return (per_example * weights.to(per_example.dtype)).mean()


def weighted_trainer_class() -> type:
    """``Seq2SeqTrainer`` with the weighted loss (built lazily so importing this module stays light)."""
    from transformers import Seq2SeqTrainer

    class WeightedSeq2SeqTrainer(Seq2SeqTrainer):
        """Seq2SeqTrainer whose training loss is :func:`weighted_loss` when the batch has weights."""

        # our loss is a per-batch mean: let the Trainer divide it by the accumulation steps
        loss_is_scaled_for_ga = False

        def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                         num_items_in_batch: Any = None) -> Any:
            weights = inputs.pop("weight", None)
            if weights is None:
                return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            outputs = model(**inputs)
            loss = weighted_loss(outputs.logits, inputs["labels"], weights)
            return (loss, outputs) if return_outputs else loss

        def prediction_step(self, model: Any, inputs: dict[str, Any], prediction_loss_only: bool,
                            ignore_keys: list[str] | None = None, **gen_kwargs: Any) -> Any:
            inputs = {k: v for k, v in inputs.items() if k != "weight"}  # generate() rejects unknown kwargs
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys, **gen_kwargs)

    return WeightedSeq2SeqTrainer


def make_compute_metrics(tokenizer: Any) -> Any:
    """``compute_metrics`` for ``predict_with_generate``: exact match of decoded predictions and labels."""
    import numpy as np

    def compute(eval_pred: Any) -> dict[str, float]:
        preds, labels = eval_pred.predictions, eval_pred.label_ids
        if isinstance(preds, tuple):
            preds = preds[0]
        pad = tokenizer.pad_token_id
        preds = np.where(preds < 0, pad, preds)
        labels = np.where(labels < 0, pad, labels)
        got = tokenizer.batch_decode(preds, skip_special_tokens=True)
        ref = tokenizer.batch_decode(labels, skip_special_tokens=True)
        hits = [normalise(g) == normalise(r) for g, r in zip(got, ref, strict=True)]
        return {"exact_match": float(np.mean(hits)) if hits else 0.0}

    return compute


def blocked_by_no_repeat(tokenizer: Any, text: str, n: int) -> bool:
    """True when greedy decoding with ``no_repeat_ngram_size=n`` can never produce ``text``."""
    if n <= 0:
        return False
    ids = tokenizer(text_target=text, add_special_tokens=True)["input_ids"]
    grams = [tuple(ids[i:i + n]) for i in range(len(ids) - n + 1)]
    return len(grams) != len(set(grams))


def exact_match(model: Any, tokenizer: Any, pairs: Sequence[ExtractPair], *, batch_size: int = 32,
                max_source_length: int = 512, max_new_tokens: int = 64,
                no_repeat_ngram_size: int | None = None) -> dict[str, Any]:
    """Exact match on ``pairs`` overall and per pair kind, plus how many references the n-gram ban blocks."""
    got = generate_values(model, tokenizer, [p.input for p in pairs], batch_size=batch_size,
                          max_source_length=max_source_length, max_new_tokens=max_new_tokens,
                          no_repeat_ngram_size=no_repeat_ngram_size)
    hits = [g == normalise(p.output) for g, p in zip(got, pairs, strict=True)]
    total: Counter[str] = Counter(p.kind for p in pairs)
    good: Counter[str] = Counter(p.kind for p, h in zip(pairs, hits, strict=True) if h)
    n = no_repeat_ngram_size if no_repeat_ngram_size is not None else int(
        getattr(model.generation_config, "no_repeat_ngram_size", 0) or 0)
    results: dict[str, Any] = {
        "exact_match": round(sum(hits) / max(len(pairs), 1), 4),
        "pairs": len(pairs),
        "no_repeat_ngram_size": n,
        "references_blocked_by_no_repeat": sum(blocked_by_no_repeat(tokenizer, p.output, n) for p in pairs),
    }
    results |= {f"exact_match_{k}": round(good[k] / total[k], 4) for k in sorted(total)}
    nulls = [h for p, h in zip(pairs, hits, strict=True) if p.output == "null"]
    values = [h for p, h in zip(pairs, hits, strict=True) if p.output != "null"]
    results["exact_match_null_outputs"] = round(sum(nulls) / max(len(nulls), 1), 4)
    results["exact_match_value_outputs"] = round(sum(values) / max(len(values), 1), 4)
    return results


def causal_rows(pairs: Sequence[ExtractPair], alias_weight: float, seed: int) -> list[dict[str, Any]]:
    """The causal variant's training chats (prompt/completion, :func:`extraction_messages`): every pair but the
    key aliases, and a seeded ``alias_weight`` share of those -- trl's SFT has no per-example loss weight, so
    aliases count at their weight by how often they appear instead."""
    from convohub.perqa.vocab import derive_rng
    from convohub.reqap.components.extract import extraction_messages

    rng = derive_rng(seed, "extract-aliases", len(pairs))
    kept = [p for p in pairs if p.kind != "alias" or rng.random() < alias_weight]
    return [{"prompt": extraction_messages(p.input), "completion": [{"role": "assistant", "content": p.output}]}
            for p in kept]


def select_eval_pairs(pairs: Sequence[ExtractPair], limit: int | None, seed: int) -> list[ExtractPair]:
    """A seeded, order-keeping sample of at most ``limit`` held-out pairs (all of them for None)."""
    if limit is None or len(pairs) <= limit:
        return list(pairs)
    from convohub.perqa.vocab import derive_rng

    rng = derive_rng(seed, "extract-eval", len(pairs))
    return [pairs[i] for i in sorted(rng.sample(range(len(pairs)), limit))]


def summarise(results: Mapping[str, Any]) -> str:
    """One log line of an exact-match result."""
    null, values = results["exact_match_null_outputs"], results["exact_match_value_outputs"]
    return (f"exact match {results['exact_match']:.4f} on {results['pairs']} pairs "
            f"(null {null:.4f}, values {values:.4f})")


DATASET_REPO = "perqa"


def evaluate(model_dir: Path, dataset_dir: Path, split: str = "test", *, max_pairs: int | None = None,
             seed: int | None = None) -> dict[str, Any]:
    """Greedy exact match of the trained model on held-out pairs of ``split`` (personas unseen in training).

    Pairs are derived like the training run's (its saved pair settings and seed; ``seed`` overrides the
    seed), then a seeded sample of ``max_pairs`` (default: the run's own ``max_final_eval_pairs``) is scored;
    per-kind exact match and the effect of the saved ``no_repeat_ngram_size`` (how many references it blocks,
    exact match without it) are included. The model the run started from is measured on the same pairs too
    (``before``), unless it was a BART built from scratch for the run.
    """
    from convohub.reqap.components.extract import is_causal, load_extract_model
    from convohub.reqap.data.extract import PairConfig, pairs_from_dataset
    from convohub.training.runs import saved_arguments

    arguments = saved_arguments(model_dir)
    settings = arguments["script"]
    seed = int(arguments["training"]["seed"]) if seed is None else seed
    if max_pairs is None:
        max_pairs = settings.get("max_final_eval_pairs")
    config = PairConfig(seed=seed, alias_weight=float(settings["alias_weight"]),
                        with_persona_names=bool(settings["with_persona_names"]),
                        max_events_per_source=settings["max_events_per_source"])
    pairs = select_eval_pairs(pairs_from_dataset(dataset_dir, split, config), max_pairs, seed)
    tokenizer, model = load_extract_model(model_dir)
    kw = {"max_source_length": int(settings["max_source_length"]),
          "max_new_tokens": int(settings["max_target_length"])}
    results: dict[str, Any] = {"split": split, **exact_match(model, tokenizer, pairs, **kw),
                               "pair_settings": {"alias_weight": config.alias_weight,
                                                 "with_persona_names": config.with_persona_names,
                                                 "max_events_per_source": config.max_events_per_source,
                                                 "seed": seed}}
    if results["no_repeat_ngram_size"] > 0:
        without = exact_match(model, tokenizer, pairs, no_repeat_ngram_size=0, **kw)
        results["exact_match_without_no_repeat"] = without["exact_match"]
    base = _base_model(arguments)
    if base is not None:
        results["before"] = _base_scores(base, is_causal(model), pairs, kw)
    return results


def _base_scores(base: str, causal: bool, pairs: Sequence[ExtractPair], kw: Mapping[str, int]) -> dict[str, Any]:
    """The model a run started from, on the same pairs with the same decoding; kept under the convohub cache
    (:func:`convohub.stages.stage`, keyed by the base's weights, the pairs and the decoding), since a
    re-evaluation of a retrained model meets the same base again."""
    from convohub.models import cache_root, weights_digest
    from convohub.reqap.components.extract import load_extract_model
    from convohub.stages import digest, stage
    from convohub.training.models import resolve_model

    path = resolve_model(base)
    fingerprint = {"base": weights_digest(path) if Path(path).is_dir() else path, "causal": causal, "kw": dict(kw),
                   "pairs": digest([[p.input, p.output, p.kind] for p in pairs])}

    def compute() -> dict[str, Any]:
        tokenizer, model = load_extract_model(path, causal=causal)
        measured = exact_match(model, tokenizer, pairs, **kw)
        return {k: measured[k] for k in ("exact_match", "exact_match_value_outputs", "exact_match_null_outputs")}

    return stage(cache_root() / "extract-base", f"scores-{digest(fingerprint)[:16]}", fingerprint, compute)


def _base_model(arguments: Mapping[str, Any]) -> str | None:
    """The recipe's name of the model a run started from (None: a BART built from scratch for the run)."""
    settings = arguments["script"]
    if settings.get("architecture", "seq2seq") == "causal":
        return str(arguments["model"]["model_name_or_path"])
    return None if settings.get("train_tokenizer_on_data") else str(settings["model_name_or_path"])


def _base_description(model_dir: Path, saved: Mapping[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """(the card's ``base_model`` metadata, the template values naming the base) of a run's saved arguments."""
    from convohub.hub import read_json
    from convohub.training.chat_sft import TRAINING_RECORD_FILE
    from convohub.training.models import TINY_PREFIX, hub_id

    settings = saved["script"]
    if settings.get("architecture", "seq2seq") == "causal":
        name, record = str(saved["model"]["model_name_or_path"]), read_json(Path(model_dir) / TRAINING_RECORD_FILE)
        values = {"base_note": block(name.startswith(TINY_PREFIX), "tiny_causal_base", "causal_base"),
                  "base_model": hub_id(name) or name, "steps": record["steps"], "batch_size": record["batch_size"],
                  **{f"lora_{k}": (record.get("lora") or {}).get(k) for k in ("r", "alpha", "target_modules")}}
        return (None if name.startswith(TINY_PREFIX) else hub_id(name) or name), values
    random_base = bool(settings.get("train_tokenizer_on_data"))
    base_model = str(settings["model_name_or_path"])
    values = {"base_note": block(random_base, "tiny_base", "named_base"), "base_model": base_model,
              "tiny_layers": settings.get("tiny_layers"), "tiny_d_model": settings.get("tiny_d_model"),
              "steps": None}
    return (None if random_base else base_model), values


def card_values(card: CardInput) -> CardValues:
    """The card's metadata and values: the measured exact match (and the base model's, when it has one), and the
    base the run's saved arguments name."""
    from huggingface_hub import EvalResult

    from convohub.training.runs import saved_arguments

    saved, results = saved_arguments(card.model_dir), card.results
    causal = saved["script"].get("architecture", "seq2seq") == "causal"
    base_model, base_values = _base_description(card.model_dir, saved)
    kinds = sorted(k.removeprefix("exact_match_") for k in results
                   if k.startswith("exact_match_") and k != "exact_match_without_no_repeat")
    task = "text-generation" if causal else "text2text-generation"
    info = ModelCardInfo(
        license="apache-2.0" if causal and base_model else "mit",  # SmolLM2 is Apache-2.0
        pipeline_tag=task,
        base_model=base_model,
        datasets=(card.dataset_id,),
        tags=("convohub", "reqap", "perqa", "attribute-extraction",
              *(("lora", "smollm2") if causal else ("seq2seq",))),
        results=(EvalResult(task_type=task, dataset_name=DATASET_REPO, dataset_type=card.dataset_id,
                            dataset_config="observable_events", dataset_split=results["split"],
                            metric_type="exact_match", metric_name="Exact match",
                            metric_value=results["exact_match"]),),
    )
    before = results.get("before")
    values = {
        **base_values,
        **{k: results[k] for k in ("pairs", "split", "exact_match", "no_repeat_ngram_size",
                                   "references_blocked_by_no_repeat")},
        "no_repeat": block(int(results["no_repeat_ngram_size"]) > 0, "no_repeat"),
        "without_no_repeat": block("exact_match_without_no_repeat" in results, "without_no_repeat"),
        "exact_match_without_no_repeat": results.get("exact_match_without_no_repeat"),
        "before": block(before is not None, "before_measured", "before_none"),
        "before_exact_match": before["exact_match"] if before else None,
        "usage": block(causal, "usage_causal", "usage_seq2seq"),
        "kind_rows": "\n".join(f"| {k} | {results[f'exact_match_{k}']} |" for k in kinds),
        "limitations": block(card.tiny, "limitations_tiny_causal" if causal else "limitations_tiny",
                             "limitations_paper"),
        "weakest_kind": min((k for k in kinds if not k.endswith("_outputs")), default="-",
                            key=lambda k: results[f"exact_match_{k}"]),
        "value_outputs": results.get("exact_match_value_outputs"),
        "null_outputs": results.get("exact_match_null_outputs"),
        "citation": REQAP_CITATION.strip(),
    }
    return info, values


SPEC = ModelSpec(
    name="reqap_extract",
    script="training/reqap_extract/train_reqap_extract.py",
    recipes=profile_recipes("training/reqap_extract", "tiny", "paper"),
    repos={"tiny": "reqap-extract-tiny", "paper": "reqap-extract-bart-base"},
    dataset=DATASET_REPO,
    template="reqap_extract",
    card_values=card_values,
    evaluate=lambda model_dir, dataset_dir, _models: evaluate(model_dir, dataset_dir, "test"),
    headline=("exact_match",),
)
