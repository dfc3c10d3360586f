"""Evaluate and publish ReQAP's EXTRACT model, declared by :data:`SPEC` (the release steps come from it).

Training (``SPEC.train``) launches training/reqap_extract/train_reqap_extract.py under ``accelerate launch`` with
the profile's recipe (``tiny.yaml`` offline, ``paper.yaml`` at paper scale) on a built PerQA dataset folder
(:func:`convohub.training.runs.run_recipe`). Evaluation derives the held-out pairs of one split (the test
personas for the card) with the pair settings the run itself used -- read from the ``training_args.json`` the
script saved next to the model, so CLI overrides count -- and measures greedy exact match with
:func:`convohub.reqap.extract_training.exact_match`; the card (``model_cards/reqap_extract.md``) reports those
measured numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convohub.hub import ModelCardInfo
from convohub.model_spec import CardInput, CardValues, ModelSpec, block, profile_recipes
from convohub.perqa.dataset import REQAP_CITATION

DATASET_REPO = "perqa"


def evaluate(model_dir: Path, dataset_dir: Path, split: str = "test", *, max_pairs: int | None = 1000,
             seed: int | None = None) -> dict[str, Any]:
    """Greedy exact match of the trained model on held-out pairs of ``split`` (personas unseen in training).

    Pairs are derived like the training run's (its saved pair settings and seed; ``seed`` overrides the
    seed), then a seeded sample of ``max_pairs`` is scored; per-kind exact match and the effect of the saved
    ``no_repeat_ngram_size`` (how many references it blocks, exact match without it) are included.
    """
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from convohub.reqap.extract_pairs import PairConfig, pairs_from_dataset
    from convohub.reqap.extract_training import exact_match, select_eval_pairs
    from convohub.training.runs import saved_arguments

    arguments = saved_arguments(model_dir)
    settings = arguments["script"]
    seed = int(arguments["training"]["seed"]) if seed is None else seed
    config = PairConfig(seed=seed, alias_weight=float(settings["alias_weight"]),
                        with_persona_names=bool(settings["with_persona_names"]),
                        max_events_per_source=settings["max_events_per_source"])
    pairs = select_eval_pairs(pairs_from_dataset(dataset_dir, split, config), max_pairs, seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir)
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
    return results


def card_values(card: CardInput) -> CardValues:
    """The card's metadata and values: the measured exact match, and the base the run's saved arguments name."""
    from huggingface_hub import EvalResult

    from convohub.training.runs import saved_arguments

    settings, results = saved_arguments(card.model_dir)["script"], card.results
    random_base = bool(settings.get("train_tokenizer_on_data"))
    base_model = str(settings["model_name_or_path"])
    kinds = sorted(k.removeprefix("exact_match_") for k in results
                   if k.startswith("exact_match_") and k != "exact_match_without_no_repeat")
    info = ModelCardInfo(
        license="mit",
        pipeline_tag="text2text-generation",
        base_model=None if random_base else base_model,
        datasets=(card.dataset_id,),
        tags=("convohub", "reqap", "perqa", "attribute-extraction", "seq2seq"),
        results=(EvalResult(task_type="text2text-generation", dataset_name=DATASET_REPO, dataset_type=card.dataset_id,
                            dataset_config="observable_events", dataset_split=results["split"],
                            metric_type="exact_match", metric_name="Exact match",
                            metric_value=results["exact_match"]),),
    )
    values = {
        "base_note": block(random_base, "tiny_base", "named_base"), "base_model": base_model,
        "tiny_layers": settings.get("tiny_layers"), "tiny_d_model": settings.get("tiny_d_model"),
        **{k: results[k] for k in ("pairs", "split", "exact_match", "no_repeat_ngram_size",
                                   "references_blocked_by_no_repeat")},
        "without_no_repeat": block("exact_match_without_no_repeat" in results, "without_no_repeat"),
        "exact_match_without_no_repeat": results.get("exact_match_without_no_repeat"),
        "kind_rows": "\n".join(f"| {k} | {results[f'exact_match_{k}']} |" for k in kinds),
        "limitations": block(card.tiny, "limitations_tiny", "limitations_paper"),
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
